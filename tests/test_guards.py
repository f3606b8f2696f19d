"""Guard primitives, table-driven; the sweep against a call-by-call replay; TOML policies."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.errors import ForensicsError
from analyzer.guards.backtest import backtest
from analyzer.guards.policy import Policy, all_policies, load_policies, parse_policy
from analyzer.guards.replay import Replay
from tests.helpers import fill_calls, fill_messages, insert


def policy(**raw: Any) -> Policy:
    raw.setdefault("scope", "stream")
    return parse_policy(raw.pop("name", "p"), raw, "test")


def make_store(calls: list[dict[str, Any]]) -> Store:
    """A store of ``calls`` (rows of ``calls``), with a tool call for each ``tool`` (arguments
    hashed "h", no result) and for each of its ``acts``: (tool, arguments, what its result
    means or None for no result, whether the result was an error)."""
    store = open_store(":memory:")
    rows = fill_calls([{k: v for k, v in c.items() if k not in ("tool", "acts")} for c in calls])
    insert(store, "calls", rows)
    messages: list[dict[str, Any]] = []

    def add(**row: Any) -> None:
        messages.append({"idx": len(messages), **row})

    for c, r in zip(calls, rows, strict=True):
        ids = {"session_id": r["session_id"], "call_id": r["call_id"]}
        if c.get("tool"):
            add(**ids, role="assistant", kind="tool_call", tool_name=c["tool"], tool_args_hash="h")
        for j, (tool, args, got, err) in enumerate(c.get("acts") or ()):
            use = f"{r['call_id']}-{j}"
            add(
                **ids,
                role="assistant",
                kind="tool_call",
                tool_name=tool,
                tool_args_hash=args,
                tool_use_id=use,
            )
            if got is not None:
                add(
                    session_id=r["session_id"],
                    role="tool",
                    kind="tool_result",
                    tool_use_id=use,
                    tool_result_hash=got,
                    is_error=err,
                )
    insert(store, "messages", fill_messages(messages))
    return store


def trips(calls: list[dict[str, Any]], p: Policy) -> tuple[list[str], list[str]]:
    with make_store(calls) as store:
        [r] = backtest(store, [p])
    return [t.call_id for t in r.trips], [t.call_id for t in r.nudges]


def kinds(*ks: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"response_kind": k, **extra} for k in ks]


T, S, X = "tool_call", "thinking_only", "text"

# (name, policy, calls, stops, nudges)
CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[str], list[str]]] = [
    (
        "counter increments to its stop",
        {"type": "counter", "count": "stalled", "stop": 3},
        kinds(S, S, X, S, X),
        ["c4"],
        [],
    ),
    (
        "counter reset by a reset event never reaches it",
        {"type": "counter", "count": "stalled", "reset": "tool_call", "stop": 3},
        kinds(S, S, T, S, S, T, S, S),
        [],
        [],
    ),
    (
        "counter without the reset does",
        {"type": "counter", "count": "stalled", "stop": 3},
        kinds(S, S, T, S, S, T, S, S),
        ["c4"],
        [],
    ),
    (
        "ladder: nudge, then stop",
        {"type": "counter", "count": "stalled", "nudge": 2, "stop": 4},
        kinds(S, S, S, S, S),
        ["c4"],
        ["c2"],
    ),
    (
        "a reset lets the nudge fire again",
        {"type": "counter", "count": "stalled", "reset": "tool_call", "nudge": 2, "stop": 9},
        kinds(S, S, T, S, S),
        [],
        ["c2", "c5"],
    ),
    (
        "scope: a new session starts the counter afresh",
        {"type": "counter", "count": "stalled", "stop": 3, "scope": "session"},
        [*kinds(S, S, session_id="a"), *kinds(S, S, session_id="b")],
        [],
        [],
    ),
    (
        "scope: stream counts across sessions",
        {"type": "counter", "count": "stalled", "stop": 3, "scope": "stream"},
        [*kinds(S, S, session_id="a"), *kinds(S, S, session_id="b")],
        ["c3"],
        [],
    ),
    (
        "scope: turn",
        {"type": "counter", "count": "stalled", "stop": 2, "scope": "turn"},
        [*kinds(S, turn_id="t1"), *kinds(S, S, turn_id="t2")],
        ["c3"],
        [],
    ),
    (
        "weight: tokens",
        {"type": "counter", "count": "true", "weight": "output_tokens", "stop": 100},
        [{"output_tokens": 40}, {"output_tokens": 50}, {"output_tokens": 20}],
        ["c3"],
        [],
    ),
    (
        "budget: dollars, never reset",
        {"type": "budget", "stop": 1.0},
        [{"cost_usd": 0.4}, {"cost_usd": 0.4}, {"cost_usd": 0.4}, {"cost_usd": 0.4}],
        ["c3"],
        [],
    ),
    (
        "watch: the guard is blind to unsaved replies",
        {"type": "counter", "count": "stalled", "stop": 2, "watch": "coalesce(reply_saved, true)"},
        [{"response_kind": S, "reply_saved": False}] * 3,
        [],
        [],
    ),
    (
        "run length over the prompt size",
        {"type": "run_length", "key": "input_tokens", "stop": 3},
        [{"input_tokens": n} for n in (10, 20, 20, 30, 30, 30, 30)],
        ["c6"],
        [],
    ),
    (
        "run length: a NULL key is no run",
        {"type": "run_length", "key": "input_tokens", "stop": 2},
        [{"input_tokens": None}, {"input_tokens": None}],
        [],
        [],
    ),
    (
        "run length over tool calls, other calls unseen",
        {"type": "run_length", "key": "tool_key", "watch": "tool_key IS NOT NULL", "stop": 3},
        [{"tool": "read"}, {"response_kind": X}, {"tool": "read"}, {"tool": "read"}],
        ["c4"],
        [],
    ),
    (
        "period 2: A-B-A-B-A-B",
        {
            "type": "period",
            "key": "tool_key",
            "watch": "tool_key IS NOT NULL",
            "period": 2,
            "stop": 3,
        },
        [{"tool": t} for t in "ababab"],
        ["c6"],
        [],
    ),
    (
        "period 2: two repeats only",
        {
            "type": "period",
            "key": "tool_key",
            "watch": "tool_key IS NOT NULL",
            "period": 2,
            "stop": 3,
        },
        [{"tool": t} for t in "ababc"],
        [],
        [],
    ),
    (
        "window of calls",
        {"type": "window", "count": "stalled", "size": 4, "stop": 3},
        kinds(S, X, X, S, X, S, S),
        ["c7"],
        [],
    ),
    (
        "window of seconds",
        {"type": "window", "count": "stalled", "seconds": 60, "stop": 3},
        [{"response_kind": S, "t": t} for t in (0, 50, 130, 150, 170)],
        ["c5"],
        [],
    ),
]


@pytest.mark.parametrize(
    ("name", "raw", "calls", "stops", "nudges"), CASES, ids=[c[0] for c in CASES]
)
def test_primitive(
    name: str, raw: dict[str, Any], calls: list[dict[str, Any]], stops: list[str], nudges: list[str]
) -> None:
    got_stops, got_nudges = trips(calls, policy(**raw))
    assert (got_stops, got_nudges) == (stops, nudges)


def test_a_stop_ends_its_unit_and_saves_the_rest() -> None:
    calls = [
        {"response_kind": S, "cost_usd": 1.0},
        {"response_kind": S, "cost_usd": 1.0},  # stop here
        {"response_kind": X, "cost_usd": 2.0},  # saved
        {"response_kind": X, "cost_usd": 3.0},  # saved
        {"response_kind": S, "cost_usd": 1.0, "stream_key": "other"},  # another stream
    ]
    with make_store(calls) as store:
        [r] = backtest(store, [policy(type="counter", count="stalled", stop=2)])
    assert (r.calls_saved, r.usd_saved) == (2, 5.0)
    # No incident anywhere: the stop is a false trip, and what it saved was legitimate work.
    assert (r.false_trips, r.usd_false_trips, r.incidents_total) == (1, 5.0, 0)


def test_incident_scoring_latency_and_prevention() -> None:
    calls = [{"response_kind": X, "cost_usd": 1.0}] + [
        {"response_kind": S, "cost_usd": 0.5} for _ in range(6)
    ]
    with make_store(calls) as store:
        store.con.execute(
            """INSERT INTO incidents (incident_id, detector, severity, stream_key, first_call_id,
                                      last_call_id, wasted_usd)
               VALUES ('i1', 'd', 'high', 's', 'c2', 'c7', 3.0)"""
        )
        store.con.executemany(
            "INSERT INTO incident_calls VALUES ('i1', ?)", [[f"c{i}"] for i in range(2, 8)]
        )
        results = {
            r.params["stop"]: r
            for r in backtest(
                store, [policy(type="counter", count="stalled", stop=2)], {"p": ("stop", [2, 6, 7])}
            )
        }
    two, six, seven = results[2], results[6], results[7]
    # c2 (t=10 s) and c3 (t=20 s) are the guard's two events; c4-c7 are prevented.
    assert two.stopped == [
        {
            "incident_id": "i1",
            "event_id": "i1",
            "latency_events": 2,
            "latency_seconds": 10.0,
            "latency_usd": 1.0,
            "waste_prevented_usd": 2.0,
        }
    ]
    assert (two.false_trips, two.waste_prevented_usd, two.median_latency_events) == (0, 2.0, 2)
    assert (two.waste_total_usd, two.waste_missed_usd, two.net_usd) == (3.0, 1.0, 2.0)
    # Tripping at its last call prevents nothing: not stopped (and not a false trip either).
    assert six.incidents_stopped == 0 and six.stopped == [] and len(six.trips) == 1
    assert (six.false_trips, six.harm_usd) == (0, 0.0)
    assert seven.incidents_stopped == 0 and seven.trips == []


# -- the sweep equals separate replays, and a call-by-call reference ----------------------


def reference(events: list[dict[str, Any]], p: Policy) -> tuple[list[str], list[str]]:
    """What a guard running online would do: one call at a time, per unit."""
    unit_of = {"stream": "stream_key", "session": "session_id", "turn": "turn_id"}[p.scope]
    order = sorted(events, key=lambda e: (e["stream_key"], e["pos"]))
    # A unit is a run of consecutive calls of one stream sharing the session (or turn).
    units: dict[Any, list[dict[str, Any]]] = {}
    n, last = 0, None
    for e in order:
        ident = (e["stream_key"], e[unit_of] or e["session_id"] or e["stream_key"])
        if ident != last:
            n, last = n + 1, ident
        units.setdefault((e["stream_key"], n), []).append(e)
    pred = {
        "stalled": lambda e: e["stalled"],
        "tool_call": lambda e: e["tool_call"],
        "true": lambda e: True,
        "tool_key IS NOT NULL": lambda e: e["tool_key"] is not None,
    }
    stops: list[tuple[Any, str]] = []
    nudges: list[tuple[Any, str]] = []
    for _u, evs in sorted(units.items()):
        value = 0.0
        keys: list[Any] = []
        hits: deque[bool] = deque()
        island = 0
        for e in evs:
            if p.watch and not pred[p.watch](e):
                continue
            before = value
            if p.type in ("counter", "budget"):
                if p.reset and pred[p.reset](e):
                    value = 0
                elif pred[p.count or "true"](e):
                    value += float(e["cost_usd"] or 0) if p.weight == "cost_usd" else 1
            elif p.type == "run_length":
                k = e[p.key or ""]
                keys.append(k)
                run = 0
                if k is not None:
                    run = 1
                    while run < len(keys) and keys[-1 - run] == k:
                        run += 1
                value = run
            elif p.type == "period":
                k = e[p.key or ""]
                keys.append(k)
                hit = k is not None and len(keys) > p.period and keys[-1 - p.period] == k
                island = island + 1 if hit else 0
                value = (island + p.period) // p.period if hit else 0
            elif p.type == "window":
                hits.append(pred[p.count or "true"](e))
                if len(hits) > (p.size or 0):
                    hits.popleft()
                value = sum(hits)
            if p.nudge is not None and value >= p.nudge > before and value < p.stop:
                nudges.append((e["pos"], e["call_id"]))
            if value >= p.stop:
                stops.append((e["pos"], e["call_id"]))
                break
    return sorted(c for _, c in stops), sorted(c for _, c in nudges)


KINDS = ["tool_call", "thinking_only", "text", "empty", None]
call_st = st.fixed_dictionaries(
    {
        "response_kind": st.sampled_from(KINDS),
        "input_tokens": st.sampled_from([100, 200, None]),
        "cost_usd": st.sampled_from([0.5, 1.0, 2.0]),
        "stream_key": st.sampled_from(["s1", "s2"]),
        "session_id": st.sampled_from(["a", "b"]),
        "turn_id": st.sampled_from(["t1", "t2", None]),
        "tool": st.sampled_from([None, "read", "edit"]),
    }
)
policy_st = st.one_of(
    st.builds(
        dict,
        type=st.just("counter"),
        count=st.sampled_from(["stalled", "tool_call"]),
        reset=st.sampled_from([None, "tool_call", "stalled"]),
        scope=st.sampled_from(["stream", "session", "turn"]),
    ),
    st.builds(dict, type=st.just("budget"), scope=st.sampled_from(["stream", "session"])),
    st.builds(
        dict,
        type=st.just("run_length"),
        key=st.sampled_from(["input_tokens", "tool_key"]),
        watch=st.sampled_from([None, "tool_key IS NOT NULL"]),
        scope=st.sampled_from(["stream", "turn"]),
    ),
    st.builds(
        dict,
        type=st.just("period"),
        key=st.just("tool_key"),
        period=st.sampled_from([2, 3]),
        watch=st.sampled_from([None, "tool_key IS NOT NULL"]),
    ),
    st.builds(
        dict,
        type=st.just("window"),
        count=st.sampled_from(["stalled", "tool_call"]),
        size=st.sampled_from([2, 3, 5]),
    ),
)


# a property search: CI runs it; the default run has the guard golden cases (test_guard_cases)
@pytest.mark.slow
@settings(
    max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(calls=st.lists(call_st, min_size=1, max_size=25), raw=policy_st)
def test_sweep_equals_separate_replays(calls: list[dict[str, Any]], raw: dict[str, Any]) -> None:
    raw = {k: v for k, v in raw.items() if v is not None}
    thresholds = [1.0, 2.0, 3.0, 4.0] if raw["type"] != "budget" else [0.5, 1.5, 3.0, 4.5]
    p = policy(**raw, stop=thresholds[-1])
    with make_store(calls) as store:
        replay = Replay(store)
        swept = replay.run(p, ("stop", thresholds))
        events = _events(store)
        for t, result in zip(thresholds, swept, strict=True):
            single = replay.run(p.with_param("stop", t))[0]
            assert [x.call_id for x in result.trips] == [x.call_id for x in single.trips]
            assert (result.calls_saved, result.usd_saved) == (single.calls_saved, single.usd_saved)
            ref_stops, _ = reference(events, p.with_param("stop", t))
            assert sorted(x.call_id for x in result.trips) == ref_stops


# a property search: CI runs it; the default run has test_ladder_nudges_match_the_reference's
# golden cases (test_guard_cases)
@pytest.mark.slow
@settings(
    max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    calls=st.lists(call_st, min_size=1, max_size=25),
    raw=st.one_of(
        st.builds(
            dict,
            type=st.just("counter"),
            count=st.sampled_from(["stalled", "tool_call"]),
            scope=st.sampled_from(["stream", "session"]),
            nudge=st.sampled_from([1, 2]),
        ),
        st.builds(
            dict,
            type=st.just("budget"),
            scope=st.sampled_from(["stream", "session", "day"]),
            nudge=st.sampled_from([0.5, 1.0, 2.0]),
        ),
    ),
)
def test_a_sweeps_nudges_are_each_variants_own(
    calls: list[dict[str, Any]], raw: dict[str, Any]
) -> None:
    """The nudges of every threshold of a sweep (found for all of them in one pass over one
    trace) are those of the same policy replayed alone at that threshold; thresholds at or
    below the nudge level nudge nowhere."""
    thresholds = [0.5, 1.5, 3.0, 4.5] if raw["type"] == "budget" else [1.0, 2.0, 3.0, 4.0]
    p = policy(**raw, stop=thresholds[-1])
    with make_store(calls) as store:
        replay = Replay(store)
        swept = replay.run(p, ("stop", thresholds))
        for t, result in zip(thresholds, swept, strict=True):
            single = replay.run(p.with_param("stop", t))[0]
            assert [(x.call_id, x.action) for x in result.nudges] == [
                (x.call_id, x.action) for x in single.nudges
            ]
            if t <= raw["nudge"]:
                assert result.nudges == []


def _events(store: Store) -> list[dict[str, Any]]:
    cur = store.con.execute("SELECT * FROM lf_events")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


# a property search: CI runs it; the default run has the guard golden cases (test_guard_cases)
@pytest.mark.slow
@settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(calls=st.lists(call_st, min_size=1, max_size=25))
def test_ladder_nudges_match_the_reference(calls: list[dict[str, Any]]) -> None:
    p = policy(type="counter", count="stalled", reset="tool_call", nudge=2, stop=3, scope="session")
    with make_store(calls) as store:
        [r] = backtest(store, [p])
        Replay(store)  # every column, for the reference
        ref_stops, ref_nudges = reference(_events(store), p)
    assert sorted(t.call_id for t in r.trips) == ref_stops
    assert sorted(t.call_id for t in r.nudges) == ref_nudges


# -- policies as configuration ---------------------------------------------------------------


def test_the_presets_are_the_public_names() -> None:
    names = [p.name for p in all_policies()]
    assert names == [
        "penguin_consecutive_trivial",
        "penguin_consecutive_trivial_placeholder",
        "penguin_token_trivial",
        "penguin_stale_context",
        "penguin_no_action_completion",
        "session_cost_cap",
        "netclaw_reset_on_tool",
        "netclaw_pre_tool_empty",
        "netclaw_cumulative_per_turn",
        "netclaw_max_tool_iterations",
        "nexus3_consecutive_empty",
        "maxtokens_session",
        "maxtokens_truncated_tools",
        "gemini_repeat_tool",
        "openhands_alternation",
        "opencode_doom_loop",
        "mini_swe_agent_format_errors",
        "swe_agent_requeries",
        "openhands_action_error",
        "openhands_action_observation",
        "cline_mistakes",
        "no_progress",
        "daily_cost_cap",
        "window_cost_cap",
        "monthly_cost_cap",
    ]


MY_POLICY = """
[policy.two_stalls_per_turn]
description = "Stop a turn at its second thinking-only or empty reply."
type = "counter"
scope = "turn"
count = "stalled"
stop = 2
"""


def test_a_users_toml_policy_end_to_end(tmp_path: Path, ingested_sample_db: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text(MY_POLICY)
    db = ingested_sample_db
    runner = CliRunner()
    assert runner.invoke(cli, ["detect", "--db", str(db)]).exit_code == 0
    listed = runner.invoke(cli, ["policies", "--policies", str(f), "--json"])
    mine = [p for p in json.loads(listed.stdout) if p["name"] == "two_stalls_per_turn"]
    assert mine and mine[0]["source"] == str(f) and mine[0]["params"]["stop"] == 2
    result = runner.invoke(
        cli,
        [
            "backtest",
            "--db",
            str(db),
            "--policies",
            str(f),
            "--only",
            "two_stalls_per_turn",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    [r] = json.loads(result.stdout)
    assert r["policy"] == "two_stalls_per_turn"
    stopped = {s["incident_id"].split(":")[0] for s in r["stopped"]}
    assert "alternating_tool_thinking" in stopped
    # The result carries its policy's description: the report shows a user's policy with its
    # own words (it used to look descriptions up among the built-in presets only).
    assert r["description"] == "Stop a turn at its second thinking-only or empty reply."
    page = tmp_path / "r.html"
    written = runner.invoke(cli, ["report", "--db", str(db), "--policies", str(f), "-o", str(page)])
    assert written.exit_code == 0, written.output
    assert "Stop a turn at its second thinking-only or empty reply." in page.read_text()


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[policy.x]\ntype = 'counter'\nstop = 3\n", "a counter needs 'count'"),
        ("[policy.x]\ntype = 'spiral'\nstop = 3\n", "type must be one of"),
        ("[policy.x]\ntype = 'budget'\n", "positive 'stop'"),
        ("[policy.x]\ntype = 'budget'\nstop = 5\nnudge = 9\n", "'nudge' must be a number below"),
        ("[policy.x]\ntype = 'budget'\nstop = 5\ncolour = 'red'\n", "unknown settings colour"),
        ("[policy.X-1]\ntype = 'budget'\nstop = 5\n", "lower case"),
        ("[policy.x]\ntype = 'window'\ncount = 'stalled'\nstop = 3\n", "one of 'size'"),
        ("not toml [", "not valid TOML"),
        (
            "[policy.my_guard]\ntype = 'counter'\ncount = 'stalld'\nstop = 3\n",
            'bad.toml: policy my_guard: unknown column "stalld" in count (columns: call_id, ',
        ),
        (
            "[policy.x]\ntype = 'run_length'\nkey = 'tool_key +'\nstop = 3\n",
            "key is not an SQL expression over one call",
        ),
        ("[other]\n", "no [policy.<name>] table"),
    ],
)
def test_bad_policy_files_say_what_is_wrong(tmp_path: Path, toml: str, message: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(toml)
    with pytest.raises(ForensicsError) as exc:
        load_policies(f)
    assert message in str(exc.value)


def test_labels_override_the_ground_truth(tmp_path: Path) -> None:
    calls = kinds(S, S, S, X, X, X, cost_usd=1.0)
    labels = tmp_path / "labels.csv"
    labels.write_text("id,label\nc5,runaway\nc6,runaway\n")
    with make_store(calls) as store:
        [r] = backtest(store, [policy(type="counter", count="stalled", stop=2)], labels=labels)
    # The stop at c2 lands before the labelled runaway calls: it prevents them ($1 each), before
    # they started (latency 0); c3 and c4 were legitimate work it killed.
    assert r.incidents_total == 1
    assert r.stopped == [
        {
            "incident_id": "label:s",
            "event_id": "label:s",
            "latency_events": 0,
            "latency_seconds": 0.0,
            "latency_usd": 0.0,
            "waste_prevented_usd": 2.0,
        }
    ]
    assert (r.usd_work_killed, r.harm_usd, r.net_usd) == (2.0, 2.0, 0.0)


def test_the_replay_has_exactly_the_columns_a_policy_may_use() -> None:
    """The columns policies are checked against are the replay's own (one definition)."""
    from analyzer.guards.primitives import EVENT_COLUMNS

    with make_store(kinds(S, X)) as store:
        Replay(store)
        got = {r[0]: r[1] for r in store.con.execute("DESCRIBE lf_events").fetchall()}
    assert {c: got[c] for c in EVENT_COLUMNS} == EVENT_COLUMNS
    # The replay's own: the units, the session's number, the parent session, the running
    # dollars of the stream order.
    assert set(got) - set(EVENT_COLUMNS) == {
        "u_stream",
        "u_session",
        "u_turn",
        "sid",
        "parent_session_id",
        "usd_through",
    }
