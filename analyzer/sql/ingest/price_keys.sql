-- The prices the calls to store (lf_call_kept) need: every call with tokens of a model named
-- by a string (not a stand-in for a call that never reached a model, `unpriced`), by provider,
-- day and fast mode. Parameter: unpriced (the stand-in model names).
SELECT DISTINCT model, provider, ts::DATE AS day, variant IS NOT DISTINCT FROM 'fast' AS fast
FROM lf_call_kept
WHERE model <> '' AND model NOT IN (SELECT unnest($unpriced))
  AND (input_tokens IS NOT NULL OR output_tokens IS NOT NULL)
ORDER BY ALL;
