-- Waste and incidents per detector, most wasted first.
SELECT detector, sum(wasted_usd), count(*)
FROM incidents
GROUP BY 1
ORDER BY 2 DESC, 3 DESC, 1;
