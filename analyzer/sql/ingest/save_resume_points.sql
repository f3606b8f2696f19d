-- Files' resume points replaced by the ones their latest reads left (analyzer.ingest.resume), or
-- dropped (keep false): lf_points (file: its resolved path, keep, source_id, byte_offset,
-- lines, prefix_sha256, state: JSON), one row per read (of a file read twice, the later read,
-- by source_id, stands). No parameters.
DELETE FROM resume_points WHERE file IN (SELECT file FROM lf_points);

INSERT INTO resume_points
SELECT file, source_id, byte_offset, lines, prefix_sha256, state
FROM (SELECT * FROM lf_points
      QUALIFY row_number() OVER (PARTITION BY file ORDER BY source_id DESC) = 1)
WHERE keep;
