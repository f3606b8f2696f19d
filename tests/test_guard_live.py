"""The live guard is the replay: fed the calls one at a time, a policy trips exactly where the
backtest's replay says (before its scoring), on generated histories, on every preset over
the sample data and over the real corpora of ../shared/samples."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from analyzer.engine.store import Store, open_store
from analyzer.errors import ForensicsError
from analyzer.guards.guard import Call, Guard
from analyzer.guards.policy import Policy, all_policies, parse_policy
from analyzer.guards.primitives import PERIODS
from analyzer.guards.replay import Replay
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from tests.guard_strategies import PERIOD_BUDGETS, STRATEGIES
from tests.helpers import REPO, shared_samples
from tests.test_guards import make_store

Trips = list[tuple[str, str]]


def replayed(store: Store, policies: list[Policy]) -> tuple[list[dict[str, Any]], dict[str, Trips]]:
    """The replay's calls, and each policy's trips as the backtest's replay computes them."""
    with Replay(store, None, None) as replay:
        return replay.events(), {p.name: replay.trips(p) for p in policies}


def live(p: Policy, events: list[dict[str, Any]], one_by_one: bool = True) -> Trips:
    """The trips of a live guard fed ``events`` (one call at a time, or all at once). A guard
    of a period is fed them as they happened: in time order (ties in the replay's)."""
    guard = Guard(p)
    if p.scope in PERIODS:
        events = sorted(events, key=lambda e: (e["ts"] is None, e["ts"] or datetime.min))
    calls = [Call.from_event(e) for e in events]
    if one_by_one:
        for call in calls:
            guard.feed(call)
    else:
        guard.feed_all(calls)
    guard.finish()
    return [(d.call_id, d.action) for d in guard.trips]


def same_trips(a: Trips, b: Trips) -> bool:
    return sorted(a) == sorted(b)


# -- generated histories -------------------------------------------------------------------

KINDS = ["text", "tool_call", "truncated_tool_call", "thinking_only", "empty", None]
# A step's tool calls (make_store's acts: tool, arguments, what the result means or None,
# whether it was an error), few, so that steps repeat, and errors come back from other actions.
ACTS = [
    ("read", "a", "ok1", False),
    ("read", "a", "e1", True),
    ("edit", "b", "e1", True),
    ("edit", "b", "e2", True),
    ("edit", "a", "ok2", False),
    ("read", "b", None, False),
]
call_st = st.fixed_dictionaries(
    {
        "response_kind": st.sampled_from(KINDS),
        "finish_reason": st.sampled_from(["stop", "length", "tool_calls", None]),
        "input_tokens": st.sampled_from([100, 200, 1000, None]),
        "output_tokens": st.sampled_from([1, 3, 600, None]),
        "content_chars": st.sampled_from([None, 0, 5, 40]),
        "visible_chars": st.sampled_from([None, 0, 5, 40]),
        "cost_usd": st.sampled_from([0.5, 1.0, 2.0, 0.1, None]),
        "stream_key": st.sampled_from(["s1", "s2"]),
        "session_id": st.sampled_from(["a", "b", "s1", None]),
        "turn_id": st.sampled_from(["t1", "t2", None]),
        "tool": st.sampled_from([None, "read", "edit"]),
        "acts": st.one_of(st.just([]), st.lists(st.sampled_from(ACTS), min_size=1, max_size=2)),
        # seconds after the call before it: the same instant, the next second, a while after
        "gap": st.sampled_from([0, 1, 30]),
    }
)
SCOPES = st.sampled_from(["stream", "session", "turn"])
REACH = st.sampled_from([None, "stream", "session", "turn"])
policy_st = st.one_of(*(kind for kinds in STRATEGIES.values() for kind in kinds))
common_st = st.fixed_dictionaries(
    {
        "scope": SCOPES,
        "reach": REACH,
        "watch": st.sampled_from(
            [None, "tool_key IS NOT NULL", "tools_before < 2", "step_key IS NOT NULL"]
        ),
        "compare": st.sampled_from([">=", ">"]),
        "stop": st.sampled_from([1, 2, 3, 2.5]),
        "ladder": st.sampled_from([None, "nudge", "final_attempt"]),
    }
)


def make_policy(kind: dict[str, Any], common: dict[str, Any]) -> Policy:
    raw = {k: v for k, v in {**kind, **common}.items() if v is not None}
    ladder = raw.pop("ladder", None)
    if ladder == "nudge" and raw["stop"] > 1:
        raw["nudge"] = 1
    if ladder == "final_attempt":
        raw["final_attempt"] = True
    if raw["type"] == "budget":
        raw["stop"] = raw["stop"] * 1.5
    return parse_policy("generated", raw, "test")


def with_times(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls with their times (``t``, seconds), which never run backwards: the one place
    a live guard and the replay differ is a window of seconds over calls whose clock runs
    backwards (the replay's window holds a later call with an earlier time; a live guard
    has not seen it yet) - see analyzer/guards/primitives/window.py."""
    out, t = [], 0
    for c in calls:
        t += c["gap"]
        out.append({k: v for k, v in c.items() if k != "gap"} | {"t": t})
    return out


@pytest.mark.slow
@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(calls=st.lists(call_st, min_size=1, max_size=30), kind=policy_st, common=common_st)
def test_live_trips_equal_the_replay_on_generated_histories(
    calls: list[dict[str, Any]], kind: dict[str, Any], common: dict[str, Any]
) -> None:
    p = make_policy(kind, common)
    with make_store(with_times(calls)) as store:
        events, want = replayed(store, [p])
    assert same_trips(live(p, events), want[p.name]), p.params()
    assert same_trips(live(p, events, one_by_one=False), want[p.name])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(calls=st.lists(call_st, min_size=1, max_size=20), kind=policy_st, common=common_st)
def test_live_trips_equal_the_replay_quick(
    calls: list[dict[str, Any]], kind: dict[str, Any], common: dict[str, Any]
) -> None:
    """The same property, fewer examples: in the default suite."""
    p = make_policy(kind, common)
    with make_store(with_times(calls)) as store:
        events, want = replayed(store, [p])
    assert same_trips(live(p, events), want[p.name]), p.params()


# A call's time after the one before it: the same instant, a second, an hour, the 5 hours a
# window lasts (still in it) and a second more, a day.
HOURS = st.sampled_from([0, 1, 3600, 5 * 3600, 5 * 3600 + 1, 86400])
timed_call_st = st.fixed_dictionaries(
    {
        "response_kind": st.sampled_from(KINDS),
        "output_tokens": st.sampled_from([1, 150, None]),
        "cost_usd": st.sampled_from([0.5, 1.0, 0.1, None]),
        "stream_key": st.sampled_from(["s1", "s2", "s3"]),
        "session_id": st.sampled_from(["a", "b", None]),
        "gap": HOURS,
    }
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(calls=st.lists(timed_call_st, min_size=1, max_size=25), raw=PERIOD_BUDGETS)
def test_live_period_caps_equal_the_replay(
    calls: list[dict[str, Any]], raw: dict[str, Any]
) -> None:
    """A budget over a day, a window or a month, over streams whose calls interleave in time
    (across midnights, 5-hour gaps, a window's end): fed as the calls happened, the live
    guard trips where the replay does, one value and one stop per period across streams."""
    p = parse_policy("generated", {k: v for k, v in raw.items() if v is not None}, "test")
    with make_store(with_times(calls)) as store:
        events, want = replayed(store, [p])
    assert same_trips(live(p, events), want[p.name]), p.params()
    assert same_trips(live(p, events, one_by_one=False), want[p.name])


def test_a_generated_loop_trips_at_the_call_the_replay_says() -> None:
    """A run of identical prompts: penguin_stale_context stops its third call, live as
    replayed (and the held-out check: the property above is not vacuous)."""
    calls = [{"response_kind": "text", "input_tokens": 500, "output_tokens": 3}] * 5
    [p] = [q for q in all_policies() if q.name == "penguin_stale_context"]
    with make_store(calls) as store:
        events, want = replayed(store, [p])
    assert want[p.name] == [("c3", "stop")]
    assert live(p, events) == [("c3", "stop")]


steps_st = st.lists(
    st.fixed_dictionaries(
        {
            "acts": st.one_of(st.just([]), st.lists(st.sampled_from(ACTS), min_size=1, max_size=2)),
            "stream_key": st.sampled_from(["s1", "s2"]),
            "session_id": st.sampled_from(["a", "b", None]),
        }
    ),
    min_size=1,
    max_size=30,
)
# Trips at every stale call (each call its own turn), and the preset itself.
EACH_STALE = parse_policy(
    "each_stale", {"type": "counter", "count": "stale", "scope": "turn", "stop": 1}, "test"
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(calls=steps_st)
@example(  # a failed step with one error seen before and one new: not stale
    calls=[
        {"acts": [ACTS[1]], "stream_key": "s1", "session_id": "a"},
        {"acts": [ACTS[2], ACTS[3]], "stream_key": "s1", "session_id": "a"},
        {"acts": [ACTS[3]], "stream_key": "s1", "session_id": "a"},
    ]
)
def test_live_stale_equals_the_replay_on_generated_steps(calls: list[dict[str, Any]]) -> None:
    """Steps repeating, errors coming back from other actions, in two streams and sessions:
    a live guard fed the replay's events finds the stale calls the replay does (every one, by
    a counter per call), and no_progress trips where the replay says."""
    calls = [
        {**c, "turn_id": f"u{i}", "response_kind": "tool_call" if c["acts"] else "text"}
        for i, c in enumerate(calls)
    ]
    [preset] = [q for q in all_policies() if q.name == "no_progress"]
    small = parse_policy(
        "small",
        {
            "type": "window",
            "count": "coalesce(stale, false)",
            "size": 3,
            "stop": 2,
            "scope": "session",
            "watch": "step_key IS NOT NULL",
        },
        "test",
    )
    with make_store(calls) as store:
        events, want = replayed(store, [EACH_STALE, preset, small])
    assert want[EACH_STALE.name] == [(e["call_id"], "stop") for e in events if e["stale"]]
    for p in (EACH_STALE, preset, small):
        assert same_trips(live(p, events), want[p.name]), p.name


def step(*acts: tuple[str, str, str | None, bool]) -> dict[str, Any]:
    return {"response_kind": "tool_call", "acts": list(acts)}


def test_no_progress_stops_where_7_of_the_last_8_steps_are_stale() -> None:
    """The same step again and again: new twice, stale from its 3rd time; the preset nudges at
    the 7th step (5 of the last 8 stale) and stops the 9th (7 of 8), live as replayed; a plain
    reply between the steps is no step and moves nothing."""
    same = step(("read", "a", "ok1", False))
    calls = [same] * 4 + [{"response_kind": "text"}] + [same] * 7
    [p] = [q for q in all_policies() if q.name == "no_progress"]
    with make_store(calls) as store:
        events, want = replayed(store, [p])
    assert [e["stale"] for e in events] == [False, False, True, True, None] + [True] * 7
    assert sorted(want[p.name]) == [("c10", "stop"), ("c8", "nudge")]
    assert same_trips(live(p, events), want[p.name])
    assert same_trips(live(p, events, one_by_one=False), want[p.name])


def test_an_error_the_session_already_got_is_stale_from_any_action() -> None:
    """Every action new, every one failing as the first did: stale from the 2nd step (the
    error is the observation), so 7 of 8 at the 8th; a step that also got something else back
    is not stale by its error."""
    calls = [step(("bash", f"cmd{i}", "e1", True)) for i in range(10)]
    calls[3] = step(("bash", "cmd3", "e1", True), ("read", "x", "ok1", False))
    [p] = [q for q in all_policies() if q.name == "no_progress"]
    with make_store(calls) as store:
        events, want = replayed(store, [p])
    assert [e["stale"] for e in events] == [False, True, True, False] + [True] * 6
    assert [e["step_failed"] for e in events][:4] == [True, True, True, False]
    assert sorted(want[p.name]) == [("c7", "nudge"), ("c9", "stop")]
    assert same_trips(live(p, events), want[p.name])


def test_a_live_callers_steps_are_stale_as_replayed() -> None:
    """``Call.step`` makes a step's fields as steps.sql does, and a guard fed them alone (no
    replay) derives ``stale`` as the replay: each stale call trips a counter of one per turn,
    per session (another session's steps are new)."""
    acts = [
        [("read", "a", "ok1", False)],
        [("read", "a", "ok1", False)],
        [("edit", "b", "e1", True)],
        [("read", "a", "ok1", False)],  # its 3rd time
        [("bash", "c", "e1", True), ("bash", "d", None, False)],  # no result: not failed
        [("bash", "c", "e1", True), ("bash", "d", "e1", True)],  # e1 again, every one
        [("read", "a", "ok1", False)],
    ]
    sessions = ["s"] * len(acts) + ["t"] * 3
    acts += acts[:3]
    calls = [
        {**step(*a), "session_id": sid, "turn_id": f"u{i}"}
        for i, (a, sid) in enumerate(zip(acts, sessions, strict=True))
    ]
    p = parse_policy("each", {"type": "counter", "count": "stale", "scope": "turn", "stop": 1}, "t")
    with make_store(calls) as store:
        events, want = replayed(store, [p])
    stale = [f"c{i + 1}" for i in (3, 5, 6)]
    assert sorted(want[p.name]) == [(c, "stop") for c in stale]
    made = [
        Call(
            call_id=e["call_id"],
            stream_key="s",
            session_id=e["session_id"],
            turn_id=e["turn_id"],
            **Call.step((f"{t}:{h}", got, err) for t, h, got, err in a),
        )
        for e, a in zip(events, acts, strict=True)
    ]
    assert [(c.step_key, c.step_errors, c.step_failed) for c in made] == [
        (e["step_key"], e["step_errors"], e["step_failed"]) for e in events
    ]
    guard = Guard(p)
    said = [guard.feed(c).action for c in made]
    assert [c.call_id for c, a in zip(made, said, strict=True) if a == "stop"] == stale


# -- every preset over real data -------------------------------------------------------------


def corpus_trips(paths: list[str], one_by_one: bool) -> list[tuple[str, Trips, Trips]]:
    policies = all_policies()
    with open_store(":memory:") as store:
        ingest_paths(store, paths, IngestOptions(progress=False))
        events, want = replayed(store, policies)
    assert events
    return [(p.name, want[p.name], live(p, events, one_by_one)) for p in policies]


def test_every_preset_on_the_sample_data() -> None:
    found = corpus_trips([str(REPO / "sample_data")], one_by_one=True)
    assert sum(len(w) for _, w, _ in found) > 100  # the sample's loops trip many presets
    for name, want, got in found:
        assert same_trips(got, want), name


@pytest.mark.parametrize("corpus", ["real-loops", "real-world", "more-formats"])
def test_every_preset_on_the_real_corpora(corpus: str) -> None:
    found = corpus_trips([str(shared_samples() / corpus)], one_by_one=corpus == "real-loops")
    for name, want, got in found:
        assert same_trips(got, want), name


# -- the guard's own interface ---------------------------------------------------------------


def test_a_decision_says_why_and_the_value() -> None:
    guard = Guard.load("penguin_stale_context")
    said = [
        guard.feed(Call(call_id=f"c{i}", session_id="s", input_tokens=900, output_tokens=3))
        for i in range(4)
    ]
    assert [d.action for d in said] == ["continue", "continue", "stop", "continue"]
    assert said[2].value == 3 and said[2].call_id == "c2"
    assert "3 calls in a row with the same input_tokens" in said[2].reason
    assert "end the turn" in said[2].reason
    assert guard.standing("s") == said[2]


def test_a_nudge_comes_before_the_stop() -> None:
    guard = Guard.load("gemini_repeat_tool")  # nudge at 5, stop at 6 identical tool calls
    actions = [
        guard.feed(Call(call_id=f"c{i}", session_id="s", turn_id="t", tool_key="read:h")).action
        for i in range(7)
    ]
    assert actions == ["continue"] * 4 + ["nudge", "stop", "continue"]


def test_a_bills_cut_off_call_is_judged_when_the_next_call_comes() -> None:
    """``truncated`` reads the next prompt: the call is held, and its stop comes with the
    next call, naming the held call."""
    guard = Guard.load("maxtokens_truncated_tools")
    t0 = datetime(2026, 1, 1)

    def bill(i: int, prompt: int) -> Call:
        return Call(
            call_id=f"c{i}",
            session_id="s",
            ts=t0.replace(second=i),
            finish_reason="length",
            input_tokens=prompt,
            output_tokens=4000,
            is_bill=True,
        )

    said = [guard.feed(bill(i, 1000)) for i in range(6)]  # every prompt dropped the output
    stop = [d for d in said if d.action == "stop"]
    assert len(stop) == 1 and stop[0].call_id == "c4"  # the 5th cut-off, said at the 6th call
    assert said[5] == stop[0]


def test_a_policy_that_does_not_exist_is_named() -> None:
    with pytest.raises(ForensicsError, match="no policy 'nope' among the presets"):
        Guard.load("nope")


def test_a_policy_of_a_toml_file(tmp_path: Any) -> None:
    f = tmp_path / "mine.toml"
    f.write_text('[policy.three_reads]\ntype = "counter"\ncount = "tool_call"\nstop = 3\n')
    guard = Guard.load("three_reads", f)
    actions = [guard.feed(Call(call_id=str(i), tool_key="read:x")).action for i in range(3)]
    assert actions == ["continue", "continue", "stop"]
