-- The store's incidents of the detectors that did not run now ($names: those that did), as
-- rows of lf_found (detect/deferred.sql) for the general detectors to defer to: each as a
-- named detector's. No slots.
SELECT incident_id, false AS general, severity, first_call_id, last_call_id
FROM incidents
WHERE NOT list_contains($names, detector)
ORDER BY incident_id;
