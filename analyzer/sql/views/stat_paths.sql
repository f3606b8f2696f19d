-- Each file read into the store with the path its stat was taken at (file_stat is
-- 'path|size|mtime'; a path may itself hold '|'), by source id: whether it is still on disk
-- is asked of the file system (views/usage.py, gone_sources). No parameters.
SELECT source_id, regexp_extract(file_stat, '^(.*)\|[0-9]+\|[0-9]+$', 1) AS path
FROM sources
WHERE file_stat IS NOT NULL
ORDER BY source_id;
