"""Every detector: its contract, and its golden cases.

A golden case is ``tests/detectors/<detector>/<case>.json``::

    {
      "description": "what the case shows",
      "params": {"min_run": 3},                  (optional: overrides of the defaults)
      "given": {"calls": [...], "messages": [...], "runs": [...]},
      "expect": [ {incident fields to check}, ... ]   ([] when nothing must be found)
    }

Given rows are rows of the canonical tables; unnamed columns are filled in: ``call_id`` as
``c<n>`` (1-based position), ``stream_key`` "s", ``session_id`` = the stream key, ``seq`` = the
position within the stream, ``ts`` from ``"t"`` (seconds after 2025-12-13 06:00:00 UTC) or
10 s apart, ``format`` "test", ``output_final`` true; a run's ``stream_key`` "s" and ``seq`` its
position. Expected incidents are compared on the
fields they name (``evidence`` on the keys it names), in ``first_call_id`` order.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from analyzer.detect.detectors import (
    OUTPUT_COLUMNS,
    Detector,
    bind_all,
    detect,
    discover,
    parse,
    run_detector,
)
from analyzer.engine.store import open_store
from analyzer.errors import ForensicsError
from analyzer.model.incident import Incident
from tests.helpers import fill_calls, fill_messages, fill_runs, insert, q

CASES = Path(__file__).parent / "detectors"
DETECTORS = {d.name: d for d in discover()}


def case_files() -> list[Path]:
    return sorted(CASES.glob("*/*.json"))


def load_case(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def run_case(det: Detector, case: dict[str, Any]) -> list[Incident]:
    with open_store(":memory:") as store:
        insert(store, "calls", fill_calls(case["given"].get("calls", [])))
        insert(store, "messages", fill_messages(case["given"].get("messages", [])))
        insert(store, "runs", fill_runs(case["given"].get("runs", [])))
        params = {det.name: case["params"]} if case.get("params") else {}
        found = detect(store, bind_all([det], params))
    return sorted(found, key=lambda r: str(r.first_call_id))


def same(expected: Any, got: Any) -> bool:
    if isinstance(expected, float | int) and not isinstance(expected, bool):
        return got is not None and abs(Decimal(str(got)) - Decimal(str(expected))) < Decimal("1e-6")
    return expected == got


# -- the contract every detector keeps ------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_detector_contract(name: str) -> None:
    det = DETECTORS[name]
    assert det.path.stem == det.name
    assert det.title and det.reasoning, "a title and a paragraph of forensic reasoning"
    assert det.placeholders == set(det.params), "declared parameters = placeholders used"
    cases = [load_case(p) for p in sorted((CASES / name).glob("*.json"))]
    assert any(c["expect"] for c in cases), "a golden case that finds something"
    assert any(not c["expect"] for c in cases), "a golden case that finds nothing"
    for c in cases:
        assert set(c.get("params", {})) <= set(det.params)


def test_every_case_names_a_detector() -> None:
    assert {p.parent.name for p in case_files()} <= set(DETECTORS)


@pytest.mark.parametrize("path", case_files(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_case(path: Path) -> None:
    case = load_case(path)
    check_expected(case, run_case(DETECTORS[path.parent.name], case))


def check_expected(case: dict[str, Any], got: list[Incident]) -> None:
    """The incidents ``got`` (in ``first_call_id`` order) are the case's expected ones."""
    expected = sorted(case["expect"], key=lambda r: str(r.get("first_call_id")))
    assert len(got) == len(expected), f"{case.get('description')}: found {got}"
    for want, have in zip(expected, got, strict=True):
        for key, value in want.items():
            if key == "evidence":
                evidence = have.evidence or {}
                for ek, ev in value.items():
                    assert same(ev, evidence.get(ek)), f"evidence.{ek}: {evidence.get(ek)}"
            elif key == "summary_contains":
                assert value in have.summary, have.summary
            else:
                found = getattr(have, key)
                assert same(value, found), f"{key}: {found!r}, expected {value!r}"


# -- the seam another engine plugs into (detectors.DetectorEngine) ------------------------------


class _Elsewhere:
    """An engine of another name that returns what it is given, or fails as it is told."""

    name = "Elsewhere"

    def __init__(self, result: Any = None, raises: Exception | None = None) -> None:
        self.result, self.raises, self.asked = result, raises, {}

    def table(self, sql: str, params: Any = None) -> Any:
        self.asked = dict(params)
        if self.raises is not None:
            raise self.raises
        return self.result

    def failure(self, exc: Exception) -> str | None:
        return None if isinstance(exc, KeyError) else f"said {exc}"


def test_a_detector_runs_the_same_way_on_any_engine() -> None:
    """One code path: the parameters the query names, the contract checked, the header's
    severity, and an engine's failure named after the engine (DuckDB, the default, unnamed)."""
    det = DETECTORS["constant_input_low_output"]
    names = ["severity", *OUTPUT_COLUMNS]
    engine = _Elsewhere(result=(names, [(None, *range(len(OUTPUT_COLUMNS)))]))
    [row] = run_detector(engine, det, {**det.params, "not_named": 1})
    assert engine.asked == det.params
    assert row["severity"] == det.severity and row["evidence"] == OUTPUT_COLUMNS.index("evidence")
    with pytest.raises(ForensicsError, match="returns no column evidence"):
        run_detector(_Elsewhere(result=(names[:-1], [])), det, det.params)
    with pytest.raises(ForensicsError, match="detector failed on Elsewhere: said boom") as failed:
        run_detector(_Elsewhere(raises=ValueError("boom")), det, det.params)
    assert failed.value.path == str(det.path)
    with pytest.raises(KeyError):  # not the query's failure: it goes through
        run_detector(_Elsewhere(raises=KeyError("x")), det, det.params)
    with pytest.raises(ForensicsError, match="does not translate") as untranslated:
        run_detector(_Elsewhere(raises=ForensicsError("does not translate")), det, det.params)
    assert untranslated.value.path == str(det.path), "an engine's own error names the file"
    broken = Detector("broken", "t", "low", {}, "r", "SELECT nothing_here", Path("broken.sql"))
    with open_store(":memory:") as store, pytest.raises(ForensicsError) as on_duckdb:
        run_detector(store.engine, broken, {})
    assert on_duckdb.value.message.startswith("detector failed: Binder Error")


# -- a general detector tells a loop only where no named one told it ---------------------------


def _named(tmp_path: Path, first: int, last: int, severity: str = "medium") -> Detector:
    """A named detector (a user's own) that finds calls c<first> to c<last> of stream s."""
    path = tmp_path / "spotted.sql"
    path.write_text(
        "-- name: spotted\n-- title: Spotted by hand\n-- severity: medium\n--\n-- A test's.\n"
        "SELECT 's' AS stream_key, 's' AS session_id, NULL::TIMESTAMP AS start_ts,\n"
        "       NULL::TIMESTAMP AS end_ts, 1 AS n_calls,\n"
        f"       'c{first}' AS first_call_id, 'c{last}' AS last_call_id, 0.01 AS wasted_usd,\n"
        "       1 AS wasted_tokens, 'estimated' AS cost_basis, 'spotted' AS summary,\n"
        f"       '{{}}' AS evidence, '{severity}' AS severity",
        encoding="utf-8",
    )
    return parse(path)


@pytest.mark.parametrize(
    ("first", "last", "severity", "kept"),
    [
        (1, 12, "medium", False),  # the whole loop told by a named detector: told once
        (4, 10, "high", False),  # most of its calls (4-10 of 4-12)
        (4, 7, "medium", True),  # under half of them: the general one adds the rest
        (1, 12, "low", True),  # a low-severity finding tells no loop
    ],
)
def test_a_general_detector_defers_to_a_named_one_that_found_the_same_loop(
    tmp_path: Path, first: int, last: int, severity: str, kept: bool
) -> None:
    case = load_case(CASES / "no_progress" / "a_loop_that_varies.json")
    [alone] = run_case(DETECTORS["no_progress"], case)
    assert (alone.first_call_id, alone.last_call_id) == ("c4", "c12")
    with open_store(":memory:") as store:
        insert(store, "calls", fill_calls(case["given"]["calls"]))
        insert(store, "messages", fill_messages(case["given"]["messages"]))
        found = detect(
            store, bind_all([DETECTORS["no_progress"], _named(tmp_path, first, last, severity)], {})
        )
        assert sorted(i.detector for i in found) == (
            ["no_progress", "spotted"] if kept else ["spotted"]
        )
        # nothing of the deferred incident is left behind (its wasted calls)
        assert q(
            store,
            "SELECT DISTINCT detector FROM incidents JOIN incident_calls USING "
            "(incident_id) ORDER BY 1",
        ) == ([("no_progress",), ("spotted",)] if kept else [("spotted",)])


def test_a_general_detector_run_alone_defers_to_the_named_incidents_in_the_store(
    tmp_path: Path,
) -> None:
    case = load_case(CASES / "no_progress" / "a_loop_that_varies.json")
    with open_store(":memory:") as store:
        insert(store, "calls", fill_calls(case["given"]["calls"]))
        insert(store, "messages", fill_messages(case["given"]["messages"]))
        detect(store, bind_all([_named(tmp_path, 1, 12)], {}))
        assert detect(store, bind_all([DETECTORS["no_progress"]], {})) == []
        assert q(store, "SELECT detector FROM incidents") == [("spotted",)]
