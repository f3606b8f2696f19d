-- The rejects of an earlier read of a file (source old) at lines from line on, which a read of
-- the file grown reads again (analyzer.ingest.resume): taken from that read, whose accounting
-- then counts those lines no more (rows_read = rows_loaded + rows_rejected + rows_duplicate +
-- rows_skipped still holds). Rejects with no line are left. Parameters: old, line.
UPDATE sources
SET rows_read = rows_read - r.n, rows_rejected = rows_rejected - r.n
FROM (SELECT count(*) AS n FROM rejects WHERE source_id = $old AND line >= $line) r
WHERE sources.source_id = $old;

DELETE FROM rejects WHERE source_id = $old AND line >= $line;
