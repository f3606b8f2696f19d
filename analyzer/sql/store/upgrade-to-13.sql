-- Store format 12 -> 13: the dimensions a log states for each call (calls.labels: OpenTelemetry
-- resource attributes, a trace platform's user and tags). Calls read before have none (no
-- format read before this version records any). No parameters. The column is added last, as
-- schema.sql declares it. Every kept result is computed again.
ALTER TABLE calls ADD COLUMN IF NOT EXISTS labels VARCHAR;
DELETE FROM cache;
