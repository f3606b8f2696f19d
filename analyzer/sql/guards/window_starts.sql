-- The first call of each of ccusage's 5-hour windows over the calls of <calls> with a time,
-- as views/blocks.sql finds its blocks: a window starts at the hour of its first call and
-- holds the calls up to 5 hours after that start; a call later than that, or more than 5
-- hours after the call before it, starts the next. Each window's first call is found from
-- the window before it (a recursive CTE, one step per window, over the hours that have calls
-- and the calls after a gap, both computed once). Put into another unit's slot (periods.sql,
-- sql/spend_ledger.sql). Slots: <calls> a table of calls (its ts, naive UTC).
WITH RECURSIVE timed AS MATERIALIZED (
    SELECT ts, ts - lag(ts) OVER (ORDER BY ts) > INTERVAL 5 HOUR AS after_gap
    FROM {{calls}}
    WHERE ts IS NOT NULL
), hours AS MATERIALIZED (
    SELECT date_trunc('hour', ts) AS hour,
           min(ts) AS first_ts,
           min(ts) FILTER (WHERE ts > date_trunc('hour', ts)) AS first_past_hour
    FROM timed
    GROUP BY 1
), gaps AS MATERIALIZED (
    SELECT ts FROM timed WHERE after_gap
), firsts(first_ts) AS (
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
)
SELECT first_ts FROM firsts WHERE first_ts IS NOT NULL
