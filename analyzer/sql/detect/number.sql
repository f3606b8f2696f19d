-- Give each incident found for the first time the next number, in order of start time, then
-- detector and id (an incident found again keeps its number). No parameters.
INSERT INTO incident_numbers
SELECT incident_id,
       (SELECT coalesce(max(number), 0) FROM incident_numbers)
           + row_number() OVER (ORDER BY start_ts NULLS LAST, detector, incident_id)
FROM incidents
WHERE incident_id NOT IN (SELECT incident_id FROM incident_numbers);
