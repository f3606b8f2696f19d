-- name: alternating_tool_thinking
-- title: Thinking-only replies between tool calls, never three in a row
-- severity: high
-- params: min_empty=5, consecutive_cap=3
--
-- A reasoning model alternates tool calls with replies that carry only reasoning (or nothing):
-- no answer, no tool call. A guard that counts only consecutive empty replies, reset by every
-- tool call, never reaches its cap, and the turn spins until an iteration limit (seed 001:
-- Netclaw's counter of 3, reset on every tool batch, against a Qwen3 thinking model, until 60
-- tool iterations). Found per turn where the log has turns, else per session (a billing
-- export has no turns; its sessions end at a silence): at least min_empty thinking-only or
-- empty replies that come right after a tool call (the stalls the guard's reset forgives),
-- never consecutive_cap of them in a row. Waste: those thinking-only and empty calls.
WITH busy AS (
    -- Only scopes with enough stalls at all are worth ordering: one narrow pass over every
    -- call finds them, and only their calls are read whole.
    SELECT coalesce(turn_id, session_id, stream_key) AS scope
    FROM live_calls
    WHERE response_kind IS NOT NULL
    GROUP BY scope
    HAVING count(*) FILTER (WHERE response_kind IN ('thinking_only', 'empty')) >= $min_empty
       AND count(*) FILTER (WHERE response_kind IN ('tool_call', 'truncated_tool_call')) > 0
),
c AS (
    SELECT call_id, stream_key, session_id, seq, ts, cost_usd, cost_basis, output_tokens,
           reasoning_tokens, reasoning_chars, response_kind,
           response_kind IN ('thinking_only', 'empty') AS any_stall,
           response_kind IN ('tool_call', 'truncated_tool_call') AS tool,
           coalesce(turn_id, session_id, stream_key) AS scope,
           CASE WHEN turn_id IS NOT NULL THEN 'turn' ELSE 'session' END AS scope_kind
    FROM live_calls
    WHERE response_kind IS NOT NULL
      AND coalesce(turn_id, session_id, stream_key) IN (SELECT scope FROM busy)
),
w0 AS (
    SELECT *,
           sum(CASE WHEN any_stall THEN 0 ELSE 1 END)
               OVER (PARTITION BY scope ORDER BY seq, ts, call_id ROWS UNBOUNDED PRECEDING)
               AS streak_no,
           -- What the agent did last, before this reply, that was not a stall.
           last_value(CASE WHEN NOT any_stall THEN response_kind END IGNORE NULLS)
               OVER (PARTITION BY scope ORDER BY seq, ts, call_id
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
    FROM c
),
w AS (
    -- Only stalls that follow a tool call count: the alternation the guard's reset misses.
    SELECT *, any_stall AND before IN ('tool_call', 'truncated_tool_call') AS stalled
    FROM w0
),
streaks AS (
    SELECT scope, streak_no, count(*) FILTER (WHERE any_stall) AS stalled_in_row
    FROM w GROUP BY scope, streak_no
),
scopes AS (
    SELECT w.scope,
           any_value(stream_key) AS stream_key,
           any_value(session_id) AS session_id,
           any_value(scope_kind) AS scope_kind,
           count(*) FILTER (WHERE stalled) AS n_stalled,
           count(*) FILTER (WHERE tool) AS n_tool,
           count(*) AS n_turn_calls,
           min(ts) FILTER (WHERE stalled) AS start_ts,
           max(ts) FILTER (WHERE stalled) AS end_ts,
           arg_min(call_id, seq) FILTER (WHERE stalled) AS first_call_id,
           arg_max(call_id, seq) FILTER (WHERE stalled) AS last_call_id,
           coalesce(sum(cost_usd) FILTER (WHERE stalled), 0) AS wasted_usd,
           list(call_id ORDER BY seq) FILTER (WHERE stalled) AS wasted_calls,
           coalesce(sum(output_tokens) FILTER (WHERE stalled), 0) AS wasted_tokens,
           coalesce(sum(reasoning_tokens) FILTER (WHERE stalled), 0) AS reasoning_tokens,
           coalesce(sum(reasoning_chars) FILTER (WHERE stalled), 0) AS reasoning_chars,
           count(*) FILTER (WHERE response_kind = 'empty') AS n_empty,
           coalesce(sum(cost_usd), 0) AS turn_usd,
           count(cost_usd) FILTER (WHERE stalled) AS priced,
           string_agg(DISTINCT cost_basis, ',' ORDER BY cost_basis) FILTER (WHERE stalled) AS bases
    FROM w GROUP BY w.scope
),
longest AS (
    SELECT scope, max(stalled_in_row) AS max_in_row FROM streaks GROUP BY scope
)
SELECT s.stream_key, s.session_id, s.start_ts, s.end_ts, s.n_stalled AS n_calls,
       s.first_call_id, s.last_call_id, s.wasted_usd, s.wasted_tokens, s.wasted_calls,
       CASE WHEN s.priced = 0 THEN NULL
            WHEN s.priced < s.n_stalled THEN 'partial:' || s.bases ELSE s.bases END
           AS cost_basis,
       format('{:,}', s.n_stalled) || ' thinking-only or empty replies between '
           || format('{:,}', s.n_tool)
           || ' tool calls in one ' || s.scope_kind || ', never more than ' || l.max_in_row
           || ' in a row'
           || CASE WHEN s.priced > 0 THEN ' ($' || format('{:,.2f}', s.wasted_usd) || ' of $'
                   || format('{:,.2f}', s.turn_usd) || ' for the ' || s.scope_kind || ')' ELSE '' END
           AS summary,
       json_object(
           'first_call_id', s.first_call_id, 'last_call_id', s.last_call_id,
           'scope', s.scope, 'scope_kind', s.scope_kind, 'thinking_only_or_empty', s.n_stalled, 'empty', s.n_empty,
           'tool_calls', s.n_tool, 'calls_in_turn', s.n_turn_calls,
           'longest_streak', l.max_in_row, 'reasoning_tokens', s.reasoning_tokens,
           'reasoning_chars', s.reasoning_chars, 'turn_usd', s.turn_usd
       ) AS evidence
FROM scopes s JOIN longest l USING (scope)
WHERE s.n_stalled >= $min_empty AND l.max_in_row < $consecutive_cap AND s.n_tool > 0
ORDER BY s.wasted_usd DESC, s.start_ts
