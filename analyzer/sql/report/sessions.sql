-- Spend by session, as `usage session` groups the calls by default: the session, else the
-- stream, with its sub-agents' calls folded in (a sub-agent's calls name their agent and the
-- session that started it), most dollars first: its project (the most frequent of its calls',
-- as `usage session` names it), first and last call, calls, tokens (as `usage` counts them),
-- dollars, its models, and the waste and number of the incidents found in it (a sub-agent's
-- incidents count in the session it folds into); the first $top rows, then the rest summed in
-- one row (its key and project NULL, `sessions` how many it sums). Parameter: top (rows kept
-- whole). Models are named as `usage` names them.
WITH keyed AS (
    SELECT *, coalesce(session_id, stream_key, '(none)') AS own,
           CASE WHEN agent_id IS NOT NULL AND parent_session_id IS NOT NULL
                THEN parent_session_id ELSE coalesce(session_id, stream_key, '(none)') END AS k
    FROM live_calls),
folds AS (SELECT DISTINCT own, k FROM keyed),
spend AS (
    SELECT k,
           mode(coalesce(project, app)) AS project,
           min(ts) AS first_ts, max(ts) AS last_ts, count(*) AS calls,
           coalesce(sum(greatest(coalesce(input_tokens, 0) - coalesce(cached_input_tokens, 0)
                                 - coalesce(cache_write_tokens, 0), 0)
                        + coalesce(cache_write_tokens, 0) + coalesce(cached_input_tokens, 0)
                        + coalesce(output_tokens, 0)), 0) AS tokens,
           coalesce(sum(cost_usd), 0) AS usd,
           list_sort(list(DISTINCT coalesce(model, '(no model)')
                            || CASE WHEN variant = 'fast' THEN ' (fast)' ELSE '' END)) AS models
    FROM keyed GROUP BY 1),
waste AS (
    SELECT coalesce(f.k, coalesce(i.session_id, i.stream_key, '(none)')) AS k,
           sum(i.wasted_usd) AS wasted, count(*) AS n
    FROM incidents i
    LEFT JOIN folds f ON f.own = coalesce(i.session_id, i.stream_key, '(none)')
    GROUP BY 1),
ranked AS (
    SELECT s.*, coalesce(w.wasted, 0) AS wasted, coalesce(w.n, 0) AS n,
           row_number() OVER (ORDER BY s.usd DESC, s.tokens DESC, s.k) AS pos
    FROM spend s LEFT JOIN waste w USING (k))
SELECT CASE WHEN min(pos) <= $top THEN any_value(k) END AS k, count(*) AS sessions,
       CASE WHEN min(pos) <= $top THEN any_value(project) END, min(first_ts), max(last_ts), sum(calls), sum(tokens), sum(usd),
       sum(wasted), sum(n),
       list_sort(list_distinct(flatten(list(models)))) AS models
FROM ranked
GROUP BY least(pos, $top + 1)
ORDER BY least(pos, $top + 1);
