-- A counter counting by one (weight 1): its value after each call that counts, and before
-- it. Only the calls that count are traced; each counts from its unit's last reset. A
-- running count over the replay in its own order (no partition, no sort: DuckDB streams
-- it), less the count where the unit or the last reset began.
-- Slots: <seen> (seen.sql), <keep> the columns returned before the value, <count> and
-- <reset> predicates over one call (never NULL).
WITH seen AS (
{{seen}}
),
v AS (
    SELECT {{keep}}, {{count}} AS hit, {{reset}} AS rst
    FROM seen),
a AS (
    SELECT *, hit AND NOT rst AS adds,
           unit IS DISTINCT FROM lag(unit) OVER () AS fresh,
           sum((hit AND NOT rst)::INTEGER) OVER (ROWS UNBOUNDED PRECEDING) AS c
    FROM v WHERE hit OR rst),
b AS (
    SELECT *, c - max(CASE WHEN fresh OR rst THEN c - adds::INTEGER END)
                      OVER (ROWS UNBOUNDED PRECEDING) AS n
    FROM a)
SELECT {{keep}}, n::DOUBLE AS value, n::DOUBLE - 1 AS before
FROM b WHERE adds
