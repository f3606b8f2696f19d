-- Store format 12 -> 13: the dimensions a log states for each call (calls.labels: OpenTelemetry
-- resource attributes, a trace platform's user and tags), and those of each incident's wasted
-- calls (incidents.labels). Calls read before have none (no format read before this version
-- records any), so neither have their incidents. No parameters. Columns are added last, as
-- schema.sql declares them. Every kept result is computed again.
ALTER TABLE calls ADD COLUMN IF NOT EXISTS labels VARCHAR;
ALTER TABLE incidents ADD COLUMN IF NOT EXISTS labels VARCHAR;
DELETE FROM cache;
