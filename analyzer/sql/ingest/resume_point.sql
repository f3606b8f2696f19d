-- A file's resume point (resume_points, analyzer.ingest.resume), if it has one. Parameter: file
-- (its resolved path).
SELECT source_id, byte_offset, lines, prefix_sha256, state FROM resume_points WHERE file = $file;
