-- ccusage's 5-hour billing blocks over the calls with a time (every call once), one row per
-- block in time order. A block starts at its first call's time floored to the hour (UTC) and
-- holds the calls up to 5 hours after that start; a call later than that, or more than 5 hours
-- after the call before it, starts the next block. Calls separated by more than 5 hours fall in
-- different runs (a window over the calls); within a run each block's first call is found from
-- the block before it (a recursive CTE: one step per block, not per call), and each call joins
-- the block whose first call is the last at or before it (ASOF). Tokens follow the usage
-- views' columns (views/usage.sql); dollars are the calls' cost_usd, and at_logged the
-- placeholder calls at their logged output (cost_logged_usd), as ccusage prices them.
-- Columns are read by position (views/blocks.py, _block). No parameters.
WITH RECURSIVE timed AS (
    SELECT ts,
           coalesce(ts - lag(ts) OVER (ORDER BY ts) > INTERVAL 5 HOUR, true)::INTEGER AS starts
    FROM live_calls
    WHERE ts IS NOT NULL
), runs AS (
    SELECT ts, sum(starts) OVER (ORDER BY ts ROWS UNBOUNDED PRECEDING) AS run FROM timed
), firsts(run, first_ts) AS (
    SELECT run, min(ts) FROM runs GROUP BY run
    UNION ALL
    SELECT f.run,
           (SELECT min(r.ts) FROM runs r
            WHERE r.run = f.run AND r.ts > date_trunc('hour', f.first_ts) + INTERVAL 5 HOUR)
    FROM firsts f
    WHERE f.first_ts IS NOT NULL
), starts AS (
    SELECT DISTINCT first_ts FROM firsts WHERE first_ts IS NOT NULL
), placed AS (
    SELECT s.first_ts AS block_first, c.*,
           coalesce(c.model, '(no model)')
               || CASE WHEN c.variant = 'fast' THEN ' (fast)' ELSE '' END AS model_name
    FROM live_calls c
    ASOF JOIN starts s ON c.ts >= s.first_ts
    WHERE c.ts IS NOT NULL
), models AS (  -- each block's models in the order they first appear (as ccusage lists them)
    SELECT block_first, list(model_name ORDER BY seen, model_name) AS models
    FROM (SELECT block_first, model_name, min(ts) AS seen FROM placed GROUP BY ALL)
    GROUP BY block_first
)
SELECT date_trunc('hour', p.block_first) AS start_ts,
       min(p.ts) AS first_ts,
       max(p.ts) AS last_ts,
       count(*) AS calls,
       coalesce(sum(greatest(coalesce(p.input_tokens, 0) - coalesce(p.cached_input_tokens, 0)
                             - coalesce(p.cache_write_tokens, 0), 0)), 0) AS input,
       coalesce(sum(p.cache_write_tokens), 0) AS cache_write,
       coalesce(sum(p.cached_input_tokens), 0) AS cache_read,
       coalesce(sum(p.output_tokens), 0) AS output,
       coalesce(sum(p.reasoning_tokens), 0) AS reasoning,
       coalesce(sum(p.cost_usd), 0) AS usd,
       coalesce(sum(CASE WHEN p.cost_basis = 'estimated_output' THEN p.cost_logged_usd
                         ELSE p.cost_usd END), 0) AS at_logged,
       count(*) FILTER (WHERE p.cost_usd IS NULL) AS unpriced,
       count(*) FILTER (WHERE p.cost_basis = 'estimated_output') AS placeholder_calls,
       any_value(m.models) AS models
FROM placed p
JOIN models m USING (block_first)
GROUP BY p.block_first
ORDER BY p.block_first;
