-- The files whose calls have no time (a period view's "(no time)" row), in path order.
SELECT DISTINCT s.path
FROM live_calls c JOIN sources s USING (source_id)
WHERE c.ts IS NULL
ORDER BY 1;
