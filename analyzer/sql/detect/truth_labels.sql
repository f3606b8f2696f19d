-- The user's labels (lf_labels: id, label) applied to the ground truth: a runaway incident
-- joins it whatever its severity; a legitimate incident, or one holding a call labelled
-- legitimate, leaves it; runaway calls in no incident form one incident per stream
-- ('label:' and the stream's key), made of those calls. No parameters.
INSERT INTO lf_truth SELECT id, detector, id FROM lf_labels
JOIN incidents ON incident_id = id
WHERE label = 'runaway' AND id NOT IN (SELECT incident_id FROM lf_truth);

INSERT INTO lf_truth_calls
SELECT t.incident_id, e.* FROM lf_truth t
JOIN incident_calls ic USING (incident_id) JOIN lf_events e USING (call_id)
WHERE t.incident_id NOT IN (SELECT incident_id FROM lf_truth_calls);

DELETE FROM lf_truth WHERE incident_id IN (
    SELECT id FROM lf_labels WHERE label = 'legitimate'
    UNION SELECT ic.incident_id FROM incident_calls ic
          JOIN lf_labels l ON l.id = ic.call_id AND l.label = 'legitimate');

DELETE FROM lf_truth_calls WHERE incident_id IN (
    SELECT id FROM lf_labels WHERE label = 'legitimate'
    UNION SELECT ic.incident_id FROM incident_calls ic
          JOIN lf_labels l ON l.id = ic.call_id AND l.label = 'legitimate');

INSERT INTO lf_truth_calls
SELECT 'label:' || k.stream_key, e.* FROM lf_events e
JOIN lf_streams k ON k.sk = e.u_stream
JOIN lf_labels l ON l.id = e.call_id AND l.label = 'runaway'
WHERE e.call_id NOT IN (SELECT call_id FROM incident_calls);

INSERT INTO lf_truth SELECT DISTINCT incident_id, NULL, incident_id
FROM lf_truth_calls WHERE incident_id LIKE 'label:%';
