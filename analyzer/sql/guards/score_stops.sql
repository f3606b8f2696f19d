-- The stops the scoring judges (guards/scoring.py, first step), in four statements:
-- lf_stops, what follows each stop in its reach unit (calls and dollars: the unit's end in
-- lf_unit_<reach> less the stop's running sum) and the dollars of incident waste among
-- them. lf_stop_children, the sub-agent runs a stop ends (of the tripping call's session,
-- started after the trip and, for a stop that ends a turn, before the turn's last call).
-- Then a stop inside a sub-agent run that an earlier stop never let start is moot (deleted
-- from lf_trips and lf_stops). Reads lf_trips, lf_events, lf_truth_calls, lf_waste,
-- lf_children. Slots: <unit> the reach's unit column, <reach> turn, session, stream or a
-- period, <blind> where the guard is blind over the tripping call "e.", <in_reach> whether a
-- child run c started within what the stop s ends; the order within a reach unit: <pos> a
-- call's place (pos; a period's, tpos: in time order across streams), <at> the stop's
-- ("t.pos", "e.tpos"), <through> the running sum (usd_through, tusd), <rw_join> and <rw_at>
-- the stop's place where the waste after it is summed (nothing and "t.pos"; a period's, the
-- join of its call se and "se.tpos").
CREATE OR REPLACE TEMP TABLE lf_stops AS
WITH tw AS (SELECT DISTINCT call_id, cost_usd, {{unit}} AS unit, {{pos}} AS pos
            FROM lf_truth_calls),
rw AS (
    SELECT t.variant, t.u_stream, t.pos, sum(tw.cost_usd) AS usd
    FROM lf_trips t {{rw_join}} JOIN tw ON tw.unit = t.reach_unit AND tw.pos > {{rw_at}}
    WHERE t.action = 'stop' GROUP BY ALL)
SELECT t.variant, t.reach_unit, t.u_stream, t.pos, {{at}} AS at, e.call_id, e.ts,
       e.sid, coalesce(e.cost_usd, 0) AS trip_cost,
       w.call_id IS NOT NULL AS trip_is_waste, r.last_pos - {{at}} AS rest_n,
       r.end_usd - e.{{through}} AS rest_usd, coalesce(rw.usd, 0) AS rest_waste,
       r.unit_end_ts, ({{blind}}) AS blind
FROM lf_trips t JOIN lf_events e ON e.u_stream = t.u_stream AND e.pos = t.pos
JOIN lf_unit_{{reach}} r ON r.unit = t.reach_unit
LEFT JOIN lf_waste w ON w.call_id = e.call_id
LEFT JOIN rw ON rw.variant = t.variant AND rw.u_stream = t.u_stream
            AND rw.pos = t.pos
WHERE t.action = 'stop';

CREATE OR REPLACE TEMP TABLE lf_stop_children AS
SELECT s.variant, s.call_id AS stop_call, c.u_stream AS child, c.n, c.usd,
       c.waste
FROM lf_stops s JOIN lf_children c
  ON c.parent_sid = s.sid AND c.first_ts > s.ts AND {{in_reach}}
WHERE NOT s.blind;

DELETE FROM lf_trips t USING lf_stop_children c
WHERE t.variant = c.variant AND t.u_stream = c.child;

DELETE FROM lf_stops s USING lf_stop_children c
WHERE s.variant = c.variant AND s.u_stream = c.child;
