"""Recall and false alarms on real runs recorded by other people: a table, file by file.

    python bench/recall.py                          # ../shared/samples/real-loops and real-world
    python bench/recall.py CORPUS [CORPUS ...]      # any folder with a truth.json beside its files

Each file named in a corpus's ``truth.json`` is audited on its own (a fresh store, every
detector), as a user would audit it. A file whose label says ``loop: true`` is found when an
incident of severity medium or high is in it; a file labelled healthy (``loop: false``, or every
file of a corpus whose truth has no labels, such as ``real-world``: 40 healthy sessions) raises a
false alarm when an incident with wasted dollars is in it. The table gives each file's label,
what was found (the detectors, the calls of the loop, the waste and its basis), its calls and its
spend; then the recall and the false alarms. Exit 1 when a labelled loop is missed or a healthy
file raises a false alarm.
"""

from __future__ import annotations

import argparse
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from analyzer import console  # noqa: E402
from analyzer.detect.detectors import bind_all, detect, discover  # noqa: E402
from analyzer.engine.store import open_store  # noqa: E402
from analyzer.ingest.base import IngestOptions  # noqa: E402
from analyzer.pipeline import ingest_paths  # noqa: E402

SAMPLES = HERE.parent.parent / "shared" / "samples"
DEFAULT = [SAMPLES / "real-loops", SAMPLES / "real-world"]


def audit(path: Path) -> dict[str, Any]:
    """One file on its own: its calls, spend and incidents (most wasted first)."""
    with open_store(":memory:") as store:
        ingest_paths(store, [str(path)], IngestOptions(progress=False))
        detect(store, bind_all(discover(), {}))
        calls, spend = store.con.execute(
            "SELECT count(*), coalesce(sum(cost_usd), 0) FROM live_calls"
        ).fetchall()[0]
        incidents = store.con.execute(
            """SELECT i.detector, i.severity, i.wasted_usd, i.cost_basis, i.n_calls,
                      f.seq, l.seq, i.evidence
               FROM incidents i
               LEFT JOIN calls f ON f.call_id = i.first_call_id
               LEFT JOIN calls l ON l.call_id = i.last_call_id
               ORDER BY i.wasted_usd DESC"""
        ).fetchall()
    return {"calls": int(calls), "usd": Decimal(spend), "incidents": incidents}


def _span(inc: tuple[Any, ...]) -> str:
    detector, _, _, _, n, first, last, evidence = inc
    ev = json.loads(evidence) if isinstance(evidence, str) else evidence
    if detector == "relaunch_same_failure":
        return f"runs {ev['first_run']}-{ev['last_run']}"
    if first is None:
        return f"{n} calls"
    return f"calls {first}-{last}"


def corpus_rows(corpus: Path) -> list[dict[str, Any]]:
    files: dict[str, Any] = json.loads((corpus / "truth.json").read_text())["files"]
    rows = []
    for rel in sorted(files):
        label = files[rel].get("label")
        loop = label.get("loop") if isinstance(label, dict) else False
        got = audit(corpus / rel)
        serious = [i for i in got["incidents"] if i[1] in ("medium", "high")]
        wasteful = [i for i in got["incidents"] if i[2]]
        if loop is True:
            verdict = "found" if serious else "MISSED"
        elif loop is False:
            verdict = "FALSE ALARM" if wasteful else "quiet"
        else:
            verdict = "(unlabelled)"
        found = "; ".join(
            f"{i[0]} {_span(i)} ${Decimal(i[2]):.4f} {i[3] or ''}".rstrip() for i in serious[:3]
        ) + (f"; +{len(serious) - 3} more" if len(serious) > 3 else "")
        kind = (label or {}).get("kind", "healthy") if isinstance(label, dict) else "healthy"
        rows.append(
            {
                "corpus": corpus.name,
                "file": rel,
                "label": str(kind)[:40],
                "loop": loop,
                "verdict": verdict,
                "found": found or "-",
                "calls": got["calls"],
                "usd": got["usd"],
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", type=Path, default=DEFAULT)
    args = parser.parse_args()
    with console.use(console.Console(quiet=True)):
        rows = [r for c in args.corpora for r in corpus_rows(c)]
    print(f"{'file':<58} {'label':<28} {'verdict':<12} {'calls':>6} {'spend':>9}  found")
    for r in rows:
        name = f"{r['corpus']}/{r['file']}"
        name = name if len(name) <= 58 else "…" + name[-57:]
        print(
            f"{name:<58} {r['label']:<28} {r['verdict']:<12} {r['calls']:>6} "
            f"{'$' + format(r['usd'], ',.2f'):>9}  {r['found']}"
        )
    loops = [r for r in rows if r["loop"] is True]
    healthy = [r for r in rows if r["loop"] is False]
    found = sum(r["verdict"] == "found" for r in loops)
    alarms = sum(r["verdict"] == "FALSE ALARM" for r in healthy)
    recall = found / len(loops) if loops else 1.0
    print(
        f"\nrecall: {found}/{len(loops)} labelled loops found ({recall:.0%}); "
        f"false alarms: {alarms} of {len(healthy)} healthy files"
    )
    return 0 if found == len(loops) and not alarms else 1


if __name__ == "__main__":
    sys.exit(main())
