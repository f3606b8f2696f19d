-- A policy's trips before the scoring (guards/replay.py, Replay.trips): each stop and nudge
-- of lf_trips as its call and action, in the replay's order (stream, then position). No
-- parameters.
SELECT e.call_id, t.action
FROM lf_trips t JOIN lf_events e ON e.u_stream = t.u_stream AND e.pos = t.pos
ORDER BY t.u_stream, t.pos, t.action;
