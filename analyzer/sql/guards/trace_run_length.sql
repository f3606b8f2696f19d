-- A run length: how many calls in a row had the same key (a NULL key is no run), after each
-- call the guard sees, and before it. A run is counted from its first call: the latest call
-- so far that began the unit or did not continue a run (idx numbers the seen calls in the
-- replay's order; the windows stream in it, no partition and no sort).
-- Slots: <seen> (seen.sql), <keep> the columns returned before the value, <key> an
-- expression over one call.
WITH seen AS (
{{seen}}
),
v AS (SELECT {{keep}}, ({{key}}) AS k FROM seen),
a AS (
    SELECT *, row_number() OVER () AS idx,
           unit IS DISTINCT FROM lag(unit) OVER () AS fresh,
           coalesce(k = lag(k) OVER (), false) AS same
    FROM v),
b AS (
    SELECT *, CASE WHEN k IS NULL THEN 0
                   ELSE idx + 1 - max(CASE WHEN fresh OR NOT same THEN idx END)
                                  OVER (ROWS UNBOUNDED PRECEDING)
              END AS value
    FROM a)
SELECT {{keep}}, value, CASE WHEN fresh THEN 0 ELSE lag(value) OVER () END AS before
FROM b
