-- One pass of joining incidents into events: an incident that shares a wasted call with
-- another takes the least event id among them (lf_truth.event_id). Returns how many rows
-- changed (run until none does). No parameters.
WITH pairs AS (
    SELECT a.incident_id, min(tb.event_id) AS ev
    FROM lf_truth_calls a JOIN lf_truth_calls b USING (call_id)
    JOIN lf_truth tb ON tb.incident_id = b.incident_id GROUP BY a.incident_id)
UPDATE lf_truth SET event_id = p.ev FROM pairs p
WHERE lf_truth.incident_id = p.incident_id AND p.ev < lf_truth.event_id;
