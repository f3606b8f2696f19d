-- What was read from every file, as the sources table counts it: files, records read,
-- loaded, rejected, duplicate and skipped.
SELECT count(*), coalesce(sum(rows_read), 0), coalesce(sum(rows_loaded), 0),
       coalesce(sum(rows_rejected), 0), coalesce(sum(rows_duplicate), 0),
       coalesce(sum(rows_skipped), 0)
FROM sources;
