-- The days of a table that changed, written as Parquet partitioned by day (the hive layout)
-- into a staging folder. Slots: table, the table exported; target, the staging folder (a
-- quoted SQL string). Parameter: days (the days to write).
COPY (SELECT *, coalesce(strftime(t.ts, '%Y-%m-%d'), 'unknown') AS day
      FROM {{table}} t
      WHERE coalesce(strftime(t.ts, '%Y-%m-%d'), 'unknown') IN (SELECT unnest($days)))
TO {{target}} (FORMAT parquet, PARTITION_BY (day));
