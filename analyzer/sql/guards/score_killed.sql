-- lf_killed: the target incidents' wasted calls each variant's stops killed (in their reach
-- unit after the trip, or in a sub-agent run a stop ended), the earliest stop per call.
-- Reads lf_stops, lf_stop_children, lf_truth_calls, lf_truth. Parameter targets (the
-- detectors a guard targets, where <target> names it). Slots: <unit> the reach's unit
-- column, <target> whether an incident t is one of the guard's targets, <pos> a call's place
-- in the reach unit, compared with the stop's (lf_stops.at): pos, or a period's tpos.
CREATE OR REPLACE TEMP TABLE lf_killed AS
WITH k AS (
    SELECT s.variant, tc.incident_id, tc.call_id, tc.cost_usd, s.call_id AS stop,
           s.u_stream AS stop_stream, s.pos AS trip_pos, s.ts AS trip_ts
    FROM lf_stops s JOIN lf_truth_calls tc
      ON tc.{{unit}} = s.reach_unit AND tc.{{pos}} > s.at
    WHERE NOT s.blind
    UNION ALL
    SELECT s.variant, tc.incident_id, tc.call_id, tc.cost_usd, s.call_id,
           s.u_stream, s.pos, s.ts
    FROM lf_stop_children c
    JOIN lf_stops s ON s.variant = c.variant AND s.call_id = c.stop_call
    JOIN lf_truth_calls tc ON tc.u_stream = c.child)
SELECT k.variant, k.incident_id, t.event_id, k.call_id,
       any_value(k.cost_usd) AS cost_usd,
       arg_min(k.stop, (k.trip_ts, k.trip_pos)) AS stop,
       arg_min(k.stop_stream, (k.trip_ts, k.trip_pos)) AS stop_stream,
       arg_min(k.trip_pos, (k.trip_ts, k.trip_pos)) AS trip_pos,
       min(k.trip_ts) AS trip_ts
FROM k JOIN lf_truth t ON t.incident_id = k.incident_id
WHERE {{target}}
GROUP BY k.variant, k.incident_id, t.event_id, k.call_id;
