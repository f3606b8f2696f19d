-- After upgrade-to-9.sql: the Claude Code calls a store of format 8 or earlier priced at their
-- logged placeholder output count (cost_basis 'estimated', output_final false), which a new
-- read prices at an estimate of what they wrote ('estimated_output',
-- analyzer.ingest.output_estimate): the store does not hold that (a tool call's arguments are
-- kept as a hash and a cut excerpt), so they stay as they were. Gives (calls, dollars).
-- No parameters.
SELECT count(*) AS calls, coalesce(sum(cost_usd), 0) AS usd
FROM calls
WHERE format IN ('claude_code', 'claude_stream_json')
  AND cost_basis = 'estimated'
  AND NOT coalesce(output_final, false)
  AND output_tokens IS NOT NULL;
