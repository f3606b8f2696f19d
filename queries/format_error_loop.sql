-- name: format_error_loop
-- title: Replies the agent could not parse, again and again
-- severity: medium
-- params: min_run=4
--
-- The model answers in a shape the agent cannot act on (several bash blocks or none, a
-- malformed tool call), the agent sends back its format-error message, and the model does it
-- again: each refused reply is paid for and does nothing, and each refusal adds the same text
-- to the prompt. The most common loop in real runs (mini-swe-agent runs refused 13 times in a
-- row; a Gemini 3 Pro SWE-bench run in runs of 7, 9 and 6). Real agents end it there:
-- SWE-agent re-asks 3 times (max_requeries = 3, sweagent/agent/agents.py), so its 4th refused
-- reply in a row ends the run (exit_format); mini-swe-agent exits after 3 consecutive format
-- errors (max_consecutive_format_errors, #863, RepeatedFormatError); CrewAI tries 3 parses.
-- Three in a row is what those agents still tolerate, and healthy runs have them (a real
-- SWE-bench run that worked to its step limit has a run of 3 among 14 scattered refusals): a
-- loop is min_run in a row, one past what the agents allow. A refusal is the agent's own word
-- in its log (messages of kind 'format_error', tied to the refused call). Found in a session,
-- in the order the calls were made. Waste: the refused calls after the first (the first is a
-- mistake the agent answered; every one after it was paid for the same refusal).
WITH refused AS (
    SELECT DISTINCT call_id FROM messages
    WHERE kind = 'format_error' AND call_id IS NOT NULL
),
said AS (
    SELECT call_id, arg_min(excerpt, idx) AS refusal, arg_min(tool_result_hash, idx) AS h
    FROM messages
    WHERE kind = 'format_error' AND call_id IS NOT NULL
    GROUP BY call_id
),
c AS (
    SELECT l.call_id, l.stream_key, l.session_id, l.seq, l.ts,
           r.call_id IS NOT NULL AS is_refused
    FROM live_calls l LEFT JOIN refused r ON r.call_id = l.call_id
    WHERE l.session_id IN (SELECT session_id FROM messages WHERE kind = 'format_error')
),
islands AS (
    SELECT *,
           row_number() OVER (PARTITION BY session_id ORDER BY seq, call_id)
               - row_number() OVER (PARTITION BY session_id, is_refused ORDER BY seq, call_id)
               AS grp
    FROM c
),
runs AS (
    SELECT session_id, grp, count(*) AS n,
           min(seq) AS first_seq, max(seq) AS last_seq
    FROM islands WHERE is_refused
    GROUP BY session_id, grp
    HAVING count(*) >= $min_run
),
members AS (
    SELECT i.call_id, i.stream_key, i.session_id, i.seq, i.ts, r.grp, r.n, r.first_seq,
           i.seq > r.first_seq AS wasted,
           x.cost_usd, x.cost_basis,
           coalesce(x.input_tokens, 0) + coalesce(x.output_tokens, 0) AS tokens,
           s.refusal, s.h
    FROM islands i
    JOIN runs r ON r.session_id = i.session_id AND r.grp = i.grp AND i.is_refused
    JOIN live_calls x ON x.call_id = i.call_id
    LEFT JOIN said s ON s.call_id = i.call_id
)
SELECT any_value(stream_key) AS stream_key, session_id,
       min(ts) AS start_ts, max(ts) AS end_ts,
       count(*) AS n_calls,
       arg_min(call_id, seq) AS first_call_id, arg_max(call_id, seq) AS last_call_id,
       coalesce(sum(cost_usd) FILTER (WHERE wasted), 0) AS wasted_usd,
       coalesce(sum(tokens) FILTER (WHERE wasted), 0) AS wasted_tokens,
       list(call_id ORDER BY seq) FILTER (WHERE wasted) AS wasted_calls,
       string_agg(DISTINCT cost_basis, ',' ORDER BY cost_basis) FILTER (WHERE wasted)
           AS cost_basis,
       any_value(n) || ' replies in a row refused by the agent as unparseable ("'
           || left(arg_min(refusal, seq), 60) || '...")' AS summary,
       json_object(
           'first_call_id', arg_min(call_id, seq), 'last_call_id', arg_max(call_id, seq),
           'refused_in_a_row', any_value(n), 'first_seq', min(seq), 'last_seq', max(seq),
           'distinct_refusals', count(DISTINCT h),
           'refusal', left(arg_min(refusal, seq), 200)
       ) AS evidence
FROM members
GROUP BY session_id, grp
ORDER BY wasted_usd DESC, start_ts
