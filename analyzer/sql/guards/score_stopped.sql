-- The incidents each variant stopped (its first stop in each, by time then position), with
-- the waste prevented and how late it came: the guard's own events in the incident up to
-- the trip (lf_trace), the seconds since the incident began, the incident's waste spent
-- first. Ordered by variant, then incident. Reads lf_killed, lf_truth_span, lf_trace,
-- lf_truth_calls. No parameters.
WITH first AS (
    SELECT variant, incident_id, any_value(event_id) AS event_id,
           arg_min(stop, (trip_ts, trip_pos)) AS stop,
           arg_min(stop_stream, (trip_ts, trip_pos)) AS stream,
           arg_min(trip_pos, (trip_ts, trip_pos)) AS trip_pos,
           min(trip_ts) AS trip_ts, sum(cost_usd) AS prevented
    FROM lf_killed GROUP BY variant, incident_id),
starts AS (
    SELECT incident_id, min(first_ts) AS start_ts FROM lf_truth_span GROUP BY ALL),
events AS (  -- the guard's own events in an incident, up to its trip
    SELECT f.variant, f.incident_id, count(tr.pos) AS n
    FROM first f
    JOIN lf_truth_span sp ON sp.incident_id = f.incident_id
                         AND sp.u_stream = f.stream
    JOIN lf_trace tr ON (tr.variant IS NULL OR tr.variant = f.variant)
                    AND tr.u_stream = sp.u_stream
                    AND tr.pos BETWEEN sp.first_pos AND f.trip_pos
    GROUP BY ALL),
spent AS (  -- the incident's waste spent up to the stop
    SELECT f.variant, f.incident_id, sum(tc.cost_usd) AS usd
    FROM first f JOIN lf_truth_calls tc ON tc.incident_id = f.incident_id
    WHERE (tc.u_stream = f.stream AND tc.pos <= f.trip_pos)
       OR (tc.u_stream <> f.stream AND tc.ts <= f.trip_ts)
    GROUP BY ALL)
SELECT f.variant, f.incident_id, f.event_id, f.stop, f.prevented,
       coalesce(ev.n, 0) AS latency_events,
       greatest(epoch(f.trip_ts) - epoch(st.start_ts), 0) AS seconds,
       coalesce(sp.usd, 0) AS spent
FROM first f
LEFT JOIN starts st ON st.incident_id = f.incident_id
LEFT JOIN events ev ON ev.variant = f.variant AND ev.incident_id = f.incident_id
LEFT JOIN spent sp ON sp.variant = f.variant AND sp.incident_id = f.incident_id
WHERE f.prevented > 0
ORDER BY f.variant, f.incident_id;
