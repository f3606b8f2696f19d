-- A window of the last <size> calls: how many of them matched count, after each call the
-- guard sees, and before it. The running count less the count <size> calls back (or where
-- the unit began), streamed in the replay's order.
-- Slots: <seen> (seen.sql), <keep> the columns returned before the value, <count> a
-- predicate over one call (never NULL), <size> a whole number of calls.
WITH seen AS (
{{seen}}
),
v AS (SELECT {{keep}}, {{count}} AS hit FROM seen),
a AS (
    SELECT *, unit IS DISTINCT FROM lag(unit) OVER () AS fresh,
           sum(hit::INTEGER) OVER (ROWS UNBOUNDED PRECEDING) AS c
    FROM v),
b AS (
    SELECT *, c - coalesce(CASE WHEN lag(unit, {{size}}) OVER () = unit
                                THEN lag(c, {{size}}) OVER () END,
                           max(CASE WHEN fresh THEN c - hit::INTEGER END)
                               OVER (ROWS UNBOUNDED PRECEDING))
                  AS value
    FROM a)
SELECT {{keep}}, value, CASE WHEN fresh THEN 0 ELSE lag(value) OVER () END AS before
FROM b
