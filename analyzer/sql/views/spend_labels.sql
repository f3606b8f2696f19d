-- Spend by label (calls.labels): calls and dollars per label and value ("team.id=platform"; a
-- call with several labels counts under each, so the rows do not add up to the whole), most
-- dollars first. Only calls that have labels. Parameter: top (rows kept).
SELECT e.key || '=' || e.value AS name, count(*) AS calls, coalesce(sum(cost_usd), 0) AS usd
FROM (SELECT cost_usd,
             unnest(map_entries(CAST(CAST(labels AS JSON) AS MAP(VARCHAR, VARCHAR)))) AS e
      FROM live_calls WHERE labels IS NOT NULL)
GROUP BY 1
ORDER BY usd DESC, calls DESC, name
LIMIT $top;
