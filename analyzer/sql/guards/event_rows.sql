-- The replayed calls (guards/replay.py, Replay.events), in the replay's order: the columns
-- of lf_events a policy may read, without the numbers of the units and the scoring's sums.
-- No parameters.
SELECT * EXCLUDE (u_stream, u_session, u_turn, sid, usd_through)
FROM lf_events
ORDER BY u_stream, pos;
