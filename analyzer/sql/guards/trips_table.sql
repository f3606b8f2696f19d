-- lf_trips: every variant's stops and nudges, a trip being its stream and position (filled
-- by trips_stop.sql and trips_nudge.sql). No parameters.
CREATE OR REPLACE TEMP TABLE lf_trips (variant INTEGER, reach_unit BIGINT,
    u_stream BIGINT, pos BIGINT, action VARCHAR);
