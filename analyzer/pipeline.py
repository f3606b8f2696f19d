"""The main job, step by step: ingest -> link (bills <-> logs) -> detect -> guards -> report.

``audit`` runs them all; the single commands run one step each, through the same functions, so
a step behaves the same whichever command runs it. Each step reuses what the store kept of an
earlier run when nothing it was computed from has changed (``analyzer.engine.cache``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from analyzer.console import Progress, note, progress, use
from analyzer.detect.detectors import Selection, detect, load_incidents, select
from analyzer.detect.link import link_if_needed
from analyzer.engine.store import Store
from analyzer.errors import NothingFound
from analyzer.guards.policy import Policy
from analyzer.ingest.base import IngestOptions
from analyzer.load import usage_first
from analyzer.load.flow import FileReport, Loaded, find_files, load_files
from analyzer.load.inputs import Inputs as Inputs
from analyzer.load.inputs import default_inputs as default_inputs
from analyzer.load.inputs import refreshed
from analyzer.load.interrupts import LINKING, Run
from analyzer.model.incident import Incident
from analyzer.model.timewindow import Window
from analyzer.views.audit import Summary, build_summary, warn_unpriced

if TYPE_CHECKING:  # the guards and the page are imported where used (ingest does without)
    from analyzer.guards.backtest import GuardRun

P = ParamSpec("P")
R = TypeVar("R")


def on_its_console(step: Callable[Concatenate[Store, P], R]) -> Callable[Concatenate[Store, P], R]:
    """A step says what it says (warnings, notes, progress) on the console of its store: the
    one the store's opener gave it (the command line's, the API's)."""

    @wraps(step)
    def run(store: Store, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with use(store.console):
            return step(store, *args, **kwargs)

    return run


# Calls from which the steps after loading show what they are doing (on a terminal, unless
# --quiet): below it every step takes well under a second.
BIG_STORE = 10_000


@on_its_console
def ingest_paths(store: Store, inputs: Inputs | list[str], options: IngestOptions) -> Loaded:
    """Load every file of ``inputs`` (each all-or-nothing; the first error stops), then link
    the logged calls to the billing rows of the same calls. Says on stderr what it reads;
    finding no recognised input is an error naming what it looked at."""
    if isinstance(inputs, list):
        inputs = Inputs(inputs)
    if not inputs.paths:
        places = ", ".join(inputs.absent) or "none known"
        raise NothingFound(
            f"no input given, and no agent logs in their default places ({places}: not "
            "there); give a file or folder, e.g. `llm-forensics audit exports/`"
        )
    run = Run(store)  # Ctrl-C says what the store holds of this run, at every step
    with run.said_on_ctrl_c():
        walk = find_files(inputs.paths, options, inputs.labels)
        if inputs.defaults:
            said = inputs.places(Counter(f.top for f in walk.files))
            note("reading " + _first_in_full(said))
        reports = Loaded(
            load_files(store, walk.files, options, run) + walk.unreadable, walk.hidden_skipped
        )
        if not any(r.status in ("loaded", "unchanged", "read_with") for r in reports):
            raise NothingFound(_nothing(inputs, reports, walk.hidden_skipped))
        run.step = LINKING
        _say_no_calls(reports)
        _say_unknown_data(reports)
        if walk.hidden_skipped:
            note(f"skipped hidden folders: {_some(walk.hidden_skipped)} (name one to read it)")
        link_if_needed(store, loaded=any(r.status == "loaded" for r in reports))
    return reports


@on_its_console
def refresh(store: Store, inputs: Inputs, options: IngestOptions, incidents: bool) -> Loaded:
    """Bring the default store up to date with the agents' default places before a command
    given no input: new and grown files are read, unchanged ones are not (their path, size
    and modification time are known), files gone from disk stay in the store. Says in one
    line what it read; with ``incidents``, the detectors then run over what changed (their
    results are reused when nothing did)."""
    if not inputs.paths:
        places = ", ".join(inputs.absent) or "none known"
        note(f"refresh: no agent logs in their default places ({places}: not there)")
        return Loaded([], [])
    before = {str(p) for (p,) in store.engine.rows("SELECT DISTINCT path FROM sources")}
    usage = usage_first.paths(store) if options.content else frozenset()
    run = Run(store)
    with run.said_on_ctrl_c():
        walk = find_files(inputs.paths, options, inputs.labels)
        reports = Loaded(
            load_files(store, walk.files, options, run) + walk.unreadable, walk.hidden_skipped
        )
        run.step = LINKING
        link_if_needed(store, loaded=any(r.status == "loaded" for r in reports))
    note(refreshed(reports, before, inputs.places(), usage))
    _say_unknown_data(reports)
    if incidents:
        with stages(store, "refresh", options.progress) as shown:
            shown.stage("detecting")
            detect(store, select(), reuse=True)
    return reports


NO_CALLS_SHOWN = 5  # files with no calls named one a line; the rest counted


def _say_no_calls(reports: list[FileReport]) -> None:
    """Name each log that was read but holds no call, and why (``X: recognised as Y, 0 calls:
    why``): a file read to no effect is never a silent "loaded"."""
    from analyzer.formats import format_by_name

    # (A file of a kind that never holds calls, such as a session manifest, is said only
    # with --verbose.)
    empty = [
        r for r in reports if r.status == "loaded" and r.calls == 0 and r.reason and not r.expected
    ]
    lines = [
        f"{r.path}: recognised as {format_by_name(r.format).title if r.format else '?'}, "
        f"0 calls: {r.reason}"
        for r in empty
    ]
    _say_first(lines, "files with no calls")


def _say_unknown_data(reports: list[FileReport]) -> None:
    """Name each file of data no reader recognises, in one line (it is input not read)."""
    unknown = [r for r in reports if r.status == "unrecognised" and r.data]
    _say_first(
        [f"{r.path}: not read: {r.reason}" for r in unknown], "files of data no reader recognises"
    )


def _say_first(lines: list[str], what: str) -> None:
    """The first ``NO_CALLS_SHOWN`` of ``lines``, then how many more ``what`` there are."""
    for line in lines[:NO_CALLS_SHOWN]:
        note(line)
    if len(lines) > NO_CALLS_SHOWN:
        note(f"and {len(lines) - NO_CALLS_SHOWN:,} more {what} (--verbose lists every file)")


def _first_in_full(said: list[str]) -> str:
    """``412 files from A, 38 from B``."""
    return ", ".join(
        s if i == 0 else s.replace(" files from", " from").replace(" file from", " from")
        for i, s in enumerate(said)
    )


def _some(items: list[str], n: int = 4) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n:,} more" if len(items) > n else "")


def _nothing(inputs: Inputs, reports: list[FileReport], hidden: list[str]) -> str:
    """Why nothing was read, in one line: what was looked at, and why each was passed over."""
    where = ", ".join(inputs.labels.get(p, p) for p in inputs.paths)
    why: list[str] = []
    if not reports:
        why.append("no files in it" if len(inputs.paths) == 1 else "no files in them")
    unknown = [r.path for r in reports if r.status == "unrecognised"]
    unreadable = [r.path for r in reports if r.status == "unreadable"]
    failed = [r.path for r in reports if r.status == "failed"]
    if failed:
        why.append(f"{len(failed):,} could not be loaded ({_some(failed, 3)}; said above)")
    if unknown:
        why.append(f"{len(unknown):,} not a recognised format ({_some(unknown, 3)})")
    if unreadable:
        why.append(f"{len(unreadable):,} cannot be read ({_some(unreadable, 3)})")
    if hidden:
        why.append(f"hidden folders skipped ({_some(hidden, 3)})")
    return f"no recognised input in {where}: " + "; ".join(why)


@dataclass
class Audit:
    """What one ``audit`` run did and found."""

    reports: list[FileReport]
    summary: Summary
    guards: GuardRun
    written: Path | None = None
    incidents: list[Incident] = field(default_factory=list)


@on_its_console
def audit(
    store: Store,
    inputs: Inputs | list[str],
    options: IngestOptions,
    selection: Selection,
    policies: list[Policy],
    output: Path | None = None,
    report_format: str = "html",
    top_incidents: int = 20,
    top: int = 10,
    on_files: Callable[[list[FileReport]], None] | None = None,
    window: Window | None = None,
) -> Audit:
    """Ingest, detect, replay the guards, and (with ``output``) write the report, over the
    calls in ``window`` (all by default). Unchanged data, detectors and policies: the results
    kept in the store are reused."""
    from analyzer.guards.backtest import guard_run
    from analyzer.report.pages import write_report

    reports = ingest_paths(store, inputs, options)
    if on_files is not None:
        on_files(reports)
    if window:
        store.restrict(window.predicate(), window.key(), buckets=window.predicate("bucket_start"))
    with stages(store, "audit", options.progress) as shown:
        shown.stage("detecting")
        detect(store, selection, reuse=True)
        summary = build_summary(store, top=top)
        warn_unpriced(summary)
        shown.stage("replaying guards")
        guards = guard_run(store, policies, reuse=True)
        if output is not None:
            shown.stage("writing the report")
            write_report(
                store, output, report_format, top_incidents, summary, guards, top=top, reuse=True
            )
    return Audit(reports, summary, guards, output, summary.incidents)


@on_its_console
def detect_incidents(
    store: Store, selection: Selection, window: Window | None = None
) -> list[Incident]:
    """``detect``: run the detectors over the calls in ``window`` (all by default), replacing
    their incidents in the store; the incidents they recorded, most wasted dollars first."""
    apply_window(store, window, incidents=False)
    with stages(store, "detect") as shown:
        shown.stage("detecting")
        detect(store, selection)
    return load_incidents(store, selection.names)


def stages(store: Store, label: str, enabled: bool = True) -> AbstractContextManager[Progress]:
    """The progress line of the steps after loading: shown on a terminal for a store of
    :data:`BIG_STORE` calls or more (each step names itself with ``stage``)."""
    big = enabled and int(store.scalar("SELECT count(*) FROM calls")) >= BIG_STORE
    return progress(label, store.con.query_progress, big)


def apply_window(store: Store, window: Window | None, incidents: bool = True) -> None:
    """Let every later step see only the calls in ``window`` (``Store.see_only``)."""
    store.see_only(window, incidents)


@on_its_console
def report(
    store: Store,
    output: Path,
    report_format: str,
    top_incidents: int,
    policies: list[Policy],
) -> Path:
    """Write the report of what the store holds (the guards replayed, or reused)."""
    from analyzer.guards.backtest import guard_run
    from analyzer.report.pages import write_report

    with stages(store, "report") as shown:
        shown.stage("replaying guards")
        guards = guard_run(store, policies, reuse=True)
        shown.stage("writing the report")
        return write_report(store, output, report_format, top_incidents, guards=guards, reuse=True)
