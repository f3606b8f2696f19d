-- The calls stored, the live ones (every call once) and their cost.
SELECT count(*), count(*) FILTER (WHERE superseded_by IS NULL),
       coalesce(sum(cost_usd) FILTER (WHERE superseded_by IS NULL), 0)
FROM calls;
