-- The replayed calls (guards/replay.py, Replay.events), in the replay's order: the columns
-- of lf_events a policy may read, without the numbers of the units and the scoring's sums
-- (and the periods', where the replay has them: periods.sql). No parameters.
SELECT COLUMNS(lambda c: c NOT IN ('u_stream', 'u_session', 'u_turn', 'sid', 'usd_through',
                              'u_day', 'u_window', 'u_month', 'tpos', 'tusd'))
FROM lf_events
ORDER BY u_stream, pos;
