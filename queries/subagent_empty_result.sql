-- name: subagent_empty_result
-- title: Sub-agent runs that returned nothing to their parent
-- severity: medium
-- params: min_runs=1
--
-- A sub-agent whose final response is empty (no text, no tool call: a bare stop) hands its
-- parent nothing; the dispatcher substitutes "(no output)", the parent treats that as the
-- answer or invokes the sub-agent again, and every run's work is lost (seed 004: the explore
-- agent invoked three times, three "(no output)", then the parent itself bailed empty). When an
-- earlier reply of the run did say something, a scan-back through the run's assistant messages
-- would have recovered it; the evidence says which runs. Found per parent session: at least
-- min_runs sub-agent runs whose last call is empty or whitespace. High severity when the parent
-- invoked again. Waste: every call of the runs whose output was lost.
WITH sub AS (
    SELECT session_id, parent_session_id, agent_id,
           count(*) AS n_calls,
           min(ts) AS start_ts, max(ts) AS end_ts,
           arg_min(call_id, seq) AS first_call_id,
           arg_max(call_id, seq) AS last_call_id,
           arg_max(response_kind, seq) AS final_kind,
           coalesce(sum(cost_usd), 0) AS usd,
           list(call_id ORDER BY seq) AS calls,
           sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)) AS tokens,
           count(cost_usd) AS priced,
           string_agg(DISTINCT cost_basis, ',' ORDER BY cost_basis) AS bases
    FROM live_calls
    WHERE agent_id IS NOT NULL AND parent_session_id IS NOT NULL
    GROUP BY session_id, parent_session_id, agent_id
),
lost AS (
    SELECT s.*,
           EXISTS (SELECT 1 FROM messages m
                   WHERE m.session_id = s.session_id AND m.role = 'assistant'
                     AND m.kind = 'text' AND coalesce(m.visible_chars, 0) > 0
                     AND m.call_id <> s.last_call_id) AS recoverable
    FROM sub s
    WHERE s.final_kind IN ('empty', 'whitespace')
),
no_output AS (
    SELECT session_id, count(*) AS n
    FROM messages
    WHERE kind = 'tool_result' AND trim(excerpt) = '(no output)'
    GROUP BY session_id
)
SELECT l.parent_session_id AS stream_key, l.parent_session_id AS session_id,
       min(l.start_ts) AS start_ts, max(l.end_ts) AS end_ts, sum(l.n_calls) AS n_calls,
       arg_min(l.first_call_id, l.start_ts) AS first_call_id,
       arg_max(l.last_call_id, l.end_ts) AS last_call_id,
       sum(l.usd) AS wasted_usd, sum(l.tokens) AS wasted_tokens,
       flatten(list(l.calls ORDER BY l.start_ts)) AS wasted_calls,
       CASE WHEN sum(l.priced) = 0 THEN NULL
            WHEN sum(l.priced) < sum(l.n_calls) THEN 'partial:' || string_agg(DISTINCT l.bases, ',' ORDER BY l.bases)
            ELSE string_agg(DISTINCT l.bases, ',' ORDER BY l.bases) END AS cost_basis,
       CASE WHEN count(*) > 1 THEN 'high' ELSE 'medium' END AS severity,
       count(*) || ' sub-agent run(s) ended with an empty response; the parent got nothing'
           || CASE WHEN any_value(n.n) > 0
                   THEN ' ("(no output)" ' || any_value(n.n) || ' times)' ELSE '' END
           || CASE WHEN count(*) > 1 THEN ' and invoked again ' || (count(*) - 1) || ' time(s)'
                   ELSE '' END
           || CASE WHEN count(*) FILTER (WHERE l.recoverable) > 0
                   THEN '; ' || count(*) FILTER (WHERE l.recoverable)
                        || ' run(s) had said something earlier that a scan-back would recover'
                   ELSE '' END AS summary,
       json_object(
           'first_call_id', arg_min(l.first_call_id, l.start_ts),
           'last_call_id', arg_max(l.last_call_id, l.end_ts),
           'runs', count(*), 'reinvocations', count(*) - 1,
           'no_output_results', coalesce(any_value(n.n), 0),
           'recoverable_runs', count(*) FILTER (WHERE l.recoverable),
           'agents', list(json_object('agent_id', l.agent_id, 'calls', l.n_calls,
                                      'usd', l.usd, 'recoverable', l.recoverable)
                          ORDER BY l.start_ts)
       ) AS evidence
FROM lost l LEFT JOIN no_output n ON n.session_id = l.parent_session_id
GROUP BY l.parent_session_id
HAVING count(*) >= $min_runs
ORDER BY wasted_usd DESC
