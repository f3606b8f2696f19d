-- lf_keys: one row, the streams' keys listed by their number (lf_streams), for a policy that
-- names stream_key (the replay carries the number, and reads the key back by it). No
-- parameters.
CREATE OR REPLACE TEMP TABLE lf_keys AS
SELECT list(stream_key ORDER BY sk) AS stream_keys FROM lf_streams;
