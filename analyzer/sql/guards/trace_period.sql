-- A period: how many times a cycle of <period> calls (A-B-A-B...) repeated, by key, after
-- each call the guard sees, and before it. The call <period> back is in the same unit when
-- its unit is this one (a unit is a run of rows); the first call of a unit never repeats one.
-- Slots: <seen> (seen.sql), <keep> the columns returned before the value, <key> an
-- expression over one call, <period> a whole number of calls (at least 2).
WITH seen AS (
{{seen}}
),
v AS (SELECT {{keep}}, ({{key}}) AS k FROM seen),
a AS (
    SELECT *, row_number() OVER () AS idx,
           unit IS DISTINCT FROM lag(unit) OVER () AS fresh,
           coalesce(unit = lag(unit, {{period}}) OVER ()
                    AND k = lag(k, {{period}}) OVER (), false) AS hit
    FROM v),
b AS (
    SELECT *, CASE WHEN hit
                   THEN (idx - max(CASE WHEN NOT hit THEN idx END)
                               OVER (ROWS UNBOUNDED PRECEDING)
                         + {{period}}) // {{period}}
                   ELSE 0 END AS value
    FROM a)
SELECT {{keep}}, value, CASE WHEN fresh THEN 0 ELSE lag(value) OVER () END AS before
FROM b
