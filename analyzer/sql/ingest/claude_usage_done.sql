-- What claude_usage.sql kept while it read, let go of once its calls are taken (the lines of a
-- part of a history, up to 256 MiB of them, would otherwise stay until the next part).
DROP TABLE IF EXISTS lf_cu_raw;
DROP TABLE IF EXISTS lf_cu_place_all;
DROP TABLE IF EXISTS lf_cu_place;
DROP TABLE IF EXISTS lf_cu_lines;
DROP TABLE IF EXISTS lf_cu_said;
DROP TABLE IF EXISTS lf_cu_line;
DROP TABLE IF EXISTS lf_cu_verdict;
DROP TABLE IF EXISTS lf_cu_calls;
DROP TABLE IF EXISTS lf_cu_files;
