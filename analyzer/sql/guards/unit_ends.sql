-- lf_unit_<reach>: each unit a stop can end, its last position, the dollars spent in its
-- stream up to its end (usd_through, a running sum in the replay's order) and when it ends.
-- What follows a call in its unit is then a difference, read only at the stops (scoring).
-- Made once per replay (guards/replay.py, _prepare_rest). Slots: <reach> turn, session,
-- stream, day, window or month; <unit> its unit column; <pos> the order within the unit
-- (pos; a period's, tpos: time order across streams) and <through> the running sum in it
-- (usd_through; a period's, tusd).
CREATE TEMP TABLE IF NOT EXISTS lf_unit_{{reach}} AS
SELECT {{unit}} AS unit, max({{pos}}) AS last_pos,
       arg_max({{through}}, {{pos}}) AS end_usd, max(ts) AS unit_end_ts
FROM lf_events GROUP BY {{unit}};
