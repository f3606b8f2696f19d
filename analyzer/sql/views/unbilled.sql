-- A bill's rows that state no charge. Parameter: bills (the bill formats).
SELECT count(*)
FROM live_calls
WHERE cost_usd IS NULL AND format IN (SELECT unnest($bills));
