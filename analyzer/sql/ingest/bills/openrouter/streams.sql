-- The streams of the rows that load get integer ids (lf_or_sk: stream_key, sk; which id a
-- stream gets does not matter), so the sessions are numbered sorting numbers, not text; and
-- lf_or_rows is what the numbering reads: rid, line, sk, ts, native_id of lf_or_new.
CREATE TEMP TABLE lf_or_sk AS
SELECT stream_key, (row_number() OVER ())::INTEGER AS sk
FROM (SELECT DISTINCT stream_key FROM lf_or_new);
CREATE TEMP VIEW lf_or_rows AS
SELECT n.rid, n.line, k.sk, n.ts, n.native_id
FROM lf_or_new n JOIN lf_or_sk k USING (stream_key);
