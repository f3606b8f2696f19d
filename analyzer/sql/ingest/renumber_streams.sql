-- Renumber seq and the sessions of whole streams of format fmt (those listed in the relation
-- streams, with a stream_key column): seq in time order (ties by native id), a silence
-- over gap seconds starting a new session, each session named by its stream and its first
-- call's time. Parameters: fmt, gap. Slots: streams, session_id (the session id
-- expression over stream_key and the session's start).
CREATE OR REPLACE TEMP TABLE lf_renumber AS
WITH c AS (
    SELECT call_id, stream_key, ts,
           row_number() OVER (PARTITION BY stream_key ORDER BY ts, native_id) AS seq,
           lag(ts) OVER (PARTITION BY stream_key ORDER BY ts, native_id) AS prev_ts
    FROM calls
    WHERE format = $fmt AND stream_key IN (SELECT stream_key FROM {{streams}})
),
n AS (
    SELECT *, sum(CASE WHEN prev_ts IS NULL OR ts - prev_ts > to_seconds($gap)
                       THEN 1 ELSE 0 END)
              OVER (PARTITION BY stream_key ORDER BY seq ROWS UNBOUNDED PRECEDING)
              AS session_no
    FROM c
)
SELECT call_id, seq, {{session_id}} AS session_id
FROM n;

UPDATE calls SET seq = r.seq, session_id = r.session_id
FROM lf_renumber r
WHERE calls.call_id = r.call_id AND calls.format = $fmt
  AND (calls.seq IS DISTINCT FROM r.seq
       OR calls.session_id IS DISTINCT FROM r.session_id);

DROP TABLE lf_renumber;
