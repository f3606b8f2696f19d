-- Per variant, what its stops saved and harmed (the stops where the guard is not blind):
-- calls and dollars saved (the rest of each reach unit and the sub-agent runs it ends),
-- false trips (a stop that prevents no waste and falls on no wasted call) and the dollars
-- they killed, the work true stops killed, and the tripping calls' own output lost.
-- Reads lf_stops, lf_stop_children. Slots: <fail> true when a trip fails its call (on_trip =
-- "fail"), else false.
WITH k AS (
    SELECT variant, stop_call, sum(n) AS n, sum(usd) AS usd, sum(waste) AS waste
    FROM lf_stop_children GROUP BY ALL),
s AS (
    SELECT s.*, coalesce(k.n, 0) AS kn, coalesce(k.usd, 0) AS kusd,
           coalesce(k.waste, 0) AS kwaste,
           coalesce(s.rest_waste, 0) + coalesce(k.waste, 0) = 0
               AND NOT s.trip_is_waste AS false_trip,
           CASE WHEN {{fail}} AND NOT s.trip_is_waste THEN s.trip_cost ELSE 0 END
               AS lost
    FROM lf_stops s
    LEFT JOIN k ON k.variant = s.variant AND k.stop_call = s.call_id
    WHERE NOT s.blind)
SELECT variant, sum(rest_n + kn), sum(rest_usd + kusd),
       count(*) FILTER (WHERE false_trip),
       sum(rest_usd + kusd + lost) FILTER (WHERE false_trip),
       sum(rest_usd - coalesce(rest_waste, 0) + kusd - kwaste + lost)
           FILTER (WHERE NOT false_trip),
       sum(lost)
FROM s GROUP BY variant;
