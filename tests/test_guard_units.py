"""The guard replay's SQL units (analyzer/sql/guards/): each keyed into the replay's cache,
and the cases no other test reaches (a weighted counter that resets); the one writer of a
policy's TOML table."""

from __future__ import annotations

import tomllib

from analyzer.engine import cache
from analyzer.engine.engine import SQL_DIR
from analyzer.guards.policy import parse_policy, toml_table
from analyzer.guards.recommend import recommended_toml
from tests.test_guards import policy, trips


def test_every_guard_unit_says_what_it_is_and_keys_the_replay() -> None:
    """A unit edited invalidates the replay's cached results (it is named where it is run)."""
    units = sorted((SQL_DIR / "guards").glob("*.sql"))
    assert len(units) >= 20
    keyed = set(cache.step_files("guards"))
    for unit in units:
        assert unit.read_text(encoding="utf-8").startswith("-- "), unit.name
        assert unit.resolve() in {f.resolve() for f in keyed}, unit.name


def test_a_weighted_counter_with_a_reset_sums_from_the_reset() -> None:
    """trace_counter_weighted.sql's segment: the sum starts again after each reset (the
    resetting call does not count itself)."""
    tokens = [("text", 60), ("text", 30), ("tool_call", 500), ("text", 50), ("text", 60)]
    calls = [{"response_kind": k, "output_tokens": n} for k, n in tokens]
    raw = {"type": "counter", "count": "true", "weight": "output_tokens", "stop": 100}
    assert trips(calls, policy(**raw, reset="tool_call")) == (["c5"], [])
    assert trips(calls, policy(**raw)) == (["c3"], [])


def test_a_policy_is_written_as_a_table_that_reads_back() -> None:
    p = policy(
        name="mine",
        type="counter",
        count="stalled",
        reset="tool_call",
        scope="turn",
        reach="session",
        watch="tool_key IS NULL",
        nudge=2,
        stop=4.0,
        targets=["repeated_identical_calls"],
        description='a "quoted" guard',
    )
    text = toml_table(p, "mine_too", "a guard", "a note")
    assert text == (
        "# a note\n"
        "[policy.mine_too]\n"
        'description = "a guard"\n'
        'type = "counter"\n'
        'scope = "turn"\n'
        'reach = "session"\n'
        'watch = "tool_key IS NULL"\n'
        'count = "stalled"\n'
        'reset = "tool_call"\n'
        "nudge = 2\n"
        "stop = 4\n"
        'targets = ["repeated_identical_calls"]\n'
    )
    [(name, raw)] = tomllib.loads(text)["policy"].items()
    assert parse_policy(name, raw, "test").table() == p.table()
    recommended = recommended_toml(p.with_param("stop", 2.5))
    assert recommended.startswith(
        "[policy.mine_at_2_5]\n"
        'description = "mine at stop = 2.5 (recommended by llm-forensics backtest). '
        'a \\"quoted\\" guard"\n'
    )
