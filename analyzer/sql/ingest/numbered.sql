-- The numbering of with_sessions.sql on an integer stream id: over rows (rid, line, sk, ts,
-- native_id), with streams (sk, stream_key) naming each sk: rid, line, seq, session_start
-- (NULL where a row continues the stream's last stored session) and session_given (that
-- session's id). A fragment (a SELECT) put into a statement. Parameters: fmt, gap.
-- Slots: rows, streams.
WITH anchor AS (
    SELECT k.sk, max(c.seq) AS a_seq, arg_max(c.ts, c.seq) AS a_ts,
           arg_max(c.session_id, c.seq) AS a_session
    FROM calls c JOIN {{streams}} k USING (stream_key)
    WHERE c.format = $fmt
    GROUP BY k.sk
),
w AS (
    SELECT r.rid, r.line, r.sk, r.ts, a.a_session,
           coalesce(a.a_seq, 0) + row_number() OVER ord AS seq_,
           coalesce(lag(r.ts) OVER ord, a.a_ts) AS prev_ts
    FROM {{rows}} r LEFT JOIN anchor a USING (sk)
    WINDOW ord AS (PARTITION BY r.sk ORDER BY r.ts, r.native_id)
),
s AS (
    SELECT *,
           sum(starts::INTEGER) OVER run AS session_no,
           max(CASE WHEN starts THEN ts END) OVER run AS session_start
    FROM (SELECT *, prev_ts IS NULL OR ts - prev_ts > to_seconds($gap) AS starts FROM w)
    WINDOW run AS (PARTITION BY sk ORDER BY seq_ ROWS UNBOUNDED PRECEDING)
)
SELECT rid, line, seq_ AS seq,
       CASE WHEN session_no > 0 THEN session_start END AS session_start,
       CASE WHEN session_no = 0 THEN a_session END AS session_given
FROM s
