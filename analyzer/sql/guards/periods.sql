-- The replay's periods (guards/replay.py, _prepare_events, for a policy whose scope is a
-- day, a 5-hour window or a month): lf_mem.lf_events again, in its order (stream, then
-- position), with each timed call's day (u_day: days since 1970), month (u_month: months
-- since year 0) and window (u_window: the hour its window starts, in hours since 1970), its
-- place in time order across every stream (tpos: by time, then the replay's order) and the
-- dollars spent through it in that order (tusd). Times are UTC, as the usage views count
-- days by default. A window is ccusage's 5-hour block, as views/blocks.sql finds them: each
-- call joins the last window start at or before it. A call with no time is in no period.
-- Slots: <starts> the windows' first calls (window_starts.sql over lf_mem.lf_events).
-- What needs the time order is worked out on narrow rows (lf_times: a call's stream and
-- position, its window, tpos and tusd), put back in the events' order, and read beside the
-- events row by row (POSITIONAL JOIN): the wide rows are never sorted. A row of one that is
-- not the same call as the other's (never: both are in stream and position order) fails the
-- statement.
CREATE OR REPLACE TEMP TABLE lf_times AS
WITH starts AS (
{{starts}}
), placed AS (
    SELECT e.u_stream, e.pos, e.ts, e.cost_usd,
           (epoch(date_trunc('hour', s.first_ts)) // 3600)::BIGINT AS u_window
    FROM lf_mem.lf_events e
    ASOF LEFT JOIN starts s ON e.ts >= s.first_ts
)
SELECT u_stream, pos,
       CASE WHEN ts IS NOT NULL THEN u_window END AS u_window,
       CASE WHEN ts IS NOT NULL
            THEN row_number() OVER (ORDER BY ts, u_stream, pos) END::BIGINT AS tpos,
       sum(coalesce(cost_usd, 0)) OVER (ORDER BY ts, u_stream, pos
                                        ROWS UNBOUNDED PRECEDING) AS tusd
FROM placed
ORDER BY u_stream, pos;

CREATE OR REPLACE TABLE lf_mem.lf_events AS
SELECT e.*,
       CASE WHEN e.ts IS NOT NULL THEN date_diff('day', DATE '1970-01-01', e.ts::DATE) END
           ::BIGINT AS u_day,
       t.u_window,
       (year(e.ts) * 12 + month(e.ts) - 1)::BIGINT AS u_month,
       CASE WHEN t.u_stream = e.u_stream AND t.pos = e.pos THEN t.tpos
            ELSE error('guards/periods.sql: the calls and their times are out of step') END
           AS tpos,
       t.tusd
FROM lf_mem.lf_events e POSITIONAL JOIN lf_times t;

DROP TABLE lf_times;
