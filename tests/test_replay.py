"""The replay carries only the columns its policies read; a policy reading more widens it."""

from __future__ import annotations

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
