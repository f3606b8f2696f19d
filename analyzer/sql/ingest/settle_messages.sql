-- A set of files' messages (lf_msg_batch, each with its source_id and place pos) settled against the store
-- and inserted: a message whose (session_id, idx) the store holds already (a log file that
-- grew and is read again) is a duplicate, and so is a message of a replayed call its file
-- did not keep (lf_msg_gone: source_id, call_id; see settle_in_file.sql). No parameters.
-- The last statement: the duplicate records of each source (source_id, dup).
-- The duplicates are found once, by their narrow keys (a file's places pos are its own, one
-- a message), and the insert leaves those places out.
CREATE OR REPLACE TEMP TABLE lf_msg_dups AS
SELECT b.source_id, b.pos, b.n_records
FROM lf_msg_batch b
WHERE EXISTS (SELECT 1 FROM messages m WHERE m.session_id = b.session_id AND m.idx = b.idx)
   OR EXISTS (SELECT 1 FROM lf_msg_gone g
              WHERE g.source_id = b.source_id AND g.call_id = b.call_id);

INSERT INTO messages BY NAME
SELECT * EXCLUDE (n_records, pos) FROM lf_msg_batch b
WHERE NOT EXISTS (SELECT 1 FROM lf_msg_dups d WHERE d.source_id = b.source_id AND d.pos = b.pos)
ORDER BY b.source_id, b.pos;

SELECT source_id, coalesce(sum(n_records), 0)::BIGINT AS dup
FROM lf_msg_dups GROUP BY source_id ORDER BY source_id;
