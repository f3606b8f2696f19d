-- name: truncated_tool_call_streak
-- title: Tool calls cut off by the output limit, one after another
-- severity: high
-- params: min_streak=3, max_gap_seconds=300, kept_ratio=0.5
--
-- A tool call cut off by max_tokens cannot run: its arguments are incomplete JSON, the agent
-- throws the output away and asks again, and the next answer is cut off the same way (seed
-- 003's real failure). A log shows the cut-off tool call itself; a billing row only shows a
-- `length` finish, so there the cut is inferred from what came next: the next call of the
-- stream followed within max_gap_seconds and its prompt grew by less than kept_ratio of the
-- cut-off output - the output was discarded, not kept in the conversation (a long answer that
-- was delivered is kept, and the user reads it before the next call). The last call of such a
-- streak, with nothing after it, counts when it is cut at the same size as the one before.
-- A streak is min_streak such calls in a row. Waste: every call in the streak.
WITH n AS (
    -- One pass over every call for its neighbours, carrying only what that needs; then only
    -- max_tokens finishes go on, and their other columns are joined back.
    SELECT call_id, finish_reason, response_kind,
           row_number() OVER s AS pos,
           lead(input_tokens) OVER s AS next_in,
           epoch(lead(ts) OVER s) - epoch(ts) AS next_gap,
           epoch(ts) - epoch(lag(ts) OVER s) AS prev_gap
    FROM live_calls
    -- (Only the streams that have such a finish: the others have nothing to find.)
    WHERE stream_key IN (SELECT stream_key FROM live_calls WHERE finish_reason = 'length' OR response_kind = 'truncated_tool_call')
    WINDOW s AS (PARTITION BY stream_key ORDER BY seq, ts, call_id)
    QUALIFY finish_reason = 'length' OR response_kind = 'truncated_tool_call'
),
c AS (
    SELECT l.call_id, l.stream_key, l.session_id, l.seq, l.ts, l.input_tokens, l.output_tokens,
           l.finish_reason, l.response_kind, l.cost_usd, l.cost_basis, l.content_chars,
           l.tool_call_count,
           l.content_chars IS NULL AND l.tool_call_count IS NULL AS billing_view,
           n.pos, n.next_in, n.next_gap, n.prev_gap
    FROM n JOIN live_calls l ON l.call_id = n.call_id
),
inferred AS (
    SELECT *,
           response_kind = 'truncated_tool_call'
           OR lf_output_discarded(finish_reason, content_chars, tool_call_count, input_tokens,
                                  output_tokens, next_in, next_gap, $max_gap_seconds,
                                  $kept_ratio) AS cut
    FROM c
),
t AS (
    -- lag() here is the previous max_tokens finish; pos says whether it came right before.
    SELECT *,
           cut OR (finish_reason = 'length' AND billing_view AND next_in IS NULL
                   AND lag(cut) OVER s AND lag(pos) OVER s = pos - 1
                   AND prev_gap <= $max_gap_seconds
                   AND output_tokens >= 0.9 * lag(output_tokens) OVER s) AS truncated
    FROM inferred
    WINDOW s AS (PARTITION BY stream_key ORDER BY pos)
),
joined AS (
    SELECT *,
           truncated AND lag(truncated) OVER s AND lag(pos) OVER s = pos - 1
               AND coalesce(prev_gap, 0) <= $max_gap_seconds AS continues
    FROM t
    WINDOW s AS (PARTITION BY stream_key ORDER BY pos)
),
runs AS (
    SELECT *,
           sum(CASE WHEN continues THEN 0 ELSE 1 END)
               OVER (PARTITION BY stream_key ORDER BY pos ROWS UNBOUNDED PRECEDING) AS run_no
    FROM joined
),
grouped AS (
    SELECT stream_key, run_no, any_value(session_id) AS session_id,
           min(ts) AS start_ts, max(ts) AS end_ts, count(*) AS n_calls,
           arg_min(call_id, seq) AS first_call_id, arg_max(call_id, seq) AS last_call_id,
           coalesce(sum(cost_usd), 0) AS wasted_usd, sum(output_tokens) AS wasted_tokens,
           list(call_id ORDER BY seq) AS wasted_calls,
           count(cost_usd) AS priced, string_agg(DISTINCT cost_basis, ',' ORDER BY cost_basis) AS bases,
           count(*) FILTER (WHERE response_kind = 'truncated_tool_call') AS seen_in_log,
           list(input_tokens ORDER BY seq) AS prompts,
           list(output_tokens ORDER BY seq) AS outputs,
           bool_and(truncated) AS all_truncated
    FROM runs GROUP BY stream_key, run_no
)
SELECT stream_key, session_id, start_ts, end_ts, n_calls, first_call_id, last_call_id,
       wasted_usd, wasted_tokens, wasted_calls,
       CASE WHEN priced = 0 THEN NULL
            WHEN priced < n_calls THEN 'partial:' || bases ELSE bases END AS cost_basis,
       n_calls || ' responses in a row hit the output limit in the middle of a tool call'
           || CASE WHEN seen_in_log = 0 THEN ' (inferred: each output was discarded)' ELSE '' END
           || CASE WHEN priced > 0 THEN ' ($' || format('{:,.2f}', wasted_usd) || ')' ELSE '' END
           AS summary,
       json_object(
           'first_call_id', first_call_id, 'last_call_id', last_call_id, 'calls', n_calls,
           'prompt_tokens', prompts, 'output_tokens', outputs,
           'seen_in_log', seen_in_log, 'inferred_from_billing', n_calls - seen_in_log
       ) AS evidence
FROM grouped
WHERE all_truncated AND n_calls >= $min_streak
ORDER BY wasted_usd DESC, start_ts
