-- The bytes the in-memory tables take, in memory and spilled. No parameters.
SELECT sum(memory_usage_bytes + temporary_storage_bytes) FROM duckdb_memory()
WHERE tag = 'IN_MEMORY_TABLE';
