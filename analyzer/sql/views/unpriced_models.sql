-- Logged calls with tokens and no price, by model (' (fast mode)' when so), most first; a
-- bill's row is never priced and is counted apart. Parameter: bills (the bill formats).
SELECT coalesce(model, '(no model)')
       || CASE WHEN variant = 'fast' THEN ' (fast mode)' ELSE '' END,
       count(*)
FROM live_calls
WHERE cost_usd IS NULL AND (input_tokens > 0 OR output_tokens > 0)
  AND format NOT IN (SELECT unnest($bills))
GROUP BY 1
ORDER BY 2 DESC, 1;
