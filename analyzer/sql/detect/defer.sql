-- Drop the incidents of the general detectors ($general, their names) that a named detector
-- already explains: more than half of the live calls of the incident's stream from its first
-- call to its last (by seq) lie within the calls of a medium or high incident of a named
-- detector (from its first call to its last) in the same stream. That is the same loop: the
-- named incident says more (which shape, why it is waste, what its guard would have done),
-- and the general one stands only where most of what it found no rule had found. No slots.
CREATE OR REPLACE TEMP TABLE lf_deferred AS
WITH spans AS (
    SELECT i.incident_id, i.detector, i.severity, f.stream_key, f.seq AS lo, l.seq AS hi
    FROM incidents i
    JOIN calls f ON f.call_id = i.first_call_id
    JOIN calls l ON l.call_id = i.last_call_id
),
named AS (
    SELECT stream_key, lo, hi FROM spans
    WHERE NOT list_contains($general, detector) AND severity IN ('medium', 'high')
),
members AS (
    SELECT g.incident_id, c.call_id,
           EXISTS (SELECT 1 FROM named n
                   WHERE n.stream_key = g.stream_key AND c.seq BETWEEN n.lo AND n.hi)
               AS explained
    FROM spans g
    JOIN calls c ON c.stream_key = g.stream_key AND c.superseded_by IS NULL
                AND c.seq BETWEEN g.lo AND g.hi
    WHERE list_contains($general, g.detector)
)
SELECT incident_id FROM members
GROUP BY incident_id
HAVING count(*) FILTER (WHERE explained) * 2 > count(*);

DELETE FROM incident_calls WHERE incident_id IN (SELECT incident_id FROM lf_deferred);

DELETE FROM incidents WHERE incident_id IN (SELECT incident_id FROM lf_deferred);

DROP TABLE lf_deferred;
