-- The temporary tables and views that exist now (kind, name): what a step's end compares
-- with what it began with.
SELECT 'TABLE' AS kind, table_name AS name FROM duckdb_tables() WHERE temporary
UNION ALL
SELECT 'VIEW', view_name FROM duckdb_views() WHERE temporary AND NOT internal;
