-- Per variant, the waste its stops prevented: each killed call's cost once. Reads lf_killed.
-- No parameters.
SELECT variant, sum(cost_usd) FROM (
    SELECT DISTINCT variant, call_id, cost_usd FROM lf_killed)
GROUP BY variant;
