-- Spend by label (calls.labels) with the waste of the incidents whose labels name it
-- (incidents.labels, attributed as sql/attribute.sql attributes them): per label and value
-- ("team.id=platform"; a call or incident with several labels counts under each), most wasted
-- first. Only calls and incidents that have labels. Parameter: top (rows kept).
WITH spend AS (
    SELECT e.key || '=' || e.value AS name, count(*) AS calls, coalesce(sum(cost_usd), 0) AS usd
    FROM (SELECT cost_usd,
                 unnest(map_entries(CAST(CAST(labels AS JSON) AS MAP(VARCHAR, VARCHAR)))) AS e
          FROM live_calls WHERE labels IS NOT NULL)
    GROUP BY 1),
waste AS (
    SELECT e.key || '=' || e.value AS name, sum(wasted_usd) AS wasted, count(*) AS n
    FROM (SELECT wasted_usd,
                 unnest(map_entries(CAST(CAST(labels AS JSON) AS MAP(VARCHAR, VARCHAR)))) AS e
          FROM incidents WHERE labels IS NOT NULL)
    GROUP BY 1)
SELECT s.name, s.calls, s.usd, coalesce(w.wasted, 0), coalesce(w.n, 0)
FROM spend s LEFT JOIN waste w USING (name)
ORDER BY 4 DESC, 3 DESC, 1
LIMIT $top;
