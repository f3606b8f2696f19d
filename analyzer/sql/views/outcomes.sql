-- Runs per outcome ('none' for a run whose log says no verdict), most first.
SELECT coalesce(outcome, 'none'), count(*)
FROM runs
GROUP BY 1
ORDER BY 2 DESC, 1;
