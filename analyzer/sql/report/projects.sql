-- Spend by project, as `usage project` groups the calls (the project, else the app), most
-- dollars first: calls, tokens (as `usage` counts them: fresh input, cache write, cache read
-- and output), dollars, and the waste and number of the incidents attributed to each
-- (sql/attribute.sql); the first $top rows, then the rest summed in one row (its name NULL,
-- `projects` how many it sums). Parameter: top (rows kept whole).
WITH spend AS (
    SELECT coalesce(project, app, '(none)') AS name, count(*) AS calls,
           coalesce(sum(greatest(coalesce(input_tokens, 0) - coalesce(cached_input_tokens, 0)
                                 - coalesce(cache_write_tokens, 0), 0)
                        + coalesce(cache_write_tokens, 0) + coalesce(cached_input_tokens, 0)
                        + coalesce(output_tokens, 0)), 0) AS tokens,
           coalesce(sum(cost_usd), 0) AS usd
    FROM live_calls GROUP BY 1),
waste AS (
    SELECT coalesce(project, app, '(none)') AS name, sum(wasted_usd) AS wasted, count(*) AS n
    FROM incidents GROUP BY 1),
ranked AS (
    SELECT s.*, coalesce(w.wasted, 0) AS wasted, coalesce(w.n, 0) AS n,
           row_number() OVER (ORDER BY s.usd DESC, s.tokens DESC, s.name) AS pos
    FROM spend s LEFT JOIN waste w USING (name))
SELECT CASE WHEN min(pos) <= $top THEN any_value(name) END AS name, count(*) AS projects,
       sum(calls), sum(tokens), sum(usd), sum(wasted), sum(n)
FROM ranked
GROUP BY least(pos, $top + 1)
ORDER BY least(pos, $top + 1);
