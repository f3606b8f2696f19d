"""A command's time by stage, and what DuckDB itself takes to write what the ingest writes.

``bench/run.py`` runs the CSV audit once more with ``$LLM_FORENSICS_TIMINGS`` set
(``analyzer.engine.timings``: the seconds of each SQL unit, the process's wall time) and prints
it by stage: the ingest's SQL (and its largest unit), the detectors, the guard replay, the
report's other SQL, and the rest (start-up, Python, writing the page). Beside it, DuckDB's
floors for the ingest's two largest units, in the same run: copying the store's ``calls`` into
a new table of a copy of the store and checkpointing it (what ``store.sql`` writes, without its
expressions), and reading every column of the export into memory (what ``typed.sql`` reads,
before its checks).

    python bench/stages.py STORE TIMINGS.json [EXPORT.csv]   # the breakdown of a run made
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Stages, by the start of a unit's name (a detector by its name).
STAGES = (
    ("ingest: SQL", ("ingest/", "schema.sql", "classify.sql", "store/")),
    ("detectors", ("detect/", "detector ")),
    ("guard replay", ("guards/", "INSERT INTO lf_trips")),
    ("report: other SQL", ("report/", "views/", "outcomes.sql", "attribute.sql")),
)
OTHER_SQL = "other SQL"
REST = "the rest: start-up, Python, writing the page"


def stage_of(unit: str) -> str:
    for name, starts in STAGES:
        if unit.startswith(starts):
            return name
    return OTHER_SQL


def by_stage(timings: dict[str, Any], wall: float) -> list[tuple[str, float]]:
    """(stage, seconds) in ``STAGES`` order, then other SQL and the rest (``wall`` less all
    the SQL; ``wall`` is the process's time as the benchmark measured it)."""
    seconds: dict[str, float] = {}
    for unit, t in timings["units"].items():
        stage = stage_of(unit)
        seconds[stage] = seconds.get(stage, 0.0) + float(t["seconds"])
    sql = sum(seconds.values())
    order = [name for name, _ in STAGES] + [OTHER_SQL]
    return [(s, seconds.get(s, 0.0)) for s in order] + [(REST, max(0.0, wall - sql))]


def largest(timings: dict[str, Any], n: int = 5) -> list[tuple[str, float, int]]:
    """The ``n`` units that took longest: (unit, seconds, runs)."""
    units = [(u, float(t["seconds"]), int(t["runs"])) for u, t in timings["units"].items()]
    return sorted(units, key=lambda x: -x[1])[:n]


def write_floor(store: Path) -> tuple[float, int]:
    """DuckDB writing the store's calls again: ``CREATE TABLE ... AS SELECT * FROM calls`` and
    a checkpoint, in a copy of the store (seconds, rows)."""
    import duckdb

    with tempfile.TemporaryDirectory(prefix="lf-floor-") as tmp:
        copy = Path(tmp) / "floor.duckdb"
        shutil.copyfile(store, copy)
        con = duckdb.connect(str(copy))
        try:
            con.execute("SET enable_progress_bar = false")
            rows = int(con.execute("SELECT count(*) FROM calls").fetchall()[0][0])
            started = time.perf_counter()
            con.execute("CREATE TABLE lf_floor AS SELECT * FROM calls")
            con.execute("CHECKPOINT")
            return time.perf_counter() - started, rows
        finally:
            con.close()


def read_floor(csv: Path) -> float:
    """DuckDB reading every column of the export, typed by its own sniffing, into memory
    (``CREATE TEMP TABLE ... AS SELECT * FROM read_csv(...)``): what the ingest's typed.sql
    does before its checks (seconds)."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        started = time.perf_counter()
        con.execute("CREATE TEMP TABLE lf_floor AS SELECT * FROM read_csv(?)", [str(csv)])
        return time.perf_counter() - started
    finally:
        con.close()


def describe(
    timings: dict[str, Any],
    wall: float,
    scan: float,
    floor: tuple[float, int] | None,
    read: float | None = None,
) -> list[str]:
    """The lines the benchmark prints: each stage's seconds and its ratio to the CSV scan, the
    largest units, and DuckDB's floors for writing the calls and reading the export."""
    out = [f"  {'stage':<46} {'seconds':>8} {'x scan':>7}"]
    for stage, s in by_stage(timings, wall):
        out.append(f"  {stage:<46} {s:>8.2f} {s / scan:>7.2f}")
    out.append(f"  {'the whole command':<46} {wall:>8.2f} {wall / scan:>7.2f}")
    out.append("  largest SQL units:")
    for unit, s, runs in largest(timings):
        out.append(f"    {unit[:60]:<60} {s:>7.2f} s  ({runs} run{'s' if runs != 1 else ''})")
    if floor is not None:
        seconds, rows = floor
        out.append(
            f"  DuckDB's floor for writing the calls: {seconds:.2f} s to copy the store's "
            f"{rows:,} calls into a new table and checkpoint it ({seconds / scan:.2f}x scan)"
            + _against(timings, "ingest/bills/openrouter/store.sql", seconds)
        )
    if read is not None:
        out.append(
            f"  DuckDB's floor for reading the export: {read:.2f} s to read its every column "
            f"into memory ({read / scan:.2f}x scan)"
            + _against(timings, "ingest/bills/openrouter/typed.sql", read)
        )
    return out


def _against(timings: dict[str, Any], unit: str, floor: float) -> str:
    """``; <unit> took N s (Mx that)``, or nothing when the run has no such unit."""
    took = timings["units"].get(unit)
    if not took or floor <= 0:
        return ""
    name = unit.rsplit("/", 1)[-1]
    return (
        f"; the ingest's {name} took {took['seconds']:.2f} s ({took['seconds'] / floor:.2f}x that)"
    )


def main() -> None:
    store, path = Path(sys.argv[1]), Path(sys.argv[2])
    csv = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    timings = json.loads(path.read_text())
    wall = float(timings["wall_seconds"])
    read = read_floor(csv) if csv is not None else None
    print("\n".join(describe(timings, wall, 1.0, write_floor(store), read)))


if __name__ == "__main__":
    main()
