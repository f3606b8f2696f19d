-- The calls a guard sees at all (its watch), in the replay's order (stream, then position),
-- with the unit its value lives in and the columns a trace carries.
-- Slots: <unit> the scope's unit column (u_stream, u_session or u_turn); <carry> the
-- carried columns, each "expr AS name, "; <watch> a predicate over one call.
SELECT {{unit}} AS unit, u_stream, pos, {{carry}}e.* EXCLUDE (u_stream, pos)
FROM lf_events e WHERE {{watch}}
