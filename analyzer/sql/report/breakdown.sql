-- Spend by one column (model, app or API key) with the waste of the incidents attributed to
-- each value (the one each incident names: sql/attribute.sql), most wasted first.
-- Slot: column, the column. Parameter: top (rows kept).
WITH spend AS (
    SELECT coalesce({{column}}, '(none)') AS name, count(*) AS calls,
           coalesce(sum(cost_usd), 0) AS usd
    FROM live_calls GROUP BY 1),
waste AS (
    SELECT coalesce({{column}}, '(none)') AS name, sum(wasted_usd) AS wasted, count(*) AS n
    FROM incidents GROUP BY 1)
SELECT s.name, s.calls, s.usd, coalesce(w.wasted, 0), coalesce(w.n, 0)
FROM spend s LEFT JOIN waste w USING (name)
ORDER BY 4 DESC, 3 DESC, 1
LIMIT $top;
