"""Recall on labelled loops, calls covered, false alarms and wasted dollars, per corpus and per
detector, on real runs recorded and labelled by other people.

    .venv/bin/python bench/recall.py                        # the five corpora (a few minutes)
    .venv/bin/python bench/recall.py --corpus real-loops-3  # one of them (repeatable)
    .venv/bin/python bench/recall.py --samples DIR --json recall.json --spans

The corpora are folders of ``--samples`` (default ``../shared/samples`` beside the project):
``real-loops``, ``real-loops-2`` and ``real-loops-3`` (runs with loops, labelled in their
``truth.json``, beside healthy runs of the same agents), ``real-world`` (40 healthy sessions: a
``truth.json`` with figures but no labels, so every file is healthy) and ``more-formats`` (no
``truth.json``: every file but the README is healthy, and counts for false alarms only).

The scoring is the CEO's, not ours: ``<samples>/../tools/spans_check.py`` is loaded at run time
with importlib and its functions are used as they are, to parse a label into spans
(``spans_of``), to map a truth's units (calls, tool calls, ``result`` lines) to the store's calls
or runs (``map_calls``, ``map_tool_calls``, ``map_result_lines``), to audit a file
(``audit``: ``llm-forensics audit FILE --json --db <tmp>/s.duckdb``, one throwaway store per
file) and to read the store (``Store``, ``incident_sets``). Importing it runs only its imports:
its fallback that re-executes itself under the tool's Python (reading ``sys.argv``) fires only
when ``duckdb`` cannot be imported, and this script imports ``duckdb`` first (run it with the
project's venv Python). Its ``main`` is never called; the loop of ``main`` over one file is
restated here (``score_file``) so that each incident can be attributed to its detector.

The rules (spans_check.py's and loops_check.py's):

* A file is audited alone. It is unread when the tool gives no JSON, or 0 calls where the
  truth has calls; an unread loop file counts its spans as not found.
* Labelled loops (file level, as loops_check.py): a file labelled ``loop: true`` is found when
  the audit has an incident of severity medium or high in it.
* Spans (as spans_check.py): each span of a ``loop: true`` file is found when an incident of
  severity medium or high overlaps it; its coverage is the share of its units inside any
  incident (an incident covers the store's calls from its first to its last, or for a span
  labelled in ``result`` lines, the runs ``first_run``-``last_run`` of its evidence: there a
  unit is a run, not a call); exact when one incident covers exactly the span. ``marginal``
  spans are not scored. A span that cannot be mapped is UNMAPPED and not found.
* False alarms: incidents with wasted dollars that overlap no labelled or marginal span of
  their file, and on a healthy file every incident with wasted dollars (not judged on a loop
  file whose spans could not be mapped).

Per detector: the scored spans it overlaps with an incident of severity medium or high, the
units of the scored spans its incidents cover, the false alarms it raised, and its wasted
dollars inside labelled (or marginal) spans and outside them: an incident's ``wasted_usd`` is
divided by its wasted calls (``incident_calls``): the share of their ``cost_usd`` (their number,
where they cost nothing) that falls inside a span. Dollars of a loop file whose spans could not
be mapped are "unjudged". For the general novelty detector ``no_progress`` (any detector name
is handled alike; it is listed even when it raised nothing) its share: the spans only it found
and the units only it covers.

The last line of a corpus is ``ok|short: <corpus>: ...`` (short: loops or spans found under
``--min-recall``, mean coverage under ``--min-coverage``, a false alarm, or an unread file).
The exit status is 0 whatever the figures (this is a bench, not a test); 2 when the tool,
spans_check.py or a corpus cannot be found or run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

try:
    import duckdb
except ImportError:  # pragma: no cover - the project's venv has it
    sys.exit("bench/recall.py needs duckdb: run it with the project's venv python")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SAMPLES = REPO.parent / "shared" / "samples"
CORPORA = ("real-loops", "real-loops-2", "real-loops-3", "real-world", "more-formats")
NOVELTY = "no_progress"
SERIOUS = ("medium", "high")
LABELS = (True, False, "marginal")


def load_spans_check(samples: Path) -> ModuleType:
    """The CEO's span scorer, kept beside the samples (``<samples>/../tools/spans_check.py``)."""
    path = samples.resolve().parent / "tools" / "spans_check.py"
    if not path.is_file():
        raise SystemExit(f"bench/recall.py: {path} is missing (the scoring rules are read there)")
    spec = importlib.util.spec_from_file_location("spans_check", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def find_tool(given: Path | None) -> Path:
    """The llm-forensics to audit with: ``--lf``, else the one beside this Python, else the
    project's venv, else the PATH; exit 2 when it cannot be run."""
    here = Path(sys.executable).parent / "llm-forensics"
    venv = REPO / ".venv" / "bin" / "llm-forensics"
    found = shutil.which("llm-forensics")
    options = [given] if given else [here, venv, Path(found) if found else None]
    for lf in options:
        if lf is not None and lf.is_file():
            lf = lf.absolute()  # spans_check runs it from a temporary folder
            try:
                ran = subprocess.run(
                    [str(lf), "--version"], capture_output=True, text=True, timeout=120
                )
            except OSError as e:
                raise SystemExit(f"bench/recall.py: {lf} cannot be run: {e}") from e
            if ran.returncode != 0:
                raise SystemExit(f"bench/recall.py: {lf} --version failed: {ran.stderr.strip()}")
            return lf
    raise SystemExit("bench/recall.py: no llm-forensics found (pip install -e . or give --lf)")


def corpus_files(folder: Path) -> tuple[list[tuple[str, dict[str, Any], Any]], bool]:
    """[(file, its truth, its label's loop)] and whether the corpus is labelled. A corpus whose
    truth has no labels (real-world), or without a truth.json (more-formats), is healthy."""
    truth = folder / "truth.json"
    if truth.is_file():
        files: dict[str, Any] = json.loads(truth.read_text(encoding="utf-8"))["files"]
        loops = {rel: _loop(t) for rel, t in files.items()}
        labelled = any(v in LABELS for v in loops.values())
        rows = [(rel, t, loops[rel] if labelled else False) for rel, t in sorted(files.items())]
        return rows, labelled
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "README.md")
    return [(str(p.relative_to(folder)), {}, False) for p in paths], False


def _loop(t: dict[str, Any]) -> Any:
    label = t.get("label")
    return label.get("loop") if isinstance(label, dict) else None


def _wasted_calls(db: str) -> dict[str, list[tuple[str, float, int | None]]]:
    """incident id -> [(wasted call, its cost, the seq of its run)]."""
    con = duckdb.connect(db, read_only=True)
    try:
        rows = con.execute(
            """SELECT ic.incident_id, ic.call_id, coalesce(CAST(c.cost_usd AS DOUBLE), 0), r.seq
               FROM incident_calls ic
               LEFT JOIN calls c USING (call_id)
               LEFT JOIN (SELECT source_id, session_id, stream_key, min(seq) AS seq
                          FROM runs GROUP BY ALL) r
                 ON r.source_id = c.source_id AND r.session_id = c.session_id
                AND r.stream_key = c.stream_key
               ORDER BY ic.incident_id, ic.call_id"""
        ).fetchall()
    finally:
        con.close()
    out: dict[str, list[tuple[str, float, int | None]]] = defaultdict(list)
    for iid, cid, cost, run in rows:
        out[iid].append((cid, float(cost), run))
    return out


def audit(sc: ModuleType, lf: Path, path: Path, t: dict[str, Any], res: dict[str, Any]) -> Any:
    """``path`` audited alone in a throwaway store, as spans_check.py does: its store (read into
    spans_check's ``Store``) and its wasted calls, or None with ``res["unread"]`` said."""
    if not path.exists():
        res["unread"] = "missing"
        return None
    with tempfile.TemporaryDirectory() as d:
        try:
            a, p = sc.audit(str(lf), path, d)
        except subprocess.TimeoutExpired:
            a, p = None, None
        if a is None or (t.get("calls") and not a.get("calls")):
            err = (p.stderr.strip().splitlines() or [""])[-1] if p else "timed out"
            err = err.replace(f"Error: {path}: ", "").split(" (expected")[0][:80]
            res["unread"] = f"exit {p.returncode if p else '-'}: {err}"
            return None
        return sc.Store(f"{d}/s.duckdb"), _wasted_calls(f"{d}/s.duckdb")


def units_of(unit: str, inc: tuple[Any, ...]) -> set[int]:
    """What an incident of ``incident_sets`` covers: for a span labelled in result lines the
    runs of its evidence (first_run-last_run), else the store's calls from its first to its last
    (their positions)."""
    if unit == "result_lines":
        return set(range(inc[4][0], inc[4][1] + 1)) if inc[4] else set()
    return set(inc[3])


def score_span(span: dict[str, Any], per_unit: list[int | None], incs: list[Any]) -> list[int]:
    """spans_check's figures of one mapped span (``per_unit``: the store's call position or run
    of each of its units), by detector; the incidents that overlap it."""
    unit = span["unit"]
    want = {u for u in per_unit if u is not None}
    over = [j for j, inc in enumerate(incs) if units_of(unit, inc) & want]
    covered_by: dict[str, set[int]] = defaultdict(set)
    for j in over:
        got = units_of(unit, incs[j])
        covered_by[incs[j][0]].update(k for k, u in enumerate(per_unit) if u in got)
    whole = set(per_unit) if per_unit and None not in per_unit else None
    span.update(
        mapped=True,
        found_by=sorted({incs[j][0] for j in over if incs[j][1] in SERIOUS}),
        overlaps=[f"{incs[j][0]} ({incs[j][1]}) ${incs[j][2]:.4f}" for j in over],
        covered=len(set().union(*covered_by.values())),
        covered_by={d: len(ks) for d, ks in sorted(covered_by.items())},
        covered_only={
            d: len(ks - set().union(*(v for o, v in covered_by.items() if o != d)))
            for d, ks in sorted(covered_by.items())
        },
        exact=any(units_of(unit, incs[j]) == whole for j in over),
    )
    span["found"] = bool(span["found_by"])
    return over


def waste_inside(calls: list[tuple[int | None, float, int | None]], inside: set[Any]) -> float:
    """The share of an incident's waste inside the spans: of its wasted calls' cost (of their
    number where they cost nothing); a call is inside by its position or by its run."""
    hits = [(cost, pos in inside or ("run", run) in inside) for pos, cost, run in calls]
    total = sum(c for c, _ in hits)
    if total > 0:
        return sum(c for c, hit in hits if hit) / total
    return sum(hit for _, hit in hits) / len(hits)


def score_file(
    sc: ModuleType, lf: Path, folder: Path, rel: str, t: dict[str, Any], loop: Any
) -> dict[str, Any]:
    """One file audited alone and scored by spans_check's rules, each incident attributed to
    its detector (a dict; see the module's docstring)."""
    label = t.get("label") if isinstance(t.get("label"), dict) else {}
    res: dict[str, Any] = {"file": rel, "loop": loop, "unread": None, "spans": []}
    res["incidents"], res["loop_found"], res["unjudged"] = [], False, False
    spans, why = sc.spans_of(label, t) if loop is not False else ([], None)
    path = (folder / rel).absolute()
    got = audit(sc, lf, path, t, res)
    if got is None:
        # spans_check: an unread loop file's spans are scored as not found (a label it cannot
        # parse as one), and left out of the mean coverage
        if loop is True:
            res["spans"] = [
                {"display": s[2] if s else "(the file)", "units": len(s[1]) if s else 0}
                | {"scored": True, "mapped": False, "unread": True}
                for s in spans or [None]
            ]
        return res
    st, wasted = got
    incs = st.incident_sets()
    res["loop_found"] = any(i[1] in SERIOUS for i in incs)
    maps: dict[str, Any] = {}
    for unit in sorted({u for u, _, _ in spans or []}):
        try:
            if unit == "calls":
                maps[unit] = sc.map_calls(rel.split("/")[0], path, t, st)
            elif unit == "tool_calls":
                maps[unit] = sc.map_tool_calls(rel.split("/")[0], path, t, st)
            else:
                maps[unit] = sc.map_result_lines(path, st)
        except ValueError as e:
            maps[unit] = (None, str(e))
    res["mapping"] = "; ".join(f"{u}: {maps[u][1]}" for u in maps)
    if spans is None:
        res["spans"].append(
            {"display": f"UNMAPPED ({why})", "units": 0, "scored": loop is True, "mapped": False}
        )
        spans = []
    touched: set[int] = set()  # the incidents that overlap a labelled or marginal span
    inside: set[Any] = set()  # the store's calls (positions) and ("run", seq) inside one
    for unit, nums, disp in spans:
        m, note = maps[unit]
        span: dict[str, Any] = {"display": disp, "unit": unit, "units": len(nums)}
        span["scored"] = loop is True
        res["spans"].append(span)
        if m is None:
            span.update(mapped=False, note=note)
            continue
        per_unit = [m.get(k) for k in nums]
        tag = (lambda u: ("run", u)) if unit == "result_lines" else (lambda u: u)
        inside.update(tag(u) for u in per_unit if u is not None)
        touched.update(score_span(span, per_unit, incs))
        span["not_loaded"] = per_unit.count(None)
    # spans_check judges no false alarm where a loop file's spans could not be mapped
    unjudged = loop is not False and (any(maps[u][0] is None for u in maps) or not spans)
    res["unjudged"] = unjudged
    for j, (det, sev, waste, cs, _) in enumerate(incs):
        calls = [(st.pos.get(cid), cost, run) for cid, cost, run in wasted.get(st.inc[j][0], [])]
        share = waste_inside(calls, inside) if calls else float(j in touched)
        res["incidents"].append(
            {
                "detector": det,
                "severity": sev,
                "wasted_usd": waste,
                "in_spans_usd": 0.0 if unjudged else waste * share,
                "outside_usd": 0.0 if unjudged else waste * (1 - share),
                "unjudged_usd": waste if unjudged else 0.0,
                "false_alarm": waste > 0 and j not in touched and not unjudged,
                "store_calls": f"{min(cs) + 1}-{max(cs) + 1}" if cs else "",
            }
        )
    return res


def scored_or_failed(
    sc: ModuleType, lf: Path, folder: Path, rel: str, t: dict[str, Any], loop: Any
) -> dict[str, Any]:
    """``score_file``, or the file unread with the error that stopped its scoring (a store
    spans_check.py cannot read, say): one file's error does not end the bench."""
    started = time.monotonic()
    try:
        scored = score_file(sc, lf, folder, rel, t, loop)
        scored["seconds"] = round(time.monotonic() - started, 1)
        return scored
    except Exception as e:
        res: dict[str, Any] = {"file": rel, "loop": loop, "unread": f"{type(e).__name__}: {e}"}
        res |= {"spans": [], "incidents": [], "loop_found": False, "unjudged": False}
        if loop is True:
            res["spans"] = [{"display": "(the file)", "units": 0, "scored": True, "unread": True}]
        return res


def summarise(
    name: str,
    rows: list[tuple[str, dict[str, Any], Any]],
    results: list[dict[str, Any]],
    labelled: bool,
) -> dict[str, Any]:
    """A corpus's figures from its files' results (spans_check's and loops_check's counts)."""
    loops = [r for r in results if r["loop"] is True]
    scored = [s for r in results for s in r["spans"] if s["scored"]]
    found = [s for s in scored if s.get("found")]
    covs = [s.get("covered", 0) / s["units"] if s["units"] else 0.0 for s in scored]
    covs = [c for c, s in zip(covs, scored, strict=True) if not s.get("unread")]
    alarms = [(r["file"], i) for r in results for i in r["incidents"] if i["false_alarm"]]
    dets: dict[str, dict[str, Any]] = {}

    def det(d: str) -> dict[str, Any]:
        return dets.setdefault(
            d,
            {
                "incidents": 0,
                "spans_found": 0,
                "spans_only": 0,
                "calls_covered": 0,
                "calls_only": 0,
                "false_alarms": 0,
                "wasted_in_spans_usd": 0.0,
                "wasted_outside_usd": 0.0,
                "wasted_unjudged_usd": 0.0,
            },
        )

    for r in results:
        for i in r["incidents"]:
            x = det(i["detector"])
            x["incidents"] += 1
            x["false_alarms"] += i["false_alarm"]
            x["wasted_in_spans_usd"] += i["in_spans_usd"]
            x["wasted_outside_usd"] += i["outside_usd"]
            x["wasted_unjudged_usd"] += i["unjudged_usd"]
    for s in scored:
        for d in s.get("found_by", []):
            det(d)["spans_found"] += 1
        if s.get("found_by") and len(s["found_by"]) == 1:
            det(s["found_by"][0])["spans_only"] += 1
        for d, n in s.get("covered_by", {}).items():
            det(d)["calls_covered"] += n
            det(d)["calls_only"] += s["covered_only"][d]
    det(NOVELTY)
    unread = [r for r in results if r["unread"]]
    loops_found = sum(1 for r in loops if r["loop_found"] and not r["unread"])
    return {
        "corpus": name,
        "labelled": labelled,
        "files": len(rows),
        "loops": len(loops),
        "marginal": sum(1 for _, _, v in rows if v == "marginal"),
        "healthy": sum(1 for _, _, v in rows if v is False),
        "unlabelled": sum(1 for _, _, v in rows if v not in LABELS),
        "loops_found": loops_found,
        "spans": len(scored),
        "spans_found": len(found),
        "spans_exact": sum(1 for s in scored if s.get("exact")),
        "unmapped": sum(1 for s in scored if not s.get("mapped") and not s.get("unread")),
        "mean_coverage": sum(covs) / len(covs) if covs else 0.0,
        "calls": sum(s["units"] for s in scored),
        "calls_covered": sum(s.get("covered", 0) for s in scored),
        "run_spans": sum(1 for s in scored if s.get("unit") == "result_lines"),
        "false_alarms": len(alarms),
        "false_alarm_files": len({f for f, _ in alarms}),
        "unread": len(unread),
        "wasted_in_spans_usd": sum(x["wasted_in_spans_usd"] for x in dets.values()),
        "wasted_outside_usd": sum(x["wasted_outside_usd"] for x in dets.values()),
        "wasted_unjudged_usd": sum(x["wasted_unjudged_usd"] for x in dets.values()),
        "detectors": dict(sorted(dets.items())),
        "notes": _notes(results),
        "results": results,
    }


def _notes(results: list[dict[str, Any]]) -> list[str]:
    notes = []
    for r in results:
        short = r["file"].split("/")[-1]
        if r["unread"]:
            notes.append(f"unread {r['file']} ({r['unread']})")
            continue
        if r["loop"] is True and not r["loop_found"]:
            notes.append(f"missed loop {short} (no incident of severity medium or high)")
        for s in r["spans"]:
            if s["scored"] and not s.get("mapped"):
                notes.append(f"UNMAPPED {short}: {s['display']} {s.get('note', '')}".rstrip())
        for i in r["incidents"]:
            if i["false_alarm"]:
                notes.append(
                    f"false alarm {short}: {i['detector']} ({i['severity']}) "
                    f"${i['wasted_usd']:.4f} store calls {i['store_calls']}"
                )
    return notes


def is_ok(c: dict[str, Any], min_recall: float, min_cov: float) -> bool:
    loops = c["loops_found"] >= min_recall * c["loops"]
    spans = not c["spans"] or (
        c["spans_found"] >= min_recall * c["spans"] and c["mean_coverage"] >= min_cov
    )
    return loops and spans and not c["false_alarms"] and not c["unread"]


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({a / b:.0%})" if b else f"{a}/{b}"


def print_corpus(c: dict[str, Any], show_spans: bool) -> None:
    kinds = f"{c['loops']} loops, {c['marginal']} marginal, {c['healthy']} healthy"
    kinds += f", {c['unlabelled']} unlabelled" if c["unlabelled"] else ""
    if not c["labelled"]:
        kinds = "no labels: every file healthy"
    print(f"== {c['corpus']}: {c['files']} files ({kinds})")
    if c["loops"]:
        print(
            f"  labelled loops found {_pct(c['loops_found'], c['loops'])} "
            "(file level: an incident of severity medium or high in the file)"
        )
    if c["spans"]:
        print(
            f"  spans found {_pct(c['spans_found'], c['spans'])}, {c['spans_exact']} exact, "
            f"{c['unmapped']} unmapped; mean coverage {c['mean_coverage']:.0%}; "
            f"calls covered {_pct(c['calls_covered'], c['calls'])}"
            + (" (of a span in result lines: runs)" if c["run_spans"] else "")
        )
    print(
        f"  false alarms {c['false_alarms']} (on {c['false_alarm_files']} files); "
        f"unread {c['unread']}; wasted ${c['wasted_in_spans_usd']:.4f} inside labelled spans, "
        f"${c['wasted_outside_usd']:.4f} outside"
        + (f", ${c['wasted_unjudged_usd']:.4f} unjudged" if c["wasted_unjudged_usd"] else "")
    )
    head = ("detector", "incidents", "spans found", "calls covered", "false alarms")
    print(f"  {head[0]:<28}{head[1]:>9}{head[2]:>13}{head[3]:>16}{head[4]:>13}", end="")
    print(f"{'wasted in spans':>17}{'wasted outside':>16}")
    for name, x in c["detectors"].items():
        print(
            f"  {name:<28}{x['incidents']:>9}{x['spans_found']:>8}/{c['spans']:<4}"
            f"{x['calls_covered']:>10}/{c['calls']:<5}{x['false_alarms']:>13}"
            f"{'$' + format(x['wasted_in_spans_usd'], '.4f'):>17}"
            f"{'$' + format(x['wasted_outside_usd'], '.4f'):>16}"
            + ("  (absent: no incident)" if not x["incidents"] else "")
        )
    n = c["detectors"][NOVELTY]
    print(
        f"  {NOVELTY} share: spans only it found {n['spans_only']} of {c['spans_found']} "
        f"found, calls only it covers {n['calls_only']} of {c['calls_covered']} covered"
        + ("" if n["incidents"] else f" ({NOVELTY} raised no incident)")
    )
    for note in c["notes"]:
        print(f"  {note}")
    if show_spans:
        for r in c["results"]:
            for s in r["spans"]:
                if not s.get("mapped"):
                    continue
                status = ("exact" if s["exact"] else "found") if s["found"] else "missed"
                print(
                    f"  {r['file'].split('/')[-1]} {s['display']}: {status}, coverage "
                    f"{s['covered']}/{s['units']}; {'; '.join(s['overlaps']) or 'no incident'}"
                    + ("" if s["scored"] else " (marginal: not scored)")
                )
    found = f"{c['healthy']} healthy files"
    if c["loops"] or c["spans"]:
        found = f"labelled loops found {c['loops_found']}/{c['loops']}, spans found "
        found += f"{_pct(c['spans_found'], c['spans'])}, mean coverage {c['mean_coverage']:.0%}"
    print(
        f"{'ok' if c['ok'] else 'short'}: {c['corpus']}: {found}, "
        f"false alarms {c['false_alarms']}, unread {c['unread']}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--samples", type=Path, default=SAMPLES, help="the corpora's folder")
    ap.add_argument(
        "--corpus", action="append", default=None, help=f"a corpus (repeatable; {CORPORA})"
    )
    ap.add_argument("--lf", type=Path, default=None, help="the llm-forensics to run")
    ap.add_argument("--jobs", type=int, default=2, help="files audited at a time (2)")
    ap.add_argument("--min-recall", type=float, default=0.9, help="short under this (0.9)")
    ap.add_argument("--min-coverage", type=float, default=0.5, help="short under this (0.5)")
    ap.add_argument("--spans", action="store_true", help="print every span's line as well")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    a = ap.parse_args(argv)
    names = a.corpus or list(CORPORA)
    folders = [a.samples / n for n in names]
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        print(f"bench/recall.py: no corpus at {', '.join(missing)}", file=sys.stderr)
        return 2
    sc = load_spans_check(a.samples)
    lf = find_tool(a.lf)
    started = time.monotonic()
    plan = [(f, corpus_files(f)) for f in folders]
    jobs = [(f, rel, t, loop) for f, (rows, _) in plan for rel, t, loop in rows if loop in LABELS]
    corpora = []
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        done = pool.map(lambda j: scored_or_failed(sc, lf, *j), jobs)  # in order
        for folder, (rows, labelled) in plan:
            results = [next(done) for _, _, loop in rows if loop in LABELS]
            c = summarise(folder.name, rows, results, labelled)
            c["ok"] = is_ok(c, a.min_recall, a.min_coverage)
            corpora.append(c)
            print_corpus(c, a.spans)
            sys.stdout.flush()
    took = time.monotonic() - started
    print(f"({len(jobs)} files audited in {took:.0f} s, {a.jobs} at a time, with {lf})")
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "samples": str(a.samples.resolve()),
                    "tool": str(lf),
                    "seconds": round(took, 1),
                    "corpora": corpora,
                },
                indent=1,
                default=str,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
