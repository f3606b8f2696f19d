-- Forget what the detector $detector found before (its incidents and the calls of their
-- waste), before its new rows are recorded. No slots.
DELETE FROM incident_calls WHERE incident_id IN
    (SELECT incident_id FROM incidents WHERE detector = $detector);

DELETE FROM incidents WHERE detector = $detector;
