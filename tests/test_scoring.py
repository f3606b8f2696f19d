"""The backtest's scores, each checked against a hand calculation on a few calls."""

from __future__ import annotations

from typing import Any

import pytest

from analyzer.engine.store import open_store
from analyzer.guards.backtest import backtest
from analyzer.guards.policy import parse_policy
from analyzer.guards.scoring import Result
from tests.helpers import insert, load_guard_case


def run(policy: dict[str, Any], given: dict[str, Any]) -> Result:
    raw = dict(policy)
    p = parse_policy(raw.pop("name", "p"), raw, "test")
    with open_store(":memory:") as store:
        load_guard_case(store, given)
        [r] = backtest(store, [p])
    return r


STALLS = {"type": "counter", "count": "stalled", "stop": 2}


def two_turns() -> dict[str, Any]:
    """Turn a: two stalls then three text replies; turn b (same session): a loop of four
    stalls, the incident. $1 a call."""
    return {
        "calls": [
            {"pattern": "S S X X X", "cost_usd": 1.0, "turn_id": "a"},
            {"pattern": "S S S S", "cost_usd": 1.0, "turn_id": "b"},
        ],
        "incidents": [
            {
                "incident_id": "loop",
                "detector": "d",
                "first_call_id": "c6",
                "last_call_id": "c9",
                "waste": "thinking_only",
            }
        ],
    }


def test_reach_is_its_own_setting() -> None:
    """A session-long counter trips at c2 in turn a. Reaching only the turn, the stop ends
    turn a (killing c3-c5, $3 of legitimate work) and turn b runs: the counter, not reset,
    stops it at its first stall (c6), preventing c7-c9 ($3). Reaching the session, the same
    stop at c2 ends everything: c6-c9 ($4) prevented, c3-c5 killed."""
    turn = run({**STALLS, "scope": "session", "reach": "turn"}, two_turns())
    assert [t.call_id for t in turn.trips] == ["c2", "c6"]
    assert (turn.waste_prevented_usd, turn.false_trips, turn.usd_false_trips) == (3.0, 1, 3.0)
    assert (turn.harm_usd, turn.net_usd) == (3.0, 0.0)
    session = run({**STALLS, "scope": "session", "reach": "session"}, two_turns())
    assert [t.call_id for t in session.trips] == ["c2"]
    assert (session.waste_prevented_usd, session.false_trips) == (4.0, 0)
    # The stop prevented waste, so it is no false trip: what it killed in turn a is work killed.
    assert (session.usd_work_killed, session.harm_usd, session.net_usd) == (3.0, 3.0, 1.0)
    assert session.stopped[0]["latency_events"] == 0  # stopped before the incident began


def test_prevented_only_inside_what_the_stop_ends() -> None:
    """A turn-scoped counter in turn a at c2 ends turn a only: the loop in turn b is not
    prevented by it (and turn b's own count stops it at c7)."""
    r = run({**STALLS, "scope": "turn"}, two_turns())
    assert [t.call_id for t in r.trips] == ["c2", "c7"]
    assert r.waste_prevented_usd == 2.0  # c8, c9: after the stop at c7, in turn b


def test_false_trip_cost_includes_the_lost_output() -> None:
    """No incident; a failing guard (on_trip = fail) trips at c2: it kills c3 ($2) and throws
    away c2's own output ($3). Ending instead of failing, only c3 is harm."""
    given = {
        "calls": [
            {"response_kind": "thinking_only", "cost_usd": 1.0},
            {"response_kind": "thinking_only", "cost_usd": 3.0},
            {"response_kind": "text", "cost_usd": 2.0},
        ]
    }
    failing = run({**STALLS, "scope": "stream", "on_trip": "fail"}, given)
    assert (failing.false_trips, failing.usd_false_trips, failing.usd_lost_output) == (1, 5.0, 3.0)
    ending = run({**STALLS, "scope": "stream"}, given)
    assert (ending.usd_false_trips, ending.usd_lost_output, ending.harm_usd) == (2.0, 0.0, 2.0)


def test_productive_calls_killed_beside_an_incident_are_harm() -> None:
    """A stop at c2 inside a unit that holds an incident (c2-c3) also kills the text answers
    c4, c5 ($2): work killed, reported, and taken from the net."""
    given = {
        "calls": [{"pattern": "S S S X X", "cost_usd": 1.0}],
        "incidents": [
            {
                "incident_id": "i",
                "detector": "d",
                "first_call_id": "c2",
                "last_call_id": "c3",
                "waste": ["c2", "c3"],
            }
        ],
    }
    r = run({**STALLS, "scope": "stream"}, given)
    assert (r.waste_prevented_usd, r.usd_work_killed, r.false_trips, r.net_usd) == (
        1.0,
        2.0,
        0,
        -1.0,
    )


def test_blind_where_the_data_lacks_the_signal_not_on_a_format() -> None:
    """A bill knows each reply's kind (from its finish reason and token counts), so a stall
    counter sees its stalls (c1, c2: per session, a bill has no turns); it is blind only on
    the calls whose kind is unknown (c3, c4: no tokens either), whichever format they came in.
    A guard keyed on the kind with unknown as '?' trips on a run of them (c4): that trip is not
    scored (no false trip), and a unit it sees nowhere is left out of the healthy units."""
    bill = {"format": "openrouter_csv", "stream_key": "k|app|u|m", "cost_usd": 1.0}
    known = {**bill, "session_id": "a", "response_kind": "empty", "output_tokens": 0}
    unknown = {**bill, "session_id": "dark"}  # no reply kind, no tokens
    log = {"stream_key": "log", "turn_id": "t", "cost_usd": 1.0, "response_kind": "text"}
    given = {"calls": [known, known, unknown, unknown, log]}
    r = run({**STALLS, "scope": "turn"}, given)
    assert (r.blind_calls, r.calls_total, r.trips_blind, r.false_trips) == (2, 5, 0, 1)
    assert [t.call_id for t in r.trips] == ["c2"]  # the bill's second stall: seen, scored
    assert r.healthy_units == 2  # session a of the bill and the log's turn; not "dark"
    assert r.per_session_calls == 4 and r.per_session and "per session" in r.per_session
    runs = run(
        {"type": "run_length", "key": "coalesce(response_kind, '?')", "stop": 2, "scope": "turn"},
        given,
    )
    assert (runs.blind_calls, runs.trips_blind, runs.false_trips) == (2, 1, 1)
    assert [t.call_id for t in runs.trips] == ["c2"]  # c4's trip, blind, is not listed
    # A policy on what every call here shows (its cost) is blind nowhere, and counts per
    # session where it lives in sessions: nothing to say.
    seen = run({"type": "counter", "count": "cost_usd > 0", "stop": 2, "scope": "session"}, given)
    assert (seen.blind_calls, seen.per_session_calls, seen.per_session) == (0, 0, None)


def test_incidents_of_one_event_count_once() -> None:
    """Two detectors found the same empty stream (they share c2): one event, its waste once."""
    given = {
        "calls": [{"pattern": "T E E E E", "cost_usd": 1.0}],
        "incidents": [
            {
                "incident_id": "a",
                "detector": "d1",
                "first_call_id": "c2",
                "last_call_id": "c5",
                "waste": ["c2", "c3", "c4", "c5"],
            },
            {
                "incident_id": "b",
                "detector": "d2",
                "first_call_id": "c2",
                "last_call_id": "c3",
                "waste": ["c2", "c3"],
            },
        ],
    }
    r = run(
        {"type": "counter", "count": "response_kind = 'empty'", "stop": 2, "scope": "stream"}, given
    )
    assert (r.incidents_total, r.incidents_stopped, r.waste_total_usd) == (1, 1, 4.0)
    assert r.waste_prevented_usd == 2.0  # c4, c5: counted once, though both incidents hold them


def test_latency_is_counted_in_the_guards_own_events_seconds_and_dollars() -> None:
    """Stalls alternate with tool calls (T S T S ...). A counter of stalls trips at its 3rd
    stall (c6): 3 of its own events into the incident - not the 6 calls - 50 s after the
    incident's first call (calls are 10 s apart), with $3 of its waste spent."""
    given = {
        "calls": [{"pattern": "T S", "times": 5, "cost_usd": 1.0, "turn_id": "t"}],
        "incidents": [
            {
                "incident_id": "i",
                "detector": "d",
                "first_call_id": "c1",
                "last_call_id": "c10",
                "waste": "thinking_only",
            }
        ],
    }
    r = run({"type": "counter", "count": "stalled", "stop": 3, "scope": "turn"}, given)
    [s] = r.stopped
    assert (s["latency_events"], s["latency_seconds"], s["latency_usd"]) == (3, 50.0, 3.0)
    assert s["waste_prevented_usd"] == 2.0  # the stalls at c8 and c10


def test_a_stop_in_the_parent_prevents_the_sub_agent_runs_it_never_starts() -> None:
    """The parent session trips at c2 (t = 10 s); its sub-agent ran later (t = 30-40 s) and
    looped: with the session ended, that run never starts - its waste is prevented (at
    latency 0) and its calls saved."""
    given = {
        "calls": [
            {"pattern": "S S X", "cost_usd": 1.0, "session_id": "p", "stream_key": "p"},
            {
                "response_kind": "empty",
                "cost_usd": 2.0,
                "session_id": "p:agent-1",
                "stream_key": "p:agent-1",
                "parent_session_id": "p",
                "t": 30,
            },
            {
                "response_kind": "empty",
                "cost_usd": 2.0,
                "session_id": "p:agent-1",
                "stream_key": "p:agent-1",
                "parent_session_id": "p",
                "t": 40,
            },
        ],
        "incidents": [
            {
                "incident_id": "i",
                "detector": "d",
                "first_call_id": "c4",
                "last_call_id": "c5",
                "waste": ["c4", "c5"],
            }
        ],
    }
    r = run({**STALLS, "scope": "session"}, given)
    assert [t.call_id for t in r.trips] == ["c2"]
    assert (r.waste_prevented_usd, r.calls_saved, r.usd_saved) == (4.0, 3, 5.0)
    assert r.stopped[0]["latency_events"] == 0


def test_headroom_is_the_highest_value_on_healthy_work() -> None:
    """Two healthy turns reach 1 and 2 stalls; the guard at 3 never trips: headroom 2."""
    given = {"calls": [{"pattern": "S X", "turn_id": "a"}, {"pattern": "S S X", "turn_id": "b"}]}
    r = run({"type": "counter", "count": "stalled", "stop": 3, "scope": "turn"}, given)
    assert (r.headroom, r.trips, r.false_trips) == (2.0, [], 0)


def test_a_second_sweep_of_one_policy_is_refused(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from analyzer.cli.main import cli

    db = tmp_path / "s.duckdb"
    with open_store(db) as store:
        insert(store, "meta", [])
    result = CliRunner().invoke(
        cli,
        [
            "backtest",
            "--db",
            str(db),
            "--sweep",
            "session_cost_cap.stop=1..3",
            "--sweep",
            "session_cost_cap.stop=4..6",
        ],
    )
    assert result.exit_code == 2
    assert "session_cost_cap is swept twice" in result.output


@pytest.mark.parametrize(
    ("compare", "stop_at"), [(">=", "c5"), (">", "c6")], ids=["reaches", "passes"]
)
def test_compare_reaches_or_passes(compare: str, stop_at: str) -> None:
    given = {"calls": [{"pattern": "X", "times": 8, "cost_usd": 1.0}]}
    r = run({"type": "budget", "stop": 5.0, "compare": compare, "scope": "stream"}, given)
    assert [t.call_id for t in r.trips] == [stop_at]


def test_an_unjudgeable_last_call_neither_counts_nor_resets() -> None:
    """Bills show a `length` finish, not the cut tool call: it is inferred from the next call's
    prompt (it did not grow: the output was thrown away). c4's next call comes 10 minutes later,
    too late to judge by: unknown, so it must not reset the fixed breaker's count - which
    reaches 5 at c6 (c1-c3, then c5, c6)."""
    row = {
        "format": "openrouter_csv",
        "finish_reason": "length",
        "response_kind": "text",
        "input_tokens": 20_000,
        "output_tokens": 4096,
        "cost_usd": 0.1,
    }
    calls = [dict(row, t=t) for t in (0, 20, 40, 60, 660, 680, 700, 720)]
    r = run(
        {
            "type": "counter",
            "count": "truncated",
            "reset": "truncated = false AND NOT (finish_reason = 'length' AND tool_call)",
            "stop": 5,
            "scope": "session",
        },
        {"calls": calls},
    )
    assert [t.call_id for t in r.trips] == ["c6"]
