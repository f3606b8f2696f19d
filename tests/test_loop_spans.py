"""The labelled loops of the three visible loop corpora are found where they are, not in name
only: every span a truth.json gives call by call (mini-swe-agent runs, whose k-th call is the
store's k-th call of the file in the file's order, as ../shared/tools/spans_check.py maps them)
is overlapped by an incident of medium or high severity, which covers most of its calls; and no
healthy run of those corpora has an incident with waste. (The whole-corpus scores, with the
Claude Code and Codex mappings, are bench/recall.py's and spans_check.py's.)"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analyzer.detect.detectors import bind_all, detect, discover
from analyzer.engine.store import Store, open_store
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from tests.helpers import q, shared_samples, truth_at_collection

CORPORA = ("real-loops", "real-loops-2", "real-loops-3")


def _spans(label: dict[str, Any]) -> list[list[int]]:
    """A label's spans as call numbers: ``spans_calls`` ([first, length] pairs), or the text
    form "N of M calls ...; the other K are calls [a, b, ...]" (the complement)."""
    if "spans_calls" in label:
        return [list(range(a, a + n)) for a, n in label["spans_calls"]]
    text = label.get("calls")
    m = re.match(r"(\d+) of (\d+) calls .*?the other \d+ are calls \[([\d, ]+)\]", str(text))
    if m:
        others = {int(x) for x in m.group(3).split(",")}
        return [[k for k in range(1, int(m.group(2)) + 1) if k not in others]]
    return []


def _cases() -> list[tuple[str, str, bool]]:
    out = []
    for corpus in CORPORA:
        for rel, t in sorted(truth_at_collection(corpus).items()):
            label = t.get("label") if isinstance(t.get("label"), dict) else {}
            if not rel.startswith("conversation_json/"):
                continue
            if label.get("loop") is True and _spans(label):
                out.append((corpus, rel, True))
            elif label.get("loop") is False:
                out.append((corpus, rel, False))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def stores(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, tuple[Store, dict[str, int]]]]:
    """Each corpus read into one store, the detectors run over it; with each file's source id."""
    opened: dict[str, tuple[Store, dict[str, int]]] = {}
    try:
        for corpus in CORPORA:
            store = open_store(tmp_path_factory.mktemp(corpus) / "s.duckdb")
            root = shared_samples() / corpus
            reports = ingest_paths(store, [str(root)], IngestOptions(progress=False))
            ids = {
                str(Path(r.path).relative_to(root)): int(r.source_id)
                for r in reports
                if r.source_id is not None
            }
            opened[corpus] = (store, ids)
            detect(store, bind_all(discover(), {}))
        yield opened
    finally:
        for store, _ in opened.values():
            store.close()


def _incidents(store: Store, source_id: int) -> tuple[list[Any], dict[str, int]]:
    """The file's calls in its own order (call id -> 1-based number) and its incidents."""
    order = q(
        store,
        """SELECT call_id FROM calls WHERE source_id = ?
           ORDER BY line NULLS LAST, seq NULLS LAST, call_id""",
        [source_id],
    )
    number = {cid: k for k, (cid,) in enumerate(order, 1)}
    found = q(
        store,
        """SELECT detector, severity, first_call_id, last_call_id, wasted_usd FROM incidents
           WHERE first_call_id IN (SELECT call_id FROM calls WHERE source_id = ?)""",
        [source_id],
    )
    return found, number


@pytest.mark.parametrize(("corpus", "rel", "loop"), CASES, ids=[f"{c}:{r}" for c, r, _ in CASES])
def test_each_labelled_span_is_found_where_it_is(
    stores: dict[str, tuple[Store, dict[str, int]]], corpus: str, rel: str, loop: bool
) -> None:
    store, ids = stores[corpus]
    found, number = _incidents(store, ids[rel])
    if not loop:
        wasted = [(d, float(w)) for d, _, _, _, w in found if w and w > 0]
        assert wasted == [], f"{rel}: a healthy run with waste"
        return
    assert number, f"{rel}: no call read"
    truth = json.loads((shared_samples() / corpus / "truth.json").read_text())["files"][rel]
    ranges = [
        (d, set(range(number[a], number[b] + 1)))
        for d, sev, a, b, _ in found
        if sev in ("medium", "high") and a in number and b in number
    ]
    covered = set().union(*(r for _, r in ranges)) if ranges else set()
    for span in _spans(truth["label"]):
        inside = covered & set(span)
        assert inside, f"{rel}: calls {span[0]}-{span[-1]} found by no incident"
        assert len(inside) / len(span) > 0.5, (
            f"{rel}: calls {span[0]}-{span[-1]}: {len(inside)} of {len(span)} covered"
        )
