-- Spend by one column (model, app or API key): calls and dollars per value ('(none)' where
-- it is NULL), most dollars first. Slot: column, the column. Parameter: top (rows kept).
SELECT coalesce({{column}}, '(none)') AS name, count(*) AS calls,
       coalesce(sum(cost_usd), 0) AS usd
FROM live_calls
GROUP BY 1
ORDER BY usd DESC, calls DESC, name
LIMIT $top;
