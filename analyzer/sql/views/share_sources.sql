-- The files of machine $machine that this store read itself (not a shared batch it read) and
-- that are not in the shared folder yet (lf_shared: the share_key of every file the machine's
-- earlier batches hold), as lf_share_sources: the sources rows with their share_key (what a
-- read of a file is known by across shares: its content, when it was read, its path). A
-- file of no machine (a store older than format 10) is the sharing machine's.
CREATE OR REPLACE TEMP TABLE lf_share_sources AS
SELECT *
FROM (SELECT s.*,
             s.sha256 || '|' || strftime(s.ingested_at, '%Y-%m-%dT%H:%M:%S.%f') || '|' || s.path
                 AS share_key
      FROM main.sources s
      WHERE coalesce(s.machine, $machine) = $machine AND s.format <> $share_format) n
WHERE n.share_key NOT IN (SELECT share_key FROM lf_shared)
ORDER BY n.source_id;
