-- The incidents a guard should stop (lf_truth: incident_id, detector, event_id, each its own
-- event at first) and the replay's events their waste is made of (lf_truth_calls: the
-- incident, then lf_events' columns). Slot {{severities}}: the severities that are ground
-- truth, as a list of SQL strings.
CREATE OR REPLACE TEMP TABLE lf_truth AS
SELECT incident_id, detector, incident_id AS event_id FROM incidents
WHERE severity IN ({{severities}});

CREATE OR REPLACE TEMP TABLE lf_truth_calls AS
SELECT t.incident_id, e.* FROM lf_truth t
JOIN incident_calls ic USING (incident_id) JOIN lf_events e USING (call_id);
