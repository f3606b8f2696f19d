-- The replay's numbers (guards/replay.py, first step of the events): lf_streams, every live
-- stream numbered in the order of its key (sorting by the number is sorting by the key,
-- comparing integers); lf_names, the session and turn ids numbered in one list (so equal ids
-- are equal numbers): what the order compares, and the scoring joins on. No parameters.
CREATE OR REPLACE TEMP TABLE lf_streams AS
SELECT stream_key, row_number() OVER (ORDER BY stream_key) AS sk
FROM (SELECT DISTINCT stream_key FROM calls WHERE superseded_by IS NULL);

CREATE OR REPLACE TEMP TABLE lf_names AS
SELECT name, row_number() OVER () AS id FROM (
    SELECT session_id AS name FROM calls WHERE superseded_by IS NULL
    UNION SELECT turn_id FROM calls WHERE superseded_by IS NULL)
WHERE name IS NOT NULL;
