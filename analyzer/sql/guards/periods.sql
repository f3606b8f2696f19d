-- The replay's periods (guards/replay.py, _prepare_events, for a policy whose scope is a
-- day, a 5-hour window or a month): lf_mem.lf_events again, in its order (stream, then
-- position), with each timed call's day (u_day: days since 1970), month (u_month: months
-- since year 0) and window (u_window: the hour its window starts, in hours since 1970), its
-- place in time order across every stream (tpos: by time, then the replay's order) and the
-- dollars spent through it in that order (tusd). Times are UTC, as the usage views count
-- days by default. A window is ccusage's 5-hour block, as views/blocks.sql finds them: it
-- starts at the hour of its first call and holds the calls up to 5 hours after that; a call
-- later than that, or more than 5 hours after the call before it, starts the next one (each
-- block's first call found from the one before, then each call joins the last at or before
-- it). A call with no time is in no period. No parameters.
CREATE OR REPLACE TABLE lf_mem.lf_events AS
WITH RECURSIVE timed AS MATERIALIZED (
    SELECT ts, ts - lag(ts) OVER (ORDER BY ts) > INTERVAL 5 HOUR AS after_gap
    FROM lf_mem.lf_events
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
), starts AS (
    SELECT first_ts FROM firsts WHERE first_ts IS NOT NULL
), placed AS (
    SELECT e.*, (epoch(date_trunc('hour', s.first_ts)) // 3600)::BIGINT AS u_window
    FROM lf_mem.lf_events e
    ASOF LEFT JOIN starts s ON e.ts >= s.first_ts
)
SELECT * EXCLUDE (u_window),
       CASE WHEN ts IS NOT NULL THEN date_diff('day', DATE '1970-01-01', ts::DATE) END
           ::BIGINT AS u_day,
       CASE WHEN ts IS NOT NULL THEN u_window END AS u_window,
       (year(ts) * 12 + month(ts) - 1)::BIGINT AS u_month,
       CASE WHEN ts IS NOT NULL
            THEN row_number() OVER (ORDER BY ts, u_stream, pos) END::BIGINT AS tpos,
       sum(coalesce(cost_usd, 0)) OVER (ORDER BY ts, u_stream, pos
                                        ROWS UNBOUNDED PRECEDING) AS tusd
FROM placed
ORDER BY u_stream, pos;
