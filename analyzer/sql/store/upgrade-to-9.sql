-- Store format 8 -> 9: the output estimates and the logged cost on calls, the attribution on
-- incidents (filled afterwards by attribute.sql over every kept incident). No parameters.
-- Columns are added last, as schema.sql declares them, so an upgraded store has the columns of
-- a new one in the same order. Every kept result is computed again.
ALTER TABLE calls ADD COLUMN IF NOT EXISTS output_estimate_tokens BIGINT;
ALTER TABLE calls ADD COLUMN IF NOT EXISTS output_estimate_floor BOOLEAN;
ALTER TABLE calls ADD COLUMN IF NOT EXISTS cost_logged_usd DECIMAL(18, 10);
ALTER TABLE incidents ADD COLUMN IF NOT EXISTS app VARCHAR;
ALTER TABLE incidents ADD COLUMN IF NOT EXISTS api_key VARCHAR;
ALTER TABLE incidents ADD COLUMN IF NOT EXISTS model VARCHAR;
ALTER TABLE incidents ADD COLUMN IF NOT EXISTS project VARCHAR;
DELETE FROM cache;
