-- The trips listed (of the variants $v, the actions $a), where the guard is not blind: each
-- with its stream's key, session, call and time, and for a stop the incident it stopped
-- (the one it prevented most waste of; else the first whose span it fell in). Ordered by
-- variant, stops before nudges, time, stream and position. Reads lf_trips, lf_events,
-- lf_streams, lf_names, lf_killed, lf_truth_span. Slots: <blind> where the guard is blind
-- over the tripping call "e.".
WITH named AS (
    SELECT variant, stop, arg_max(incident_id, cost) AS incident_id
    FROM (SELECT variant, stop, incident_id, sum(cost_usd) AS cost
          FROM lf_killed GROUP BY ALL)
    GROUP BY ALL)
SELECT t.variant, t.action, k.stream_key, t.pos, sn.name, e.call_id, e.ts,
       CASE WHEN t.action = 'stop' THEN coalesce(n.incident_id, (
           SELECT min(sp.incident_id) FROM lf_truth_span sp
           WHERE sp.u_stream = t.u_stream
             AND t.pos BETWEEN sp.first_pos AND sp.last_pos)) END
FROM lf_trips t JOIN lf_events e ON e.u_stream = t.u_stream AND e.pos = t.pos
JOIN lf_streams k ON k.sk = t.u_stream
LEFT JOIN lf_names sn ON sn.id = e.sid
LEFT JOIN named n ON n.variant = t.variant AND n.stop = e.call_id
WHERE t.variant IN (SELECT unnest($v)) AND t.action IN (SELECT unnest($a))
  AND NOT ({{blind}})
ORDER BY t.variant, t.action DESC, e.ts, t.u_stream, t.pos;
