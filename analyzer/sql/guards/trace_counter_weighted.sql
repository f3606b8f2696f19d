-- A counter of any other weight (a budget of dollars, say): its value after each call that
-- counts, and before it, summed in the unit's own order (the sum of fractions as before),
-- from the unit's last reset.
-- Slots: <seen> (seen.sql), <keep> the columns returned before the value, <count> and
-- <reset> predicates over one call (never NULL), <weight> an expression over one call,
-- <segment> where a call's segment began: "max(CASE WHEN rst THEN pos END) OVER r" (the
-- unit's latest reset so far) or "NULL::BIGINT" for a counter that never resets; <order>
-- the unit's own order: pos (a stream's), or ord (time order, for a period's units).
WITH seen AS (
{{seen}}
),
v AS (
    SELECT {{keep}}, {{count}} AS hit, {{reset}} AS rst,
           coalesce(CAST(({{weight}}) AS DOUBLE), 0) AS w
    FROM seen),
g AS (
    SELECT *, {{segment}} AS seg
    FROM v WHERE hit OR rst
    WINDOW r AS (PARTITION BY unit ORDER BY {{order}} ROWS UNBOUNDED PRECEDING)),
t AS (
    SELECT *, sum(w) OVER (PARTITION BY unit, seg ORDER BY {{order}}
                           ROWS UNBOUNDED PRECEDING) AS value
    FROM g WHERE hit AND NOT rst)
SELECT {{keep}}, value, value - w AS before
FROM t
