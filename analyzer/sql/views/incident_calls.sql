-- The calls of each incident: its stream from the first to the last call (both included);
-- when they lie in different streams (a parent and its sub-agents), every call of the
-- session and its sub-agents in the incident's time span. In incident, time, stream order.
-- Parameters: incs (a list of structs: incident_id, first_call_id, last_call_id,
-- session_id, start_ts, end_ts), bills (the bill formats: a bill's row's own provider id is
-- its native id).
WITH i AS (SELECT unnest($incs, recursive := true)),
e AS (
    SELECT i.*, f.stream_key AS fs, f.seq AS fq, l.stream_key AS ls, l.seq AS lq
    FROM i LEFT JOIN calls f ON f.call_id = i.first_call_id
           LEFT JOIN calls l ON l.call_id = i.last_call_id),
span AS (SELECT * FROM e WHERE fs IS DISTINCT FROM ls),
hits AS (
    SELECT e.incident_id, c.rowid AS rid FROM e JOIN calls c
      ON c.stream_key = e.fs AND e.fs = e.ls AND c.seq BETWEEN e.fq AND e.lq
    UNION
    SELECT s.incident_id, c.rowid FROM span s JOIN calls c
      ON c.session_id = s.session_id AND c.ts BETWEEN s.start_ts AND s.end_ts
    UNION
    SELECT s.incident_id, c.rowid FROM span s JOIN calls c
      ON c.parent_session_id = s.session_id AND c.ts BETWEEN s.start_ts AND s.end_ts)
SELECT h.incident_id, c.ts, c.call_id, CASE WHEN c.format IN (SELECT unnest($bills)) THEN c.native_id END, c.response_id,
       c.input_tokens, c.output_tokens, c.finish_reason, c.response_kind, c.cost_usd,
       c.billing_call_id, c.cost_basis, c.http_status, c.event_count, c.content_chars
FROM hits h JOIN calls c ON c.rowid = h.rid
WHERE c.superseded_by IS NULL
ORDER BY h.incident_id, c.ts, c.seq, c.call_id;
