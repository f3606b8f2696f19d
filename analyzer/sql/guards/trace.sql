-- lf_trace: a guard's value after every call it sees (its primitive's trace_*.sql), with the
-- units its stop reaches and the group a trip is counted in; narrow rows (a call is its
-- stream and position). Slots: <into> "CREATE OR REPLACE TEMP TABLE lf_trace AS" for the
-- first variant, "INSERT INTO lf_trace" for the next; <variant> its number (NULL: every
-- variant, the thresholds read off one trace); <trace> the primitive's trace, filled;
-- <ord> nothing, or ", ord" (a period's: the call's place in time order, tpos).
{{into}}
SELECT {{variant}} AS variant, unit, u_stream, pos, value, before, reach_unit, grp, blind
       {{ord}}
FROM (
{{trace}}
);
