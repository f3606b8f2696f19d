"""Sessions and order for formats that carry neither (billing exports).

A billing row has no session id. Within a stream (the calls sharing api key, app, user and
model), a silence longer than the session gap starts a new session; ``seq`` numbers the calls
of a stream in time order (ties broken by native id, so it is deterministic).

New rows are numbered as they are inserted, continuing each stream from its last stored call
(the "anchor"): month-by-month exports loaded one after another get the same sessions and
order as one export covering both months. Only a stream whose new rows reach back before its
stored calls (an older export loaded after a newer one) is renumbered in place afterwards.
"""

from __future__ import annotations

import duckdb


def with_sessions_sql(rows: str) -> str:
    """SELECT over relation ``rows`` (having stream_key, ts, native_id) adding seq, session_id.

    Parameters: ``$fmt`` (the format whose stored calls anchor each stream) and ``$gap``
    (seconds of silence that start a new session).
    """
    return f"""
    WITH anchor AS (
        SELECT stream_key, max(seq) AS a_seq, arg_max(ts, seq) AS a_ts,
               arg_max(session_id, seq) AS a_session
        FROM calls
        WHERE format = $fmt AND stream_key IN (SELECT DISTINCT stream_key FROM {rows})
        GROUP BY stream_key
    ),
    w AS (
        SELECT r.*, a.a_seq, a.a_session,
               coalesce(a.a_seq, 0) + row_number() OVER ord AS seq_,
               coalesce(lag(r.ts) OVER ord, a.a_ts) AS prev_ts
        FROM {rows} r LEFT JOIN anchor a USING (stream_key)
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
                ELSE {session_id_sql("stream_key", "session_start")}
           END AS session_id
    FROM s"""


def numbered_sql(rows: str, streams: str) -> str:
    """SELECT over ``rows`` (rid, line, sk, ts, native_id; ``sk`` an integer stream id that
    ``streams`` (sk, stream_key) names) giving rid, line, seq and the session as two parts:
    ``session_start`` (the session's first call's time, the id then being
    ``session_id_sql(stream_key, session_start)``) or, for rows that continue the stream's last
    stored session, ``session_given`` (that session's id) and a NULL start.

    The same numbering as ``with_sessions_sql``, sorted on an integer stream id instead of the
    stream key's text (at ten million rows, 3.8 s instead of 14 s). Parameters: ``$fmt``, ``$gap``.
    """
    return f"""
    WITH anchor AS (
        SELECT k.sk, max(c.seq) AS a_seq, arg_max(c.ts, c.seq) AS a_ts,
               arg_max(c.session_id, c.seq) AS a_session
        FROM calls c JOIN {streams} k USING (stream_key)
        WHERE c.format = $fmt
        GROUP BY k.sk
    ),
    w AS (
        SELECT r.rid, r.line, r.sk, r.ts, a.a_session,
               coalesce(a.a_seq, 0) + row_number() OVER ord AS seq_,
               coalesce(lag(r.ts) OVER ord, a.a_ts) AS prev_ts
        FROM {rows} r LEFT JOIN anchor a USING (sk)
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
    FROM s"""


def session_id_sql(stream_key: str, session_start: str) -> str:
    """The id of the session of ``stream_key`` that started at ``session_start``."""
    return f"{stream_key} || '@' || strftime({session_start}, '%Y-%m-%dT%H:%M:%S.%f')"


def interleaved_streams_sql(rows: str) -> str:
    """Streams whose new rows do not all come after the stored calls (needs ``$fmt``)."""
    return f"""
    SELECT r.stream_key FROM {rows} r
    GROUP BY r.stream_key
    HAVING min(r.ts) <= (SELECT max(c.ts) FROM calls c
                         WHERE c.format = $fmt AND c.stream_key = r.stream_key)"""


def renumber_streams(
    con: duckdb.DuckDBPyConnection, fmt: str, streams_table: str, gap_s: int
) -> None:
    """Renumber seq and sessions of whole streams (those listed in ``streams_table``)."""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE lf_renumber AS
        WITH c AS (
            SELECT call_id, stream_key, ts,
                   row_number() OVER (PARTITION BY stream_key ORDER BY ts, native_id) AS seq,
                   lag(ts) OVER (PARTITION BY stream_key ORDER BY ts, native_id) AS prev_ts
            FROM calls
            WHERE format = $fmt AND stream_key IN (SELECT stream_key FROM {streams_table})
        ),
        n AS (
            SELECT *, sum(CASE WHEN prev_ts IS NULL OR ts - prev_ts > to_seconds($gap)
                               THEN 1 ELSE 0 END)
                      OVER (PARTITION BY stream_key ORDER BY seq ROWS UNBOUNDED PRECEDING)
                      AS session_no
            FROM c
        )
        SELECT call_id, seq,
               {session_id_sql("stream_key", "min(ts) OVER (PARTITION BY stream_key, session_no)")}
                   AS session_id
        FROM n""",
        {"fmt": fmt, "gap": gap_s},
    )
    con.execute(
        """UPDATE calls SET seq = r.seq, session_id = r.session_id
           FROM lf_renumber r
           WHERE calls.call_id = r.call_id AND calls.format = $fmt
             AND (calls.seq IS DISTINCT FROM r.seq
                  OR calls.session_id IS DISTINCT FROM r.session_id)""",
        {"fmt": fmt},
    )
    con.execute("DROP TABLE lf_renumber")
