-- name: repeated_tool_call
-- title: The same tool call again and again
-- severity: medium
-- params: min_repeats=3, min_cycles=3
--
-- An agent that issues the same tool call with the same arguments and gets the same result
-- back, again and again, is not making progress; so is one cycling through two or three such
-- calls (A-B-A-B). Real agents guard this at 3 (opencode's doom loop, OpenHands' alternation)
-- to 5 (Gemini CLI) identical calls. Identical arguments alone are not a loop: Codex polls a
-- running command with the same write_stdin call, and each poll gets new output until the
-- command ends. So a call is the same call only with the same tool, the same arguments (as
-- sorted-key JSON) and the same result (or the same error) - each result tied to its call by
-- tool_use_id and hashed at ingest. A call whose result is unknown (a bill, a log without
-- results) is compared on tool and arguments alone, and never with one whose result is known.
-- A tool call whose arguments the log does not record (tool_args_hash NULL: OpenTelemetry
-- events and spans without them) is the same as no other: it is unknown, not equal.
-- Found per session in the order the calls were made: min_repeats identical calls in a row, or
-- a cycle of period 2 or 3 repeated min_cycles times. Waste: the calls that made the repeats
-- after the first (or after the first cycle).
WITH results AS (
    SELECT session_id, tool_use_id, min(tool_result_hash) AS result_hash
    FROM messages
    WHERE kind = 'tool_result' AND tool_use_id IS NOT NULL AND tool_result_hash IS NOT NULL
    GROUP BY session_id, tool_use_id
),
t AS (
    SELECT m.session_id, m.idx, m.call_id, m.ts,
           m.tool_name || ':' || coalesce(m.tool_args_hash, '?' || m.session_id || '#' || m.idx)
               AS call_key,
           m.tool_name || ':' || coalesce(m.tool_args_hash, '?' || m.session_id || '#' || m.idx)
               || ':' || coalesce(r.result_hash, '?') AS k,
           r.result_hash, m.tool_name
    FROM messages m
    LEFT JOIN results r ON r.session_id = m.session_id AND r.tool_use_id = m.tool_use_id
    WHERE m.kind = 'tool_call' AND m.tool_name IS NOT NULL
),
w AS (
    SELECT *,
           k = lag(k, 1) OVER s AS m1,
           k = lag(k, 2) OVER s AS m2,
           k = lag(k, 3) OVER s AS m3,
           row_number() OVER s AS pos
    FROM t
    WINDOW s AS (PARTITION BY session_id ORDER BY idx)
),
periods AS (
    SELECT *, 1 AS period, coalesce(m1, false) AS hit FROM w
    UNION ALL SELECT *, 2, coalesce(m2, false) FROM w
    UNION ALL SELECT *, 3, coalesce(m3, false) FROM w
),
islands AS (
    SELECT *,
           sum(CASE WHEN hit THEN 0 ELSE 1 END)
               OVER (PARTITION BY session_id, period ORDER BY idx ROWS UNBOUNDED PRECEDING) AS grp
    FROM periods
),
runs AS (
    -- A run of m matching calls at period p starts p calls before its first match. A run of
    -- one call repeated is period 1, never a longer cycle.
    SELECT session_id, period, grp, count(*) AS matches,
           min(pos) FILTER (WHERE hit) AS first_hit, max(pos) FILTER (WHERE hit) AS last_hit
    FROM islands GROUP BY session_id, period, grp
    HAVING count(*) FILTER (WHERE hit) > 0
       AND (period = 1 OR NOT bool_and(coalesce(m1, false)) FILTER (WHERE hit))
),
qualified AS (
    SELECT session_id, period, first_hit - period AS first_pos, last_hit AS last_pos,
           (last_hit - first_hit + 1) + period AS n_tool_calls
    FROM runs
    WHERE (period = 1 AND (last_hit - first_hit + 1) + 1 >= $min_repeats)
       OR (period > 1 AND ((last_hit - first_hit + 1) + period) >= period * $min_cycles)
),
members AS (
    SELECT q.session_id, q.period, q.first_pos, q.n_tool_calls, w.pos, w.call_id, w.ts,
           w.tool_name, w.k, w.call_key, w.result_hash,
           w.pos >= q.first_pos + q.period AS repeat
    FROM qualified q JOIN w ON w.session_id = q.session_id
                           AND w.pos BETWEEN q.first_pos AND q.last_pos
),
priced AS (
    -- Waste counts each call once, and only calls that made nothing but repeats.
    SELECT m.session_id, m.first_pos, m.call_id,
           bool_and(m.repeat) AS only_repeats, any_value(c.cost_usd) AS cost_usd,
           any_value(c.cost_basis) AS cost_basis,
           any_value(coalesce(c.input_tokens, 0) + coalesce(c.output_tokens, 0)) AS tokens,
           any_value(c.stream_key) AS stream_key
    FROM members m LEFT JOIN live_calls c ON c.call_id = m.call_id
    GROUP BY m.session_id, m.first_pos, m.call_id
),
waste AS (
    SELECT session_id, first_pos, any_value(stream_key) AS stream_key,
           coalesce(sum(cost_usd) FILTER (WHERE only_repeats), 0) AS usd,
           list(call_id) FILTER (WHERE only_repeats AND call_id IS NOT NULL) AS calls,
           coalesce(sum(tokens) FILTER (WHERE only_repeats), 0) AS tokens,
           string_agg(DISTINCT cost_basis, ',' ORDER BY cost_basis) FILTER (WHERE only_repeats) AS bases
    FROM priced GROUP BY session_id, first_pos
)
SELECT coalesce(any_value(x.stream_key), m.session_id) AS stream_key, m.session_id,
       min(m.ts) AS start_ts, max(m.ts) AS end_ts,
       count(DISTINCT m.call_id) AS n_calls,
       arg_min(m.call_id, m.pos) AS first_call_id, arg_max(m.call_id, m.pos) AS last_call_id,
       any_value(x.usd) AS wasted_usd, any_value(x.tokens) AS wasted_tokens,
       any_value(x.calls) AS wasted_calls,
       any_value(x.bases) AS cost_basis,
       CASE WHEN any_value(m.period) = 1
            THEN any_value(m.n_tool_calls) || ' identical ' || any_value(m.tool_name)
                 || ' calls in a row'
            ELSE 'a cycle of ' || any_value(m.period) || ' tool calls ('
                 || string_agg(DISTINCT m.tool_name, ', ' ORDER BY m.tool_name) || ') repeated '
                 || (any_value(m.n_tool_calls) // any_value(m.period)) || ' times' END
       || CASE WHEN bool_and(m.result_hash IS NOT NULL)
               THEN ', the same result back each time' ELSE '' END AS summary,
       json_object(
           'first_call_id', arg_min(m.call_id, m.pos), 'last_call_id', arg_max(m.call_id, m.pos),
           'period', any_value(m.period), 'tool_calls', any_value(m.n_tool_calls),
           'tools', list(DISTINCT m.tool_name), 'distinct_arguments', count(DISTINCT m.call_key),
           'results', CASE WHEN bool_and(m.result_hash IS NOT NULL) THEN 'the same each time'
                           ELSE 'unknown' END
       ) AS evidence
FROM members m
JOIN waste x ON x.session_id = m.session_id AND x.first_pos = m.first_pos
GROUP BY m.session_id, m.first_pos
ORDER BY wasted_usd DESC, start_ts
