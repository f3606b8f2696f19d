-- The incidents of the general detectors that a named detector already explains: more than
-- half of the live calls of the incident's stream from its first call to its last (by seq) lie
-- within the calls of a medium or high incident of a named detector (from its first call to
-- its last) in the same stream. That is the same loop: the named incident says more (which
-- shape, why it is waste, what its guard would have done), and the general one stands only
-- where most of what it found no rule had found. Reads lf_found (incident_id, general,
-- severity, first_call_id, last_call_id: the incidents just found and those of the other
-- detectors in the store) and live_calls; returns the incident_id of each to drop. A query in
-- DuckDB's dialect, run as the detectors are (on Spark too). No parameters.
WITH spans AS (
    SELECT f.incident_id, f.general, f.severity, a.stream_key, a.seq AS lo, b.seq AS hi
    FROM lf_found f
    JOIN live_calls a ON a.call_id = f.first_call_id
    JOIN live_calls b ON b.call_id = f.last_call_id
),
named AS (
    SELECT stream_key, lo, hi FROM spans
    WHERE NOT general AND severity IN ('medium', 'high')
),
members AS (
    SELECT g.incident_id, c.call_id,
           max(CASE WHEN n.stream_key IS NULL THEN 0 ELSE 1 END) AS explained
    FROM spans g
    JOIN live_calls c ON c.stream_key = g.stream_key AND c.seq BETWEEN g.lo AND g.hi
    LEFT JOIN named n ON n.stream_key = g.stream_key AND c.seq BETWEEN n.lo AND n.hi
    WHERE g.general
    GROUP BY g.incident_id, c.call_id
)
SELECT incident_id
FROM members
GROUP BY incident_id
HAVING sum(explained) * 2 > count(*)
ORDER BY incident_id
