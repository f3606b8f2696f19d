-- The rows of relation rows (with stream_key, ts, native_id) with seq and session_id added:
-- each stream (of format fmt) continued from its last stored call, a silence over gap seconds
-- starting a new session. A fragment (a SELECT) put into a statement.
-- Parameters: fmt, gap. Slots: rows, session_id (the session id expression over stream_key
-- and session_start).
WITH anchor AS (
    SELECT stream_key, max(seq) AS a_seq, arg_max(ts, seq) AS a_ts,
           arg_max(session_id, seq) AS a_session
    FROM calls
    WHERE format = $fmt AND stream_key IN (SELECT DISTINCT stream_key FROM {{rows}})
    GROUP BY stream_key
),
w AS (
    SELECT r.*, a.a_seq, a.a_session,
           coalesce(a.a_seq, 0) + row_number() OVER ord AS seq_,
           coalesce(lag(r.ts) OVER ord, a.a_ts) AS prev_ts
    FROM {{rows}} r LEFT JOIN anchor a USING (stream_key)
    WINDOW ord AS (PARTITION BY r.stream_key ORDER BY r.ts, r.native_id)
),
s AS (
    -- Both windows share one ordering: a session's first call is the latest call so far
    -- that started one.
    SELECT *,
           sum(starts::INTEGER) OVER run AS session_no,
           max(CASE WHEN starts THEN ts END) OVER run AS session_start
    FROM (SELECT *, prev_ts IS NULL OR ts - prev_ts > to_seconds($gap) AS starts FROM w)
    WINDOW run AS (PARTITION BY stream_key ORDER BY seq_ ROWS UNBOUNDED PRECEDING)
)
SELECT * EXCLUDE (a_seq, a_session, prev_ts, seq_, session_no, starts, session_start),
       seq_ AS seq,
       CASE WHEN session_no = 0 THEN a_session
            ELSE {{session_id}}
       END AS session_id
FROM s
