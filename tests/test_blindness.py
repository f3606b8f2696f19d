"""Where a guard is blind (the data lacks its signal) and where it counts per session (the
calls have no turns): ``analyzer.guards.blindness``, golden SQL and its meaning on a few calls."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.engine.store import open_store
from analyzer.guards.backtest import backtest
from analyzer.guards.blindness import UNKNOWN, blind_sql, per_session_note, signal_columns
from analyzer.guards.policy import Policy, all_policies, parse_policy
from analyzer.guards.primitives import EVENT_COLUMNS
from analyzer.guards.scoring import Result
from tests.helpers import load_guard_case

PRESETS = {p.name: p for p in all_policies()}
KIND = "(response_kind IS NULL)"
# (a tool call whose arguments the log does not record is keyed '?<session>#<idx>': unknown)
TOOLS = (
    "(tool_key IS NULL AND (response_kind IS NULL"
    " OR response_kind IN ('tool_call', 'truncated_tool_call')) OR tool_key LIKE '%:?%')"
)
ANSWER = "(content_chars IS NULL AND tool_key IS NULL)"
# (and a result the log does not record is '?' in the result key)
RESULTS = "((content_chars IS NULL AND tool_key IS NULL) OR result_key LIKE '%?%')"


def policy(**raw: Any) -> Policy:
    raw.setdefault("scope", "session")
    return parse_policy("p", raw, "test")


@pytest.mark.parametrize(
    ("name", "want"),
    [
        # the reply kind: a bill knows it, so only a call without one is blind
        ("netclaw_cumulative_per_turn", KIND),
        ("netclaw_reset_on_tool", KIND),  # tools_before places the call: always known
        ("nexus3_consecutive_empty", KIND),
        ("netclaw_max_tool_iterations", "(response_kind IS NULL AND tool_key IS NULL)"),
        # Penguin falls back from the text to the token count: blind only where neither (nor
        # whether it was a tool call) is known
        (
            "penguin_consecutive_trivial",
            "(output_tokens IS NULL) AND (response_kind IS NULL AND tool_key IS NULL)"
            " AND (visible_chars IS NULL)",
        ),
        ("penguin_stale_context", "(input_tokens IS NULL)"),
        ("maxtokens_session", "(coalesce(finish_reason, 'unknown') = 'unknown')"),
        ("maxtokens_truncated_tools", KIND),
        ("session_cost_cap", "false"),  # counts every call: nothing to be blind to
        ("daily_cost_cap", "false"),
        ("window_cost_cap", "false"),
        ("monthly_cost_cap", "false"),
        # which tool: a bill's tool call names none
        ("gemini_repeat_tool", TOOLS),
        ("openhands_alternation", TOOLS),
        # what the agent answered: only where a reply of it was kept
        ("mini_swe_agent_format_errors", ANSWER),
        ("cline_mistakes", f"{RESULTS} AND {ANSWER}"),
        ("openhands_action_error", f"{RESULTS} AND {TOOLS}"),
        # a step: its tool calls' arguments and results
        ("no_progress", "((content_chars IS NULL AND tool_key IS NULL) OR step_key LIKE '%?%')"),
    ],
)
def test_blind_sql_of_the_presets(name: str, want: str) -> None:
    assert blind_sql(PRESETS[name]) == want


def test_blind_sql_qualifies_its_columns() -> None:
    p = PRESETS["netclaw_max_tool_iterations"]
    assert blind_sql(p, "e.") == "(e.response_kind IS NULL AND e.tool_key IS NULL)"
    assert blind_sql(PRESETS["session_cost_cap"], "tc.") == "false"


def test_only_the_signal_counts_not_the_watch_reset_or_strings() -> None:
    # a column named in a string is no column; the reset and the watch are not the signal
    p = policy(type="counter", count="app = 'stalled'", reset="stalled", watch="tool_call", stop=2)
    assert signal_columns(p) == set() and blind_sql(p) == "false"
    # columns that place a call (position, ids, model, tools_before) are never unknown
    assert blind_sql(policy(type="counter", count="pos > 3 AND tools_before = 0", stop=2)) == (
        "false"
    )
    # a key on two signals is blind where neither is known
    both = policy(type="run_length", key="coalesce(visible_chars, output_tokens)", stop=3)
    assert blind_sql(both) == "(output_tokens IS NULL) AND (visible_chars IS NULL)"


def test_every_unknown_test_is_sql_over_the_replays_columns() -> None:
    con = duckdb.connect()
    cols = ", ".join(f"{c} {t}" for c, t in EVENT_COLUMNS.items())
    con.execute(f"CREATE TABLE lf_events ({cols})")
    assert set(UNKNOWN) <= set(EVENT_COLUMNS)
    for test in UNKNOWN.values():
        con.execute(f"SELECT {test.format(t='e.')} FROM lf_events e")


BILL = {"format": "openrouter_csv", "stream_key": "k|app|u|m", "session_id": "s1"}


@pytest.mark.parametrize(
    ("name", "call", "blind"),
    [
        # a bill's thinking-only reply (every output token was reasoning): seen
        (
            "netclaw_cumulative_per_turn",
            {"response_kind": "thinking_only", "output_tokens": 9, "reasoning_tokens": 9},
            False,
        ),
        # a reply with no kind (neither text nor tokens recorded), in a bill or a log: blind
        ("netclaw_cumulative_per_turn", {}, True),
        ("netclaw_cumulative_per_turn", {"format": "test", "turn_id": "t"}, True),
        # a bill's 3-token reply: Penguin reads the tokens
        ("penguin_token_trivial", {"response_kind": "text", "output_tokens": 3}, False),
        # a bill's tool call names no tool; its text reply is known to call none
        ("gemini_repeat_tool", {"response_kind": "tool_call", "output_tokens": 9}, True),
        ("gemini_repeat_tool", {"response_kind": "text", "output_tokens": 9}, False),
        # a bill keeps no reply: what the agent answered is unknown
        ("mini_swe_agent_format_errors", {"response_kind": "text", "output_tokens": 9}, True),
        (
            "mini_swe_agent_format_errors",
            {"format": "test", "response_kind": "text", "content_chars": 40},
            False,
        ),
    ],
)
def test_blind_on_a_call_where_its_signal_is_unknown(
    name: str, call: dict[str, Any], blind: bool
) -> None:
    with open_store(":memory:") as store:
        load_guard_case(store, {"calls": [{**BILL, **call}]})
        [r] = backtest(store, [PRESETS[name]])
    assert (r.calls_total, r.blind_calls) == (1, int(blind))


# -- per session where the calls have no turns --------------------------------------------------


def as_log_and_bill(turns: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same calls (``turns``: one pattern of T S E X letters a user turn), once as a log
    with its turns and once as a bill of one session without them. $1 a call."""
    kinds = {"T": "tool_call", "S": "thinking_only", "E": "empty", "X": "text"}
    calls = [
        {"response_kind": kinds[k], "cost_usd": 1.0, "turn": f"t{i}"}
        for i, pattern in enumerate(turns)
        for k in pattern
    ]
    log = [
        {"response_kind": c["response_kind"], "cost_usd": 1.0, "turn_id": c["turn"]} for c in calls
    ]
    bill = [
        {"response_kind": c["response_kind"], "cost_usd": 1.0, "output_tokens": 5, **BILL}
        for c in calls
    ]
    return {"calls": log}, {"calls": bill}


def replayed(p: Policy, given: dict[str, Any]) -> Result:
    with open_store(":memory:") as store:
        load_guard_case(store, given)
        [r] = backtest(store, [p])
    return r


def first_trip(r: Result) -> int | None:
    """The position (1-based) of the first stop, nudges included."""
    calls = [int(t.call_id[1:]) for t in (*r.trips, *r.nudges)]
    return min(calls) if calls else None


def test_a_bill_counts_per_session_and_trips_no_later() -> None:
    """Two stalls in turn 1, then a loop of stalls in turn 2. Netclaw's guard counting per
    turn (the log) makes its last attempt at turn 2's 10th stall (c13) and fails at its 11th
    (c14); on the bill, without turns, the session's stalls are counted: the last attempt at
    the 10th stall of the session (c11), the failure at the 11th (c12) - no later, and said."""
    log, bill = as_log_and_bill(["SSX", "SSSSSSSSSSSSS"])
    p = PRESETS["netclaw_cumulative_per_turn"]
    on_log, on_bill = replayed(p, log), replayed(p, bill)
    assert ([t.call_id for t in on_log.nudges], [t.call_id for t in on_log.trips]) == (
        ["c13"],
        ["c14"],
    )
    assert ([t.call_id for t in on_bill.nudges], [t.call_id for t in on_bill.trips]) == (
        ["c11"],
        ["c12"],
    )
    assert (on_log.per_session_calls, on_log.per_session) == (0, None)
    assert on_bill.per_session_calls == 16 == on_bill.calls_total
    assert on_bill.per_session == per_session_note(p, 16, 16)
    assert on_bill.per_session and "trips no later" in on_bill.per_session
    assert on_bill.blind_calls == 0  # every reply's kind is known


TURN_POLICIES = [
    PRESETS["netclaw_cumulative_per_turn"],
    PRESETS["netclaw_reset_on_tool"],
    PRESETS["nexus3_consecutive_empty"],
    policy(type="run_length", key="response_kind", scope="turn", stop=3),
    policy(type="window", count="stalled", size=4, scope="turn", stop=3),
]


# a property search: CI runs it; the default run has this module's examples
@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(st.text(alphabet="TSEX", min_size=1, max_size=8), min_size=1, max_size=4),
    which=st.integers(min_value=0, max_value=len(TURN_POLICIES) - 1),
)
def test_per_session_trips_no_later_than_per_turn(turns: list[str], which: int) -> None:
    """Whatever the turns, a guard living in turns first trips on the bill (counted per
    session) no later than on the log (counted per turn): a per-session count is at least the
    per-turn count at every call (``tools_before > 0`` included: more tools before in the
    session than in the turn)."""
    p = TURN_POLICIES[which]
    log, bill = as_log_and_bill(turns)
    on_log = first_trip(replayed(p, log))
    on_bill = first_trip(replayed(p, bill))
    if on_log is not None:
        assert on_bill is not None and on_bill <= on_log


def test_a_count_before_the_turns_first_tool_says_it_may_trip_later() -> None:
    """Netclaw's pre-tool counter counts stalls before the turn's first tool call. A tool call
    in turn 1, then three stalls opening turn 2: per turn (the log) they are before any tool,
    and the third fails the turn (c4); per session (the bill) they come after turn 1's tool,
    and it never trips. Its note says it may trip later, or not at all."""
    log, bill = as_log_and_bill(["T", "SSS"])
    p = PRESETS["netclaw_pre_tool_empty"]
    on_log, on_bill = replayed(p, log), replayed(p, bill)
    assert (first_trip(on_log), first_trip(on_bill)) == (4, None)
    assert on_bill.per_session and "may trip later" in on_bill.per_session
    assert "tools_before" in on_bill.per_session and on_log.per_session is None
