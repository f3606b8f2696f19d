"""Golden replay cases: given calls and incidents, a guard, its expected trips and scores.

A case is ``tests/guards/<case>.json``::

    {
      "description": "what the case shows",
      "seed": "the seed sentence it encodes, quoted",
      "policy": "a preset's name" | {a policy's TOML table, with "name"},
      "given": {
        "calls": [ {columns of one call}, {"pattern": "T S S", "times": 20, ...columns} ],
        "incidents": [ {"incident_id", "detector", "severity", "first_call_id",
                        "last_call_id", "waste": [call ids] | "<response_kind>"} ]
      },
      "expect": {"stops": [call ids], "nudges": [call ids],
                 "scores": {Result fields}, "stopped": [{stopped-list fields}]}
    }

A pattern expands to one call per letter: T a tool call, S a thinking-only reply, E an empty
reply, W blanks, X text; every call gets the pattern's other columns. Calls are numbered c1,
c2, ... in order (``tests.helpers.fill_calls`` fills the rest). A waste given as a response kind
is every call of that kind from the incident's first to its last call.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzer.engine.store import open_store
from analyzer.guards.backtest import backtest
from analyzer.guards.policy import all_policies, parse_policy
from tests.helpers import load_guard_case

CASES = Path(__file__).parent / "guards"
PRESETS = {p.name: p for p in all_policies()}


def case_files() -> list[Path]:
    return sorted(CASES.glob("*.json"))


def test_every_seed_has_its_cases() -> None:
    seeds = {json.loads(p.read_text())["seed"][:3] for p in case_files()}
    assert seeds >= {"000", "001", "002", "003"}


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_guard_case(path: Path) -> None:
    case = json.loads(path.read_text(encoding="utf-8"))
    assert case["seed"] and case["description"]
    raw = case["policy"]
    if isinstance(raw, str):
        p = PRESETS[raw]
    else:
        raw = dict(raw)
        p = parse_policy(raw.pop("name", "case"), raw, path.name)
    with open_store(":memory:") as store:
        load_guard_case(store, case["given"])
        [r] = backtest(store, [p])
    want = case["expect"]
    assert [t.call_id for t in r.trips] == want.get("stops", [])
    assert [t.call_id for t in r.nudges] == want.get("nudges", [])
    for key, value in want.get("scores", {}).items():
        got = getattr(r, key)
        if isinstance(value, float):  # (dollars are Decimal: the case's JSON gives floats)
            assert float(got) == pytest.approx(value, abs=1e-9), key
        else:
            assert got == value, key
    if "stopped" in want:
        assert len(r.stopped) == len(want["stopped"])
        for expected, got in zip(want["stopped"], r.stopped, strict=True):
            for key, value in expected.items():
                have = float(got[key]) if isinstance(value, float) else got[key]
                assert have == (pytest.approx(value) if isinstance(value, float) else value), key
