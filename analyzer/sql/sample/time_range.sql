-- The first and last ts_ms of the sample's generated Parquet parts (parameter parts: their
-- paths), for cutting the export into slices of time.
SELECT min(ts_ms), max(ts_ms) FROM read_parquet($parts);
