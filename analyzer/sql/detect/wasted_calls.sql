-- The calls the waste of incident $id is made of when its detector names none: every live
-- call of its stream from its first call ($first) to its last ($last), by seq. No slots.
INSERT INTO incident_calls
SELECT $id, c.call_id FROM calls c, calls f, calls l
WHERE f.call_id = $first AND l.call_id = $last AND c.stream_key = f.stream_key
  AND c.superseded_by IS NULL AND c.seq BETWEEN f.seq AND l.seq;
