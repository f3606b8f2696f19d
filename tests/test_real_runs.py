"""Real runs no issue described (tests/real_runs, each folder's README says where from): every
file read whole, each labelled loop found where it is and covering most of its calls, no waste
on a healthy run or outside the labelled spans, a loop of a shape no named detector has found
by the general one, and the waste of a file counted once however many incidents tell a call."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from analyzer.detect.detectors import bind_all, detect, discover, load_incidents, wasted_once
from analyzer.engine.store import Store, open_store
from analyzer.ingest.base import IngestOptions
from analyzer.model.formatting import money
from analyzer.pipeline import ingest_paths
from analyzer.views.audit import build_summary, render_text
from tests.helpers import q

ROOT = Path(__file__).parent / "real_runs"
FOLDERS = ("quantuzo",)


def _truth(folder: str) -> dict[str, Any]:
    return dict(json.loads((ROOT / folder / "truth.json").read_text(encoding="utf-8"))["files"])


CASES = [(f, rel) for f in FOLDERS for rel in sorted(_truth(f))]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Store, int]]]:
    """Each file audited alone (as a user would), in a store of its own: its source id."""
    opened: dict[str, tuple[Store, int]] = {}
    try:
        for folder, rel in CASES:
            store = open_store(tmp_path_factory.mktemp("run") / "s.duckdb")
            [report] = ingest_paths(store, [str(ROOT / folder / rel)], IngestOptions())
            assert report.source_id is not None, report
            opened[f"{folder}/{rel}"] = (store, int(report.source_id))
            detect(store, bind_all(discover(), {}))
        yield opened
    finally:
        for store, _ in opened.values():
            store.close()


def _numbered(store: Store) -> dict[str, int]:
    """The file's calls in its own order: call id -> 1-based number."""
    order = q(store, "SELECT call_id FROM calls ORDER BY line NULLS LAST, seq NULLS LAST, call_id")
    return {cid: k for k, (cid,) in enumerate(order, 1)}


@pytest.mark.parametrize(("folder", "rel"), CASES, ids=[f"{f}/{r}" for f, r in CASES])
def test_every_call_is_read(stores: dict[str, tuple[Store, int]], folder: str, rel: str) -> None:
    store, _ = stores[f"{folder}/{rel}"]
    raw = json.loads((ROOT / folder / rel).read_text(encoding="utf-8"))
    assistant = sum(1 for m in raw["messages"] if m.get("role") == "assistant")
    assert assistant == _truth(folder)[rel]["calls"]
    assert q(store, "SELECT count(*) FROM calls") == [(assistant,)]
    assert q(store, "SELECT exit_status FROM runs") == [(_truth(folder)[rel]["exit_status"],)]


@pytest.mark.parametrize(("folder", "rel"), CASES, ids=[f"{f}/{r}" for f, r in CASES])
def test_loops_are_found_where_they_are_and_healthy_runs_waste_nothing(
    stores: dict[str, tuple[Store, int]], folder: str, rel: str
) -> None:
    store, _ = stores[f"{folder}/{rel}"]
    label = _truth(folder)[rel]["label"]
    number = _numbered(store)
    spans = [set(range(a, a + n)) for a, n in label.get("spans_calls", [])]
    labelled = set().union(*spans) if spans else set()
    covered: set[int] = set()
    for i in load_incidents(store):
        calls = set(range(number[i.first_call_id], number[i.last_call_id] + 1))
        if i.wasted_usd > 0:  # no waste on a healthy run, none outside the labelled spans
            assert calls & labelled, f"{rel}: {i.detector} wasted {i.wasted_usd} on {calls}"
        if i.severity in ("medium", "high"):
            covered |= calls
    for span in spans:
        share = len(span & covered) / len(span)
        assert share > 0.5, f"{rel}: calls {min(span)}-{max(span)}: {share:.0%} covered"


def test_a_cycle_no_named_detector_knows_is_found_by_the_general_one(
    stores: dict[str, tuple[Store, int]],
) -> None:
    """Five actions repeated in a cycle, never twice in a row, never an error: no rule for a
    shape sees it; it changes nothing, so no_progress does."""
    store, _ = stores["quantuzo/sympy__sympy-18087.traj.json"]
    found = [i for i in load_incidents(store) if i.severity in ("medium", "high")]
    assert [i.detector for i in found] == ["no_progress"]
    number = _numbered(store)
    [loop] = found
    assert number[loop.first_call_id] <= 31 and number[loop.last_call_id] == 100
    assert loop.evidence is not None and loop.evidence["stale_steps"] >= 60


def test_a_call_two_incidents_tell_is_wasted_once(stores: dict[str, tuple[Store, int]]) -> None:
    """The failing sed rewrites are repeated_tool_call's and same_error_retry's both: the file's
    waste is each wasted call once, never above what the file spent."""
    store, _ = stores["quantuzo/django__django-16873.traj.json"]
    incidents = load_incidents(store)
    added = sum((i.wasted_usd for i in incidents), Decimal(0))
    [(spent,)] = q(store, "SELECT sum(cost_usd) FROM calls")
    [(once,)] = q(
        store,
        "SELECT sum(cost_usd) FROM calls WHERE call_id IN (SELECT call_id FROM incident_calls)",
    )
    assert {i.detector for i in incidents if i.wasted_usd > 0} >= {
        "repeated_tool_call",
        "same_error_retry",
    }
    assert added > spent  # added up, the incidents' dollars exceed the file's spend
    assert wasted_once(store, incidents) == once <= spent
    # what the audit, the report and `incidents` say the file wasted
    summary = build_summary(store)
    assert summary.wasted_usd == once
    text = re.sub(r"\x1b\[[0-9;]*m", "", render_text(summary))  # (bold on a terminal)
    assert f"Wasted   {money(once)} (" in text
    assert f"Incidents ({len(incidents)}, {money(once)} wasted)" in text
