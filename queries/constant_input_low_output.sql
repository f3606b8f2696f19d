-- name: constant_input_low_output
-- title: Same context re-sent, near-empty answers
-- severity: high
-- params: min_run=3, max_output_tokens=8, max_gap_seconds=300, prompt_tolerance=0
--
-- The agent keeps sending an unchanged prompt and the model keeps answering with a few tokens:
-- the conversation is not advancing, so every call in the run is paid for nothing (seed 000:
-- 22 calls, 56,065 tokens each, 3 tokens back, $0.28 each). A run is consecutive calls of one
-- stream whose prompt size stays within prompt_tolerance tokens of the previous call's, whose
-- output is at most max_output_tokens, and which follow each other within max_gap_seconds.
-- Short answers on a growing prompt (acknowledgements) and same-size prompts with full answers
-- (batch jobs) are not runs. Only final output counts are trusted: Claude Code transcripts
-- before 2.1.97 record a streaming placeholder (often 1-4 tokens for a long answer) on calls
-- whose lines never say how they stopped, so those calls never qualify on output size; calls
-- whose count is final (a stop_reason line, 2.1.97+) do. Waste: every call in the run.
WITH c AS (
    -- Only what the run test needs: every call goes through the window below, so it carries
    -- no more columns than that (the rest is joined back for the few calls of a run).
    SELECT call_id, stream_key, seq, ts, input_tokens,
           input_tokens IS NOT NULL AND output_tokens IS NOT NULL
               AND coalesce(output_final, false) AND output_tokens <= $max_output_tokens
               AS low
    FROM live_calls
    -- (Only the streams with enough short answers to make a run: the others have none.)
    WHERE stream_key IN (
        SELECT stream_key FROM live_calls
        WHERE input_tokens IS NOT NULL AND output_tokens IS NOT NULL
          AND coalesce(output_final, false) AND output_tokens <= $max_output_tokens
        GROUP BY stream_key HAVING count(*) >= least($min_run, 2))
),
w0 AS (
    -- One pass over every call to see its neighbours: whether it continues the short answer
    -- before it, and whether the next call continues it.
    SELECT *,
           low AND lag(low) OVER s
               AND abs(input_tokens - lag(input_tokens) OVER s) <= $prompt_tolerance
               AND (ts IS NULL OR lag(ts) OVER s IS NULL
                    OR epoch(ts) - epoch(lag(ts) OVER s) <= $max_gap_seconds)
               AS continues,
           low AND coalesce(lead(low) OVER s, false)
               AND abs(input_tokens - lead(input_tokens) OVER s) <= $prompt_tolerance
               AND (ts IS NULL OR lead(ts) OVER s IS NULL
                    OR epoch(lead(ts) OVER s) - epoch(ts) <= $max_gap_seconds)
               AS continued
    FROM c
    WINDOW s AS (PARTITION BY stream_key ORDER BY seq, ts, call_id)
),
w AS (
    -- Short answers only; a call alone in its run (neither continuing nor continued) is a run
    -- of one, which only min_run = 1 reports. (A filter here, not QUALIFY: a QUALIFY over
    -- SELECT * does not translate to Spark.)
    SELECT call_id, stream_key, seq, ts, continues
    FROM w0 WHERE low AND (continues OR continued OR $min_run <= 1)
),
runs AS (
    SELECT r.*, l.session_id, l.input_tokens, l.output_tokens, l.finish_reason, l.cost_usd,
           l.cost_basis, true AS low
    FROM (SELECT *,
                 sum(CASE WHEN continues THEN 0 ELSE 1 END)
                     OVER (PARTITION BY stream_key ORDER BY seq, ts, call_id
                           ROWS UNBOUNDED PRECEDING) AS run_no
          FROM w) r
    JOIN live_calls l ON l.call_id = r.call_id
),
grouped AS (
    SELECT stream_key, run_no,
           any_value(session_id) AS session_id,
           min(ts) AS start_ts, max(ts) AS end_ts,
           count(*) AS n_calls,
           arg_min(call_id, seq) AS first_call_id,
           arg_max(call_id, seq) AS last_call_id,
           coalesce(sum(cost_usd), 0) AS wasted_usd,
           list(call_id ORDER BY seq) AS wasted_calls,
           sum(input_tokens + output_tokens) AS wasted_tokens,
           count(cost_usd) AS priced,
           string_agg(DISTINCT cost_basis, ',' ORDER BY cost_basis) AS bases,
           min(input_tokens) AS min_in, max(input_tokens) AS max_in,
           min(output_tokens) AS min_out, max(output_tokens) AS max_out,
           list(DISTINCT finish_reason) AS finishes,
           median(cost_usd) AS per_call,
           bool_and(low) AS all_low
    FROM runs
    GROUP BY stream_key, run_no
)
SELECT stream_key, session_id, start_ts, end_ts, n_calls, first_call_id, last_call_id,
       wasted_usd, wasted_tokens, wasted_calls,
       CASE WHEN priced = 0 THEN NULL
            WHEN priced < n_calls THEN 'partial:' || bases ELSE bases END AS cost_basis,
       format('{:,}', n_calls) || ' calls re-sent the same ' || format('{:,}', max_in)
           || '-token prompt and got '
           || CASE WHEN min_out = max_out THEN format('{:,}', max_out)
                   ELSE format('{:,}', min_out) || '-' || format('{:,}', max_out) END
           || ' tokens back'
           || CASE WHEN start_ts IS NOT NULL
                   THEN ' in ' || format('{:,}', round(epoch(end_ts) - epoch(start_ts))::BIGINT) || ' s'
                   ELSE '' END
           || CASE WHEN priced > 0 THEN ' ($' || format('{:,.2f}', wasted_usd) || ')' ELSE '' END
           AS summary,
       json_object(
           'first_call_id', first_call_id, 'last_call_id', last_call_id,
           'calls', n_calls, 'prompt_tokens', CASE WHEN min_in = max_in THEN min_in::VARCHAR
                                                   ELSE min_in || '-' || max_in END,
           'output_tokens', CASE WHEN min_out = max_out THEN min_out::VARCHAR
                                 ELSE min_out || '-' || max_out END,
           'finish_reasons', finishes, 'median_call_usd', per_call,
           'seconds', round(epoch(end_ts) - epoch(start_ts), 1),
           'mean_gap_seconds', CASE WHEN n_calls > 1
                                    THEN round((epoch(end_ts) - epoch(start_ts)) / (n_calls - 1), 2) END
       ) AS evidence
FROM grouped
WHERE all_low AND n_calls >= $min_run
ORDER BY wasted_usd DESC, start_ts
