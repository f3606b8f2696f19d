-- The usage-first reads the store holds (analyzer.load.usage_first): their source id, file
-- (sources.file_stat) and path as named, marked by "usage_only" in the options they were read
-- with.
SELECT source_id, file_stat, path FROM sources
WHERE coalesce(json_extract(options, '$.usage_only')::BOOLEAN, false)
ORDER BY source_id;
