-- The replay's periods (guards/replay.py, _prepare_events, for a policy whose scope is a
-- day, a 5-hour window or a month): lf_mem.lf_events again, in its order (stream, then
-- position), with each timed call's day (u_day: days since 1970), month (u_month: months
-- since year 0) and window (u_window: the hour its window starts, in hours since 1970), its
-- place in time order across every stream (tpos: by time, then the replay's order) and the
-- dollars spent through it in that order (tusd). Times are UTC, as the usage views count
-- days by default. A window is ccusage's 5-hour block, as views/blocks.sql finds them: each
-- call joins the last window start at or before it. A call with no time is in no period.
-- Slots: <starts> the windows' first calls (window_starts.sql over lf_mem.lf_events).
CREATE OR REPLACE TABLE lf_mem.lf_events AS
WITH starts AS (
{{starts}}
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
