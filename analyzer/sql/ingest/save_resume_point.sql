-- A file's resume point replaced by the one its latest read left (analyzer.ingest.resume), or
-- dropped (keep false). Parameters: file (its resolved path), keep, source_id, byte_offset,
-- lines, prefix_sha256, state (JSON).
DELETE FROM resume_points WHERE file = $file;

INSERT INTO resume_points
SELECT $file, $source_id, $byte_offset, $lines, $prefix_sha256, $state WHERE $keep;
