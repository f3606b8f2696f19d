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

from analyzer.engine.engine import Engine, fill, unit_text


def with_sessions_sql(rows: str) -> str:
    """SELECT over relation ``rows`` (having stream_key, ts, native_id) adding seq, session_id.

    Parameters: ``$fmt`` (the format whose stored calls anchor each stream) and ``$gap``
    (seconds of silence that start a new session).
    """
    return fragment(
        "ingest/with_sessions.sql",
        rows=rows,
        session_id=session_id_sql("stream_key", "session_start"),
    )


def numbered_sql(rows: str, streams: str) -> str:
    """SELECT over ``rows`` (rid, line, sk, ts, native_id; ``sk`` an integer stream id that
    ``streams`` (sk, stream_key) names) giving rid, line, seq and the session as two parts:
    ``session_start`` (the session's first call's time, the id then being
    ``session_id_sql(stream_key, session_start)``) or, for rows that continue the stream's last
    stored session, ``session_given`` (that session's id) and a NULL start.

    The same numbering as ``with_sessions_sql``, sorted on an integer stream id instead of the
    stream key's text (at ten million rows, 3.8 s instead of 14 s). Parameters: ``$fmt``, ``$gap``.
    """
    return fragment("ingest/numbered.sql", rows=rows, streams=streams)


def session_id_sql(stream_key: str, session_start: str) -> str:
    """The id of the session of ``stream_key`` that started at ``session_start``."""
    return f"{stream_key} || '@' || strftime({session_start}, '%Y-%m-%dT%H:%M:%S.%f')"


def interleaved_streams_sql(rows: str) -> str:
    """Streams whose new rows do not all come after the stored calls (needs ``$fmt``)."""
    return fragment("ingest/interleaved_streams.sql", rows=rows)


def renumber_streams(engine: Engine, fmt: str, streams_table: str, gap_s: int) -> None:
    """Renumber seq and sessions of whole streams (those listed in ``streams_table``)."""
    session = session_id_sql("stream_key", "min(ts) OVER (PARTITION BY stream_key, session_no)")
    engine.run(
        "ingest/renumber_streams.sql",
        {"fmt": fmt, "gap": gap_s},
        streams=streams_table,
        session_id=session,
    )


def fragment(unit: str, **names: str) -> str:
    """The text of a fragment unit (a SELECT put into another statement), its slots filled."""
    return fill(unit_text(unit), names)
