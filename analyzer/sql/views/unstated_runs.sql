-- The runs whose log states no cost divided over their calls (cut off before their result
-- line; a 0 the agent wrote for a model it could not price) in a file that states other runs'
-- costs, and whose calls (their sub-agents' too) are priced at list prices: dollars above
-- what that file states. One row: those runs, of which cut off (no verdict), their calls and
-- dollars, their files, and what those files state for their runs (NULL dollars: there are
-- none). A file is its machine and the path its stat was taken at (views/stat_paths.sql), so
-- that every read of a growing file is one file, and two files of one name are two.
WITH r AS (
    SELECT r.session_id, r.outcome, coalesce(r.cost_apportioned, false) AS divided,
           r.reported_cost_usd,
           coalesce(s.machine, '') || '|' || coalesce(
               nullif(regexp_extract(s.file_stat, '^(.*)\|[0-9]+\|[0-9]+$', 1), ''),
               '#' || s.source_id) AS path
    FROM runs r JOIN sources s USING (source_id)),
stating AS (
    SELECT path, sum(reported_cost_usd) AS stated FROM r
    WHERE divided AND reported_cost_usd IS NOT NULL GROUP BY path),
priced AS (
    SELECT r.session_id, r.outcome, r.path, c.cost_usd
    FROM r JOIN stating USING (path)
    JOIN live_calls c ON coalesce(c.parent_session_id, c.session_id) = r.session_id
    WHERE NOT r.divided AND c.cost_basis IN ('estimated', 'estimated_output'))
SELECT count(DISTINCT session_id), count(DISTINCT session_id) FILTER (WHERE outcome IS NULL),
       count(*), sum(cost_usd), count(DISTINCT path),
       (SELECT sum(stated) FROM stating WHERE path IN (SELECT path FROM priced))
FROM priced;
