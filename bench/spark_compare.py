"""The benchmark's Spark part: ``detect`` on DuckDB and ``detect --engine spark`` (local mode,
every core of this machine) over the same sample export, at two sizes; the incidents must be
the same, and the two times are given side by side. From the two sizes, a line: a fixed cost
(the JVM, the session, planning nine queries) and a cost per call, in core-seconds; from that,
on paper, what a cluster would take for a billion calls.

The estimate assumes the work per call stays what it is here and spreads evenly over the
cluster's cores (the detectors partition by stream, so it does while no one stream dominates);
it leaves out the network cost of the shuffles and a cluster's own start-up. It is an order of
magnitude, not a promise.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

CLUSTERS = [(10, 8), (50, 8), (200, 8)]  # (workers, cores each)
BILLION = 1_000_000_000


def _key(i: dict[str, Any]) -> tuple[Any, ...]:
    """What both engines must agree on: the incident, its calls, counts, dollars to the cent."""
    return (
        i["incident_id"],
        i["detector"],
        i["n_calls"],
        round(i["wasted_usd"], 2),
        i["first_call_id"],
        i["last_call_id"],
        i["severity"],
    )


def why_not() -> str | None:
    """Why Spark cannot run here (None if it can): the tool's own check."""
    from analyzer.detect.spark_engine import why_not as reason

    return reason()


def compare(
    work: Path,
    sizes: list[int],
    repeat: int,
    env: dict[str, str],
    cli: list[str],
    run: Any,
    measure: Any,
) -> dict[str, Any]:
    """Measure both engines at each size (the sample export of that many rows, ingested and
    exported once); returns the stages, the fit and the estimate. Exits 1 if they disagree."""
    stages: list[dict[str, Any]] = []
    points: dict[str, list[tuple[int, float]]] = {"duckdb": [], "spark": []}
    for rows in sizes:
        folder = work / f"spark-{rows}"
        csv = folder / "sample" / "openrouter_activity_2025-12.csv"
        db, lake = folder / "store.duckdb", folder / "lake"
        done = folder / "ready"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            run([*cli, "sample", "-o", str(folder / "sample"), "--rows", str(rows)], env=env)
            run([*cli, "ingest", "--db", str(db), str(csv), "-q"], env=env)
            done.touch()
        export = measure(
            f"export --parquet ({rows:,} rows)",
            [*cli, "export", "--db", str(db), "--parquet", str(lake), "-q"],
            1,
            before=lambda lake=lake: shutil.rmtree(lake, ignore_errors=True),
            env=env,
        )
        duck = measure(
            f"detect, DuckDB ({rows:,} rows)",
            [*cli, "detect", "--db", str(db), "--json"],
            repeat,
            env=env,
        )
        spark = measure(
            f"detect --engine spark, local[*] ({rows:,} rows)",
            [
                *cli,
                "detect",
                "--db",
                str(db),
                "--engine",
                "spark",
                "--parquet",
                str(lake),
                "--json",
            ],
            repeat,
            env=env,
        )
        on_duck = sorted(map(_key, json.loads(duck["output"])))
        on_spark = sorted(map(_key, json.loads(spark["output"])))
        if on_duck != on_spark:
            print(
                f"bench: at {rows:,} rows Spark found {on_spark}, DuckDB {on_duck}", file=sys.stderr
            )
            sys.exit(1)
        for s in (export, duck, spark):
            s["incidents"] = len(on_duck)
        stages += [export, duck, spark]
        points["duckdb"].append((rows, duck["seconds"]))
        points["spark"].append((rows, spark["seconds"]))
    return {"stages": stages, "same_incidents": True, **_estimate(points["spark"])}


def _estimate(points: list[tuple[int, float]]) -> dict[str, Any]:
    """The line through the two sizes, and the billion-call estimate from it."""
    (n1, t1), (n2, t2) = points[0], points[-1]
    cores = os.cpu_count() or 1
    per_call = max((t2 - t1) / (n2 - n1), 0.0) if n2 != n1 else t2 / n2
    fixed = max(t1 - per_call * n1, 0.0)
    core_s_per_million = per_call * cores * 1_000_000
    clusters = [
        {
            "workers": w,
            "cores_each": c,
            "seconds": round(fixed + BILLION * per_call * cores / (w * c), 0),
        }
        for w, c in CLUSTERS
    ]
    return {
        "spark_fixed_seconds": round(fixed, 1),
        "spark_core_seconds_per_million_calls": round(core_s_per_million, 1),
        "billion_calls": clusters,
    }


def describe(result: dict[str, Any]) -> list[str]:
    cores = os.cpu_count() or 1
    lines = [
        f"Spark, local[*] on {cores} cores: {result['spark_fixed_seconds']} s fixed, "
        f"{result['spark_core_seconds_per_million_calls']} core-seconds per million calls",
        "  on paper, 1 billion calls (no shuffle network cost, no skew, no cluster start-up):",
    ]
    for c in result["billion_calls"]:
        lines.append(
            f"    {c['workers']:>4} workers x {c['cores_each']} cores: "
            f"~{c['seconds'] / 60:,.0f} min"
        )
    return lines
