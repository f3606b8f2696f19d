-- name: length_counter_false_alarm
-- title: A breaker counting every max_tokens finish would stop legitimate answers
-- severity: info
-- params: breaker_threshold=3, max_gap_seconds=300, kept_ratio=0.5
--
-- A long answer cut off at max_tokens is still an answer: the user got the text. A circuit
-- breaker that counts every `length` finish across a session, cleared only by another finish
-- reason, fires on a user who asked for three long reports (seed 003: HIPAA report, data
-- quality analysis, final summary - three turns, three `length` finishes, breaker at 3, session
-- dead). This points out where such a breaker, at breaker_threshold, would have killed work
-- that was not failing: a run of consecutive `length` finishes in a session reaching the
-- threshold, at least one of which was a delivered answer (in a log, a text answer; in a bill,
-- an output the next prompt kept, judged as in truncated_tool_call_streak). Information only:
-- nothing was wasted.
WITH n AS (
    -- One pass over every call for its neighbours, carrying only what that needs; then only
    -- max_tokens finishes go on, and their other columns are joined back.
    SELECT call_id, finish_reason,
           row_number() OVER s AS pos,
           lead(input_tokens) OVER s AS next_in,
           epoch(lead(ts) OVER s) - epoch(ts) AS next_gap,
           epoch(ts) - epoch(lag(ts) OVER s) AS prev_gap
    FROM live_calls
    -- (Only the streams that have such a finish: the others have nothing to find.)
    WHERE stream_key IN (SELECT stream_key FROM live_calls WHERE finish_reason = 'length')
    WINDOW s AS (PARTITION BY stream_key ORDER BY seq, ts, call_id)
    QUALIFY finish_reason = 'length'
),
c AS (
    SELECT l.call_id, l.stream_key, l.session_id, l.seq, l.ts, l.input_tokens, l.output_tokens,
           l.finish_reason, l.response_kind, l.cost_usd, l.content_chars, l.tool_call_count,
           l.content_chars IS NULL AND l.tool_call_count IS NULL AS billing_view,
           n.pos, n.next_in, n.next_gap, n.prev_gap
    FROM n JOIN live_calls l ON l.call_id = n.call_id
),
-- In a bill, an output the next prompt did not keep was discarded (a cut-off tool call), as
-- is the last of a line of such calls when it is cut at the same size.
discarded AS (
    SELECT *,
           lf_output_discarded(finish_reason, content_chars, tool_call_count, input_tokens,
                               output_tokens, next_in, next_gap, $max_gap_seconds,
                               $kept_ratio) AS cut
    FROM c
),
k AS (
    -- lag() is the previous max_tokens finish of the stream; pos says if it came right before.
    SELECT *,
           lag(pos) OVER s = pos - 1
               AND lag(session_id) OVER s IS NOT DISTINCT FROM session_id AS follows,
           (NOT billing_view AND response_kind = 'text')
           OR (billing_view AND NOT cut
               AND NOT (next_in IS NULL AND coalesce(lag(cut) OVER s, false)
                        AND lag(pos) OVER s = pos - 1 AND prev_gap <= $max_gap_seconds
                        AND output_tokens >= 0.9 * lag(output_tokens) OVER s)) AS delivered
    FROM discarded
    WINDOW s AS (PARTITION BY stream_key ORDER BY pos)
),
runs AS (
    -- A run is consecutive max_tokens finishes of one session (any other finish clears it).
    SELECT *, TRUE AS is_length,
           sum(CASE WHEN coalesce(follows, false) THEN 0 ELSE 1 END)
               OVER (PARTITION BY stream_key ORDER BY pos ROWS UNBOUNDED PRECEDING) AS run_no
    FROM k
),
grouped AS (
    SELECT stream_key, session_id, run_no,
           count(*) FILTER (WHERE is_length) AS n_length,
           count(*) FILTER (WHERE delivered) AS n_delivered,
           min(ts) FILTER (WHERE is_length) AS start_ts,
           max(ts) FILTER (WHERE is_length) AS end_ts,
           arg_min(call_id, seq) FILTER (WHERE is_length) AS first_call_id,
           arg_max(call_id, seq) FILTER (WHERE is_length) AS last_call_id,
           list(call_id ORDER BY seq) FILTER (WHERE is_length) AS ids,
           list(ts ORDER BY seq) FILTER (WHERE is_length) AS times,
           coalesce(sum(cost_usd) FILTER (WHERE is_length), 0) AS usd
    FROM runs GROUP BY stream_key, session_id, run_no
)
SELECT stream_key, session_id, start_ts, end_ts, n_length AS n_calls, first_call_id,
       last_call_id, 0 AS wasted_usd, 0 AS wasted_tokens, NULL AS cost_basis,
       n_length || ' max_tokens finishes in a row in one session, ' || n_delivered
           || ' of them delivered answers: a breaker counting every max_tokens finish at '
           || $breaker_threshold || ' would have stopped the session at answer '
           || $breaker_threshold
           || coalesce(' (' || strftime(times[$breaker_threshold], '%Y-%m-%d %H:%M:%S')
                       || ' UTC)', '') AS summary,
       json_object(
           'first_call_id', first_call_id, 'last_call_id', last_call_id,
           'length_finishes', n_length, 'delivered_answers', n_delivered,
           'breaker_threshold', $breaker_threshold, 'would_trip_at', ids[$breaker_threshold],
           'answers_usd', usd
       ) AS evidence
FROM grouped
WHERE n_length >= $breaker_threshold AND n_delivered > 0
ORDER BY start_ts
