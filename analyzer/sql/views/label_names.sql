-- The names of the labels the calls have (calls.labels, JSON objects), sorted. No parameters.
SELECT DISTINCT unnest(json_keys(labels)) AS name
FROM live_calls
WHERE labels IS NOT NULL
ORDER BY name;
