-- name: compaction_thrash
-- title: Compacting again and again, the context refilled at once
-- severity: medium
-- params: min_compactions=3, max_calls_between=3
--
-- An agent whose context is full compacts it (a summary replaces the history), and then fills
-- it again at once, re-reading the same files, and compacts again: each round pays for a
-- summary and for the reads that refill the window, and the work does not move. Public bug
-- reports: Codex compacting 74 times in 5.9 hours with re-reads after 95% of them (openai/codex
-- #36664); Claude Code compacting 211 times without progress (anthropics/claude-code #24179).
-- Claude Code now stops autocompaction after 3 refills in a row (CHANGELOG 2.1.89, "autocompact
-- thrash"). Both agents write their compactions into the log (Claude Code's compact boundary,
-- Codex's compacted line: messages of kind 'compaction'). Found: min_compactions compactions in
-- a session, each at most max_calls_between model calls after the one before. Waste: the
-- calls from the first compaction of the run to the last (they only refilled the context).
WITH marks AS (
    SELECT session_id, idx FROM messages WHERE kind = 'compaction'
),
sessions AS (
    SELECT session_id FROM marks GROUP BY session_id HAVING count(*) >= $min_compactions
),
calls_in AS (
    -- Each call placed by the first message it wrote.
    SELECT c.call_id, c.stream_key, c.session_id, c.seq, c.ts, c.cost_usd, c.cost_basis,
           coalesce(c.input_tokens, 0) + coalesce(c.output_tokens, 0) AS tokens,
           min(m.idx) AS idx
    FROM live_calls c JOIN messages m ON m.call_id = c.call_id
    WHERE c.session_id IN (SELECT session_id FROM sessions)
    GROUP BY c.call_id, c.stream_key, c.session_id, c.seq, c.ts, c.cost_usd, c.cost_basis,
             c.input_tokens, c.output_tokens
),
events AS (
    SELECT session_id, idx, true AS is_mark, NULL AS call_id FROM marks
    WHERE session_id IN (SELECT session_id FROM sessions)
    UNION ALL
    SELECT session_id, idx, false AS is_mark, call_id FROM calls_in
),
placed AS (
    -- seg: how many compactions came before (a compaction counts itself).
    SELECT *, sum(CASE WHEN is_mark THEN 1 ELSE 0 END)
                  OVER (PARTITION BY session_id ORDER BY idx, is_mark DESC
                        ROWS UNBOUNDED PRECEDING) AS seg
    FROM events
),
between_marks AS (
    SELECT session_id, seg, count(*) FILTER (WHERE NOT is_mark) AS calls
    FROM placed GROUP BY session_id, seg
),
gaps AS (
    -- Each compaction with the calls since the one before it (none before the first: it
    -- starts a run).
    SELECT p.session_id, p.idx, p.seg,
           CASE WHEN p.seg > 1 THEN coalesce(b.calls, 0) END AS since
    FROM placed p
    LEFT JOIN between_marks b ON b.session_id = p.session_id AND b.seg = p.seg - 1
    WHERE p.is_mark
),
islands AS (
    SELECT *,
           sum(CASE WHEN since <= $max_calls_between THEN 0 ELSE 1 END)
               OVER (PARTITION BY session_id ORDER BY idx ROWS UNBOUNDED PRECEDING) AS grp
    FROM gaps
),
thrash AS (
    SELECT session_id, grp, count(*) AS n, min(idx) AS first_idx, max(idx) AS last_idx
    FROM islands GROUP BY session_id, grp
    HAVING count(*) >= $min_compactions
),
spent AS (
    SELECT t.session_id, t.grp, t.n, c.call_id, c.stream_key, c.seq, c.ts, c.cost_usd,
           c.cost_basis, c.tokens
    FROM thrash t JOIN calls_in c
      ON c.session_id = t.session_id AND c.idx > t.first_idx AND c.idx < t.last_idx
)
SELECT any_value(stream_key) AS stream_key, session_id, min(ts) AS start_ts, max(ts) AS end_ts,
       count(*) AS n_calls,
       arg_min(call_id, seq) AS first_call_id, arg_max(call_id, seq) AS last_call_id,
       coalesce(sum(cost_usd), 0) AS wasted_usd, coalesce(sum(tokens), 0) AS wasted_tokens,
       list(call_id ORDER BY seq) AS wasted_calls,
       string_agg(DISTINCT cost_basis, ',' ORDER BY cost_basis) AS cost_basis,
       any_value(n) || ' compactions in a row, each within ' || $max_calls_between
           || ' calls of the one before: the context refilled at once' AS summary,
       json_object(
           'first_call_id', arg_min(call_id, seq), 'last_call_id', arg_max(call_id, seq),
           'compactions', any_value(n), 'calls_between_them', count(*)
       ) AS evidence
FROM spent
GROUP BY session_id, grp
ORDER BY wasted_usd DESC, start_ts
