"""The main job, step by step: ingest -> link (bills <-> logs) -> detect -> guards -> report.

``audit`` runs them all; the single commands run one step each, through the same functions, so
a step behaves the same whichever command runs it. Each step reuses what the store kept of an
earlier run when nothing it was computed from has changed (``analyzer.cache``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.backtest import GuardRun, guard_run
from analyzer.console import progress
from analyzer.detect import Selection, detect
from analyzer.guards import Policy
from analyzer.incident import Incident
from analyzer.ingest.base import IngestOptions
from analyzer.ingest.flow import FileReport, load_paths
from analyzer.link import link_if_needed
from analyzer.pages import write_report
from analyzer.store import Store
from analyzer.summary import Summary, build_summary, warn_unpriced

BIG_STORE = 500_000  # calls from which audit shows the progress of its steps (on a terminal)


def ingest_paths(store: Store, paths: list[str], options: IngestOptions) -> list[FileReport]:
    """Load every file under ``paths`` (each all-or-nothing; the first error stops), then link
    the logged calls to the billing rows of the same calls."""
    reports = load_paths(store, paths, options)
    link_if_needed(store, loaded=any(r.status == "loaded" for r in reports))
    return reports


@dataclass
class Audit:
    """What one ``audit`` run did and found."""

    reports: list[FileReport]
    summary: Summary
    guards: GuardRun
    written: Path | None = None
    incidents: list[Incident] = field(default_factory=list)


def audit(
    store: Store,
    paths: list[str],
    options: IngestOptions,
    selection: Selection,
    policies: list[Policy],
    output: Path | None = None,
    report_format: str = "html",
    top_incidents: int = 20,
    top: int = 10,
    on_files: Callable[[list[FileReport]], None] | None = None,
) -> Audit:
    """Ingest, detect, replay the guards, and (with ``output``) write the report. Unchanged
    data, detectors and policies: the results kept in the store are reused."""
    reports = ingest_paths(store, paths, options)
    if on_files is not None:
        on_files(reports)
    big = options.progress and int(store.scalar("SELECT count(*) FROM calls")) >= BIG_STORE
    with progress("audit", store.con.query_progress, big) as shown:
        shown.stage("detecting")
        detect(store, selection, reuse=True)
        summary = build_summary(store, top=top)
        warn_unpriced(summary)
        shown.stage("replaying guards")
        guards = guard_run(store, policies, reuse=True)
        if output is not None:
            shown.stage("writing the report")
            write_report(store, output, report_format, top_incidents, summary, guards, top=top,
                         reuse=True)  # fmt: skip
    return Audit(reports, summary, guards, output, summary.incidents)


def report(
    store: Store,
    output: Path,
    report_format: str,
    top_incidents: int,
    policies: list[Policy],
) -> Path:
    """Write the report of what the store holds (the guards replayed, or reused)."""
    guards = guard_run(store, policies, reuse=True)
    return write_report(store, output, report_format, top_incidents, guards=guards, reuse=True)
