-- What the replay reads of the ground truth, once lf_truth and lf_truth_calls are settled:
-- each incident's extent per stream (lf_truth_span: first and last position, first time), the
-- wasted calls (lf_waste), and each sub-agent stream's calls, dollars and wasted dollars
-- under its parent session (lf_children). No parameters.
CREATE OR REPLACE TEMP TABLE lf_truth_span AS
WITH ends AS (
    SELECT t.incident_id, f.u_stream, f.pos AS first_pos,
           l.pos AS last_pos, f.ts AS first_ts
    FROM lf_truth t JOIN incidents i USING (incident_id)
    JOIN lf_events f ON f.call_id = i.first_call_id
    JOIN lf_events l ON l.call_id = i.last_call_id AND l.u_stream = f.u_stream)
SELECT incident_id, u_stream,
       min(first_pos) AS first_pos, max(last_pos) AS last_pos,
       min(first_ts) AS first_ts
FROM (SELECT * FROM ends
      UNION ALL
      SELECT incident_id, u_stream, pos, pos, ts FROM lf_truth_calls)
GROUP BY incident_id, u_stream;

CREATE OR REPLACE TEMP TABLE lf_waste AS
SELECT DISTINCT call_id FROM lf_truth_calls;

CREATE OR REPLACE TEMP TABLE lf_children AS
SELECT e.parent_session_id, n.id AS parent_sid, e.u_stream,
       min(e.ts) AS first_ts, count(*) AS n,
       coalesce(sum(e.cost_usd), 0) AS usd,
       coalesce(sum(e.cost_usd) FILTER (WHERE w.call_id IS NOT NULL), 0) AS waste
FROM lf_events e LEFT JOIN lf_waste w USING (call_id)
LEFT JOIN lf_names n ON n.name = e.parent_session_id
WHERE e.parent_session_id IS NOT NULL GROUP BY ALL;
