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
-- Format 8 marked every Claude Code call's output a placeholder. A call one of whose lines said
-- how the response stopped (its stop reason is finish_reason_raw; 'error' is an API error's,
-- which hides whether one was logged) has its final count, as a new read marks it
-- (analyzer.ingest.output_estimate). What the others wrote, to estimate their output, is not in
-- the store: store/placeholders-before-9.sql counts them.
UPDATE calls SET output_final = true
WHERE format IN ('claude_code', 'claude_stream_json')
  AND NOT coalesce(output_final, false)
  AND finish_reason_raw IS NOT NULL AND finish_reason_raw <> 'error';
DELETE FROM cache;
