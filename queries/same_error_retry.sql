-- name: same_error_retry
-- title: A different command each time, the same error back
-- severity: medium
-- params: min_run=4
--
-- The model rewrites its action after each failure but makes the same mistake, and the tool
-- sends back the same error every time: the actions differ, the observation does not, so no
-- identical-call guard sees it. The second most common loop in real runs (a gpt-5-nano run got
-- the same SyntaxError back 29 times in a row from 29 variants of one action; another, the same
-- "command not found" on 91 of 100 calls). Errors are compared on what they say (at ingest:
-- their numbers, ids and times masked), so the same error naming another line number is the
-- same error. Real agents stop such streaks: OpenHands' stuck detector stops the same action
-- getting an error for the 4th time (action_error = 3 nudges, the 4th stops:
-- openhands-sdk stuck_detector.py), Cline stops after 3 turns whose tools all failed
-- (MistakeTracker, --retries 3; 6 in its SDK core), Roo Code after 3 consecutive mistakes. A
-- test that keeps failing while the code around it changes is not this: a successful result
-- (an edit that worked) breaks the run; nor is one reply's batch of parallel tool calls failing
-- together (Claude Code's "Sibling tool call errored"): the loop is across model calls. Found:
-- tool results in a row in a session that are errors saying the same thing, from min_run
-- model calls and at least two different actions (the same action and the same result each
-- time is repeated_tool_call's). Waste: the calls after the first.
WITH results AS (
    SELECT session_id, tool_use_id, bool_or(is_error) AS is_error,
           min(tool_result_hash) AS h, arg_min(excerpt, idx) AS said
    FROM messages
    WHERE kind = 'tool_result' AND tool_use_id IS NOT NULL
      AND session_id IN (SELECT session_id FROM messages
                         WHERE kind = 'tool_result' AND is_error)
    GROUP BY session_id, tool_use_id
),
t AS (
    SELECT m.session_id, m.idx, m.call_id, m.tool_name, m.tool_args_hash,
           CASE WHEN r.is_error THEN r.h END AS k, r.said
    FROM messages m
    JOIN results r ON r.session_id = m.session_id AND r.tool_use_id = m.tool_use_id
    WHERE m.kind = 'tool_call' AND m.call_id IS NOT NULL
),
w AS (
    SELECT *,
           coalesce(k = lag(k) OVER (PARTITION BY session_id ORDER BY idx), false) AS same,
           row_number() OVER (PARTITION BY session_id ORDER BY idx) AS pos
    FROM t
),
islands AS (
    SELECT *,
           sum(CASE WHEN same THEN 0 ELSE 1 END)
               OVER (PARTITION BY session_id ORDER BY idx ROWS UNBOUNDED PRECEDING) AS grp
    FROM w
),
runs AS (
    SELECT session_id, grp, count(*) AS n, min(pos) AS first_pos
    FROM islands
    WHERE k IS NOT NULL
    GROUP BY session_id, grp
    HAVING count(DISTINCT call_id) >= $min_run
       AND count(DISTINCT coalesce(tool_name, '') || ':' || coalesce(tool_args_hash, '')) >= 2
),
members AS (
    SELECT i.*, r.n, i.pos > r.first_pos AS repeat
    FROM islands i JOIN runs r ON r.session_id = i.session_id AND r.grp = i.grp
),
per_call AS (
    -- A call counts as waste when every tool call it made in the run was a repeat.
    SELECT m.session_id, m.grp, m.call_id, min(m.pos) AS pos, bool_and(m.repeat) AS wasted,
           any_value(c.stream_key) AS stream_key, any_value(c.ts) AS ts,
           any_value(c.seq) AS seq, any_value(c.cost_usd) AS cost_usd,
           any_value(c.cost_basis) AS cost_basis,
           any_value(coalesce(c.input_tokens, 0) + coalesce(c.output_tokens, 0)) AS tokens
    FROM members m JOIN live_calls c ON c.call_id = m.call_id
    GROUP BY m.session_id, m.grp, m.call_id
),
said AS (
    SELECT session_id, grp, any_value(n) AS n, arg_min(said, pos) AS said,
           count(DISTINCT coalesce(tool_name, '') || ':' || coalesce(tool_args_hash, ''))
               AS actions,
           string_agg(DISTINCT tool_name, ', ' ORDER BY tool_name) AS tools
    FROM members GROUP BY session_id, grp
)
SELECT any_value(p.stream_key) AS stream_key, p.session_id,
       min(p.ts) AS start_ts, max(p.ts) AS end_ts, count(*) AS n_calls,
       arg_min(p.call_id, p.pos) AS first_call_id, arg_max(p.call_id, p.pos) AS last_call_id,
       coalesce(sum(p.cost_usd) FILTER (WHERE p.wasted), 0) AS wasted_usd,
       coalesce(sum(p.tokens) FILTER (WHERE p.wasted), 0) AS wasted_tokens,
       list(p.call_id ORDER BY p.pos) FILTER (WHERE p.wasted) AS wasted_calls,
       string_agg(DISTINCT p.cost_basis, ',' ORDER BY p.cost_basis) FILTER (WHERE p.wasted)
           AS cost_basis,
       any_value(s.n) || ' errors in a row saying the same thing, from '
           || any_value(s.actions) || ' different actions ('
           || left(replace(any_value(s.said), chr(10), ' '), 60) || '...)' AS summary,
       json_object(
           'first_call_id', arg_min(p.call_id, p.pos), 'last_call_id', arg_max(p.call_id, p.pos),
           'errors_in_a_row', any_value(s.n), 'distinct_actions', any_value(s.actions),
           'tools', any_value(s.tools), 'first_seq', min(p.seq), 'last_seq', max(p.seq),
           'error', left(any_value(s.said), 200)
       ) AS evidence
FROM per_call p JOIN said s ON s.session_id = p.session_id AND s.grp = p.grp
GROUP BY p.session_id, p.grp
ORDER BY wasted_usd DESC, start_ts
