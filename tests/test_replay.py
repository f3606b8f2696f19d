"""The replay carries only the columns its policies read; a policy reading more widens it.
Its periods (guards/periods.sql): days, windows, months and the time order across streams."""

from __future__ import annotations

from typing import Any

import pytest

from analyzer.guards.primitives import EVENT_COLUMNS
from analyzer.guards.replay import Replay, columns_of
from tests.test_guards import S, X, kinds, make_store, policy


def test_the_replay_carries_the_columns_its_policies_name() -> None:
    narrow = policy(type="counter", count="stalled AND response_kind <> 'model'", stop=2)
    wide = policy(type="counter", count="model = 'b' AND http_status = 200", stop=2)
    assert "model" not in columns_of([narrow])  # a name in a quoted string is no column
    assert {"model", "http_status"} <= columns_of([wide])
    assert columns_of(None) == frozenset(EVENT_COLUMNS)
    with make_store(kinds(S, X)) as store:
        Replay(store, policies=[narrow])
        got = {r[0] for r in store.con.execute("DESCRIBE lf_events").fetchall()}
    assert "stalled" in got and "model" not in got


def test_a_policy_reading_more_columns_widens_the_replay() -> None:
    calls = [
        {"response_kind": k, "model": m}
        for k, m in [(S, "a"), (X, "b"), (S, "b"), (X, "a"), (X, "b"), (S, "b")]
    ]
    narrow = policy(type="counter", count="stalled", stop=2)
    wide = policy(type="counter", count="model = 'b'", stop=3)
    with make_store(calls) as store:
        replay = Replay(store, policies=[narrow])
        [r_narrow] = replay.run(narrow)
        [r_wide] = replay.run(wide)
        [again] = replay.run(narrow)
    with make_store(calls) as store:
        full = Replay(store)
        [f_narrow] = full.run(narrow)
        [f_wide] = full.run(wide)
    assert [t.call_id for t in r_wide.trips] == [t.call_id for t in f_wide.trips] == ["c5"]
    assert [t.call_id for t in r_narrow.trips] == [t.call_id for t in f_narrow.trips] == ["c3"]
    assert [t.call_id for t in again.trips] == ["c3"]
    assert (r_wide.calls_saved, r_wide.headroom) == (f_wide.calls_saved, f_wide.headroom)


def test_a_policy_naming_the_stream_reads_its_key() -> None:
    """The sort carries a stream's number; a policy naming ``stream_key`` reads the key back
    (and streams are replayed in the order of their keys, whatever order they came in)."""
    calls = [
        {"response_kind": S, "stream_key": k, "session_id": k}
        for k in ["zeta", "alpha", "Beta", "zeta", "alpha", "zeta"]
    ]
    p = policy(type="counter", count="stream_key = 'zeta' OR stream_key = 'Beta'", stop=2)
    with make_store(calls) as store:
        [r] = Replay(store, policies=[p]).run(p)
        keys = [k for (k,) in store.con.execute("SELECT stream_key FROM lf_events").fetchall()]
    assert keys == ["Beta", "alpha", "alpha", "zeta", "zeta", "zeta"]
    assert [(t.stream_key, t.call_id) for t in r.trips] == [("zeta", "c4")]


def test_a_call_without_a_session_is_in_the_session_named_as_its_stream() -> None:
    """A session is its id, or the stream's key where there is none: a call with no session
    beside one whose session is named as the stream's key is in that same session (as are the
    turns: turn, else session, else the stream's key)."""
    sessions = ["k", None, None, "x", None, "k"]
    calls = [
        {"response_kind": S, "stream_key": "k", "session_id": s, "turn_id": None} for s in sessions
    ]
    p = policy(type="counter", count="stalled", scope="session", stop=3)
    with make_store(calls) as store:
        [r] = Replay(store, policies=[p]).run(p)
        units = store.con.execute(
            "SELECT count(DISTINCT u_session), count(DISTINCT u_turn) FROM lf_events"
        ).fetchall()
    assert units == [(3, 3)]  # k k k | x | k k
    assert [t.call_id for t in r.trips] == ["c3"]


# -- the periods: time order worked out on narrow rows, read back beside the events --------


def _periods(events: list[tuple[int, int, str | None, float]]) -> list[tuple[Any, ...]]:
    """guards/periods.sql over ``events`` (stream, position, time, dollars) as lf_events in
    the order given: each row's (stream, position, day, window, month, tpos, tusd)."""
    from analyzer.engine.engine import Engine
    from analyzer.guards.primitives import unit_sql

    engine = Engine.scratch()
    engine.run("ATTACH ':memory:' AS lf_mem")
    engine.run(
        "CREATE TABLE lf_mem.lf_events (u_stream BIGINT, pos BIGINT, ts TIMESTAMP,"
        " cost_usd DECIMAL(18, 10))"
    )
    engine.many("INSERT INTO lf_mem.lf_events VALUES (?, ?, ?, ?)", events)
    engine.run(
        "guards/periods.sql", starts=unit_sql("guards/window_starts.sql", calls="lf_mem.lf_events")
    )
    return engine.rows(
        "SELECT u_stream, pos, u_day, u_window, u_month, tpos, tusd FROM lf_mem.lf_events"
    )


def test_periods_number_the_calls_in_time_order_across_streams() -> None:
    """tpos: a timed call's place by time across every stream (ties by stream and position),
    tusd: the dollars of every call up to it in that order (the untimed last); the events
    keep their own order."""
    rows = _periods(
        [
            (1, 1, "2025-01-01 10:00:00", 1.0),
            (1, 2, "2025-01-01 16:30:00", 2.0),
            (1, 3, None, 4.0),
            (2, 1, "2025-01-01 09:00:00", 8.0),
            (2, 2, "2025-01-01 10:00:00", 16.0),
        ]
    )
    day, month = 20089, 2025 * 12
    assert [(r[0], r[1]) for r in rows] == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2)]
    assert [(r[2], r[4]) for r in rows] == [(day, month)] * 2 + [(None, None)] + [(day, month)] * 2
    assert [r[5] for r in rows] == [2, 4, None, 1, 3]
    assert [float(r[6]) for r in rows] == [9.0, 27.0, 31.0, 8.0, 25.0]
    hour = 20089 * 24  # the windows: 09:00 (to 14:00), then 16:00
    assert [r[3] for r in rows] == [hour + 9, hour + 16, None, hour + 9, hour + 9]


def test_periods_refuse_events_out_of_their_order() -> None:
    """The time columns are read back beside the events row by row: events not in stream
    and position order would pair a call with another's times, and fail instead."""
    from analyzer.engine.engine import StatementFailed

    with pytest.raises(StatementFailed, match="out of step"):
        _periods([(2, 1, "2025-01-01 09:00:00", 1.0), (1, 1, "2025-01-01 10:00:00", 2.0)])
