-- Spend and waste per UTC day (the page's chart), in day order: the calls' dollars by their
-- day, the incidents' waste by the day they began.
WITH spend AS (SELECT ts::DATE AS d, sum(cost_usd) AS usd FROM live_calls
               WHERE ts IS NOT NULL GROUP BY 1),
waste AS (SELECT start_ts::DATE AS d, sum(wasted_usd) AS usd FROM incidents
          WHERE start_ts IS NOT NULL GROUP BY 1)
SELECT d, coalesce(s.usd, 0), coalesce(w.usd, 0)
FROM spend s FULL JOIN waste w USING (d)
ORDER BY d;
