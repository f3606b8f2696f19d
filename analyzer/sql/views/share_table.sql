-- The rows of a table (slot: table; calls, messages or runs) read from the files about to be
-- shared (lf_share_sources), written as one Parquet file (slot: target, a quoted SQL string),
-- in the order they were stored.
COPY (SELECT t.* FROM main.{{table}} t
      WHERE t.source_id IN (SELECT source_id FROM lf_share_sources)
      ORDER BY t.source_id, t.rowid)
TO {{target}} (FORMAT parquet);
