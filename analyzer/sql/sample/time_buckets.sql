-- The rows of the sample's generated Parquet parts (parameter parts: their paths) per bucket
-- of time (parameter width: a bucket's width in ms), in order: (bucket, rows), where the
-- bucket begins at bucket * width.
SELECT ts_ms // $width AS bucket, count(*) AS n
FROM read_parquet($parts)
GROUP BY bucket
ORDER BY bucket;
