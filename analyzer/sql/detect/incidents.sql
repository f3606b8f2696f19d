-- The incidents in the store with their numbers, most wasted dollars first, then by severity,
-- start time and id. Parameter: $names (the detectors, when {{where}} names them). Slots:
-- {{columns}} (the incident's columns, of i), {{severity_order}} (an expression ranking
-- i.severity, most severe first), {{where}} (empty, or a WHERE clause on i).
SELECT {{columns}}, n.number
FROM incidents i LEFT JOIN incident_numbers n USING (incident_id) {{where}}
ORDER BY i.wasted_usd DESC, {{severity_order}}, i.start_ts,
         i.incident_id;
