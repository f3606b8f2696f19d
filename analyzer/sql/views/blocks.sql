-- ccusage's 5-hour billing blocks over the calls with a time (every call once), one row per
-- block in time order. A block starts at its first call's time floored to the hour (UTC) and
-- holds the calls up to 5 hours after that start; a call later than that, or more than 5 hours
-- after the call before it, starts the next block. Each block's first call is found from the
-- block before it (a recursive CTE, one step per block, over the hours that have calls and the
-- calls after a gap, both computed once: a step never reads the calls themselves), then each
-- call joins the block whose first call is the last at or before it (ASOF). Tokens follow the
-- usage views' columns (views/usage.sql); dollars are the calls' cost_usd, and at_logged the
-- placeholder calls at their logged output (cost_logged_usd), as ccusage prices them.
-- Columns are read by position (views/blocks.py, _block). No parameters.
WITH RECURSIVE timed AS MATERIALIZED (
    SELECT ts, ts - lag(ts) OVER (ORDER BY ts) > INTERVAL 5 HOUR AS after_gap
    FROM live_calls
    WHERE ts IS NOT NULL
), hours AS MATERIALIZED (  -- the hours with calls: a block starts at one of them
    SELECT date_trunc('hour', ts) AS hour,
           min(ts) AS first_ts,
           min(ts) FILTER (WHERE ts > date_trunc('hour', ts)) AS first_past_hour
    FROM timed
    GROUP BY 1
), gaps AS MATERIALIZED (  -- the calls more than 5 hours after the call before them
    SELECT ts FROM timed WHERE after_gap
), firsts(first_ts) AS (
    -- Each block's first call: the first call past the block before's end (its hour + 5 h),
    -- or the first call after a gap, whichever comes first.
    SELECT min(ts) FROM timed
    UNION ALL
    SELECT least(
        (SELECT min(CASE WHEN h.hour = date_trunc('hour', f.first_ts) + INTERVAL 5 HOUR
                         THEN h.first_past_hour ELSE h.first_ts END)
         FROM hours h
         WHERE h.hour >= date_trunc('hour', f.first_ts) + INTERVAL 5 HOUR),
        (SELECT min(g.ts) FROM gaps g WHERE g.ts > f.first_ts))
    FROM firsts f
    WHERE f.first_ts IS NOT NULL
), starts AS (
    SELECT first_ts FROM firsts WHERE first_ts IS NOT NULL
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
