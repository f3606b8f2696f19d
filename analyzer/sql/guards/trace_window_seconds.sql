-- A window of the last <seconds> seconds: how many of the unit's calls in it matched
-- count, after each call the guard sees (with a time), and before it (the unit's previous
-- call's value, by position). As a live guard counts it (guards/online.py): the calls of the
-- same instant count up to this one (by position), not those after it, which a guard running
-- in the agent could not have seen yet.
-- Slots: <seen> (seen.sql), <keep> the columns returned before the value, <count> a
-- predicate over one call (never NULL), <seconds> a number of seconds.
WITH seen AS (
{{seen}}
),
v AS (
    SELECT {{keep}}, ts, {{count}} AS hit
    FROM seen WHERE ts IS NOT NULL),
w AS (
    SELECT {{keep}},
           sum(CASE WHEN hit THEN 1 ELSE 0 END)
               OVER (PARTITION BY unit ORDER BY ts
                     RANGE BETWEEN INTERVAL ({{seconds}}) SECOND PRECEDING AND CURRENT ROW
                     EXCLUDE TIES)
           + coalesce(sum(CASE WHEN hit THEN 1 ELSE 0 END)
                          OVER (PARTITION BY unit, ts ORDER BY pos
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
               AS value
    FROM v)
SELECT *, lag(value, 1, 0) OVER (PARTITION BY unit ORDER BY pos) AS before
FROM w
