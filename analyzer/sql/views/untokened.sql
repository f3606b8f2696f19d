-- Calls with neither tokens nor a cost in their log, by format, most first.
SELECT format, count(*)
FROM live_calls
WHERE cost_usd IS NULL AND input_tokens IS NULL AND output_tokens IS NULL
GROUP BY 1
ORDER BY 2 DESC, 1;
