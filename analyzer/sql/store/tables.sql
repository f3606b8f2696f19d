-- The tables and views stored in the database (not temporary, not DuckDB's own), in no order
-- (the caller sorts them). No parameters.
SELECT table_name FROM duckdb_tables()
WHERE database_name = current_database() AND NOT temporary
UNION ALL
SELECT view_name FROM duckdb_views()
WHERE database_name = current_database() AND NOT temporary AND NOT internal;
