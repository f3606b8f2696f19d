"""Commands that read a store and change nothing in it: the report, the guard backtest, the
usage views, the incidents (a list, or one shown whole), the rejects and the export. Each
opens the store read-only (a store on a read-only disk can be read) and takes --since /
--until / --tz."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import click

from analyzer.cli.options import (
    DOLLARS,
    Option,
    View,
    chatter_options,
    db_option,
    emit,
    json_option,
    keep_cache_option,
    output_choice,
    output_format,
    policies_named,
    policies_option,
    refresh_option,
    report_options,
    view_options,
)
from analyzer.cli.reading import opened, reading
from analyzer.console import note
from analyzer.detect.detectors import load_incidents, wasted_once
from analyzer.engine.store import Store
from analyzer.errors import ForensicsError
from analyzer.guards.policy import Policy
from analyzer.model.formatting import SEVERITIES, severity_rank
from analyzer.pipeline import stages


def _no_incidents_note(store: Store) -> None:
    if not store.scalar("SELECT count(*) FROM incidents"):
        note("note: no incidents in the store (run `llm-forensics detect`)")


@click.command("report")
@db_option()
@refresh_option
@view_options
@keep_cache_option
@report_options(output_required=True)
@policies_option
@chatter_options
def report_command(
    db: str | None,
    view: View,
    output: str,
    report_format: str | None,
    top_incidents: int,
    policy_files: tuple[str, ...],
) -> None:
    """Write the incident report: one self-contained HTML page, or Markdown or JSON, or the
    incident table as CSV or Parquet (by the file's extension, or --format). -o - writes it
    to stdout (Markdown unless --format says otherwise).

    The page opens from disk, offline: CSS and charts inline, no scripts, no external
    requests. It reports the incidents in the store, so run `detect` first.

    \b
    Examples:
      llm-forensics report -o report.html
      llm-forensics report --db december.duckdb -o december.html
      llm-forensics report --db december.duckdb -o incidents.csv --since 2025-12-10
    """
    from analyzer import pipeline

    policies = policies_named(policy_files)
    fmt = output_format(output, report_format)
    with reading(db, view, detect=True, empty=False) as store:
        _no_incidents_note(store)
        pipeline.report(store, Path(output), fmt, top_incidents, policies)
    if output != "-":
        note(f"wrote {output} ({fmt})")


def _budget_option(name: str, kind: click.ParamType[Any], metavar: str, allows: str) -> Option:
    """A harm budget of ``backtest --recommend``: what it ``allows``."""
    return click.option(
        name, type=kind, default=None, metavar=metavar, help=f"With --recommend: allow {allows}."
    )


@click.command("backtest")
@db_option()
@refresh_option
@view_options
@keep_cache_option
@policies_option
@click.option("--only", multiple=True, metavar="NAME", help="Replay only this policy.")
@click.option(
    "--sweep",
    "sweeps",
    multiple=True,
    metavar="NAME.PARAM=LO..HI[:STEP]",
    help="Replay a policy at every value of a threshold, e.g. "
    "netclaw_cumulative_per_turn.stop=2..20 (only the swept policies are shown, unless "
    "--only names others).",
)
@click.option(
    "--labels",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="CSV of id,label (call or incident ids, runaway|legitimate) to use as ground truth.",
)
@click.option(
    "--recommend",
    is_flag=True,
    help="Find the policy and stop threshold that prevent the most waste within a false-trip "
    "budget, and print it as a TOML table for your own policy file.",
)
@_budget_option(
    "--max-false-trips", click.IntRange(min=0), "N", "at most N false trips (default 0)"
)
@_budget_option(
    "--max-false-usd",
    DOLLARS,
    "USD",
    "false trips that kill at most this much work instead",
)
@chatter_options
@json_option
def backtest_command(
    db: str | None,
    view: View,
    policy_files: tuple[str, ...],
    only: tuple[str, ...],
    sweeps: tuple[str, ...],
    labels: str | None,
    recommend: bool,
    max_false_trips: int | None,
    max_false_usd: Decimal | None,
    as_json: bool,
) -> None:
    """Replay the stored calls through guard policies: which would have stopped each incident,
    how early, the waste it would have prevented, and the harm it would have done (legitimate
    work killed), in separate columns.

    The ground truth is the incidents `detect` found (medium and high severity). With
    --json, every stop and nudge of every policy is listed as well.

    \b
    Examples:
      llm-forensics backtest --recommend
      llm-forensics backtest --db december.duckdb --sweep netclaw_cumulative_per_turn.stop=2..20
      llm-forensics backtest --db december.duckdb --recommend --max-false-trips 1
    """
    from analyzer.guards.backtest import backtest, parse_sweep
    from analyzer.views.backtest import BacktestView

    if (max_false_trips is not None or max_false_usd is not None) and not recommend:
        raise click.UsageError("--max-false-trips and --max-false-usd go with --recommend")
    if max_false_trips is not None and max_false_usd is not None:
        raise click.UsageError("give one budget: --max-false-trips or --max-false-usd")
    policies = policies_named(policy_files, only)
    by_name = {p.name: p for p in policies}
    parsed: dict[str, tuple[str, list[float]]] = {}
    for text in sweeps:
        try:
            name, param, values = parse_sweep(text)
            if name not in by_name:
                raise ForensicsError(f"{name} is not a policy that runs")
            if name in parsed:
                raise ForensicsError(
                    f"{name} is swept twice: sweep one of its thresholds at a time"
                )
            by_name[name].with_param(param, values[0])
        except ForensicsError as exc:
            raise click.BadParameter(str(exc), param_hint="--sweep") from None
        parsed[name] = (param, values)
    if parsed and not only:  # a sweep shows the swept policies, not every preset
        policies = [p for p in policies if p.name in parsed]
    with reading(db, view, detect=True) as store:
        _no_incidents_note(store)
        with stages(store, "backtest") as shown:
            shown.stage("replaying guards")
            if recommend:
                _recommend(store, policies, parsed, max_false_trips, max_false_usd, as_json)
                return
            # Only JSON lists every stop; the table needs the figures alone.
            results = backtest(
                store, policies, parsed, Path(labels) if labels else None, stops=as_json
            )
    emit(BacktestView(results), output_choice(as_json))


def _recommend(
    store: Store,
    policies: list[Policy],
    sweeps: dict[str, tuple[str, list[float]]],
    max_false_trips: int | None,
    max_false_usd: Decimal | None,
    as_json: bool,
) -> None:
    from analyzer.guards.recommend import Budget, recommend
    from analyzer.views.backtest import RecommendView

    budget = Budget(max_false_trips, max_false_usd)
    rec, weighed, within = recommend(store, policies, budget, sweeps)
    emit(RecommendView(rec, budget, weighed, within), output_choice(as_json))


@click.command("incidents")
@db_option()
@refresh_option
@view_options
@keep_cache_option
@click.option("--detector", multiple=True, metavar="NAME", help="Only this detector's.")
@click.option(
    "--severity",
    type=click.Choice(SEVERITIES),
    default=None,
    help="Only incidents of this severity or higher.",
)
@click.option(
    "--app",
    default=None,
    metavar="NAME",
    help="Only incidents whose calls are this app's (or project's).",
)
@chatter_options
@json_option
def incidents_command(
    db: str | None,
    view: View,
    detector: tuple[str, ...],
    severity: str | None,
    app: str | None,
    as_json: bool,
) -> None:
    """List the incidents in the store, most wasted first, each with its number (`show N`).

    \b
    Examples:
      llm-forensics incidents --severity high --since 7d
      llm-forensics incidents --detector constant_input_low_output --json
    """
    from analyzer.views.terminal import IncidentsView

    with reading(db, view, detect=True) as store:
        found = load_incidents(store, list(detector) if detector else None)
        if severity:
            found = [i for i in found if severity_rank(i.severity) >= severity_rank(severity)]
        if app:
            found = [i for i in found if app in (i.app, i.project)]
        total = wasted_once(store, found)
    emit(IncidentsView(found, limit=None, total=total), output_choice(as_json), view.tz)


@click.command("show")
@click.argument("ident", metavar="ID")
@db_option()
@refresh_option
@view_options
@keep_cache_option
@policies_option
@chatter_options
@json_option
def show_command(
    ident: str, db: str | None, view: View, policy_files: tuple[str, ...], as_json: bool
) -> None:
    """Show one incident: what happened, its calls, the evidence, and the guards that would
    have stopped it. ID is its number (from `incidents`) or its id.

    \b
    Example:
      llm-forensics show 1
    """
    from analyzer.detect.detectors import discover
    from analyzer.guards.backtest import guard_run
    from analyzer.views.show import find, gather

    policies = policies_named(policy_files)
    with reading(db, view, incidents=False, detect=True, empty=False) as store:
        inc = find(store, ident)
        with stages(store, "show") as shown:
            shown.stage("replaying guards")
            guards = guard_run(store, policies, reuse=True)
        shown_inc = gather(store, inc, discover(), guards)
    emit(shown_inc, output_choice(as_json), view.tz)


@click.command("rejects")
@db_option()
@refresh_option
@click.option(
    "--file",
    "file",
    default=None,
    metavar="TEXT",
    help="Only the rejects of files whose path contains TEXT.",
)
@chatter_options
@json_option
def rejects_command(db: str | None, file: str | None, as_json: bool) -> None:
    """List the input records that could not be loaded: file:line: reason, and the excerpt.

    \b
    Example:
      llm-forensics rejects --file activity.csv
    """
    from analyzer.views.terminal import RejectsView, rejects

    with opened(db, detect=False) as store:
        rows = rejects(store, file)
    emit(RejectsView(rows), output_choice(as_json))


@click.command("share")
@db_option()
@refresh_option
@keep_cache_option
@click.option(
    "--machine",
    default=None,
    metavar="NAME",
    help="Share the files read as machine NAME (`ingest --machine NAME`), under DIR/NAME/. "
    "Default: this machine's host name.",
)
@click.argument("folder", metavar="DIR", type=click.Path(file_okay=False))
@chatter_options
@json_option
def share_command(db: str | None, machine: str | None, folder: str, as_json: bool) -> None:
    """Write this machine's calls that are new since its last share (with their messages and
    runs, and the incidents found in them) into a folder shared by a team (a network drive, a
    synced folder, an object-store mount), as a batch of Parquet files of its own under
    DIR/<machine>/. (The default store is refreshed and its detectors run first; a store named
    with --db shares the incidents its last `detect` or `audit` found.) Any machine's store
    reads the folder with `llm-forensics ingest DIR` (each call once, however often it was
    shared), and `llm-forensics detect --engine spark --parquet DIR` runs the detectors over
    every machine's batches.

    A batch is written beside its place and renamed in whole; no file of another machine, nor
    an earlier batch, is ever changed. Sharing again writes only what was read since.

    \b
    Example:
      llm-forensics share /mnt/team/llm-history
    """
    from analyzer.engine.default_store import this_machine
    from analyzer.views.share import ShareView, share

    with opened(db, detect=True, empty=False) as store:
        shared = share(store, Path(folder), machine or this_machine())
    emit(ShareView(shared), output_choice(as_json))
    if shared.batch is not None:
        note(f"wrote {shared.batch}")


@click.command("export")
@db_option()
@refresh_option
@view_options
@keep_cache_option
@click.option(
    "--parquet",
    "folder",
    required=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="The folder to write (or to bring up to date).",
)
@chatter_options
def export_command(db: str | None, view: View, folder: str) -> None:
    """Write the store's canonical tables (sources, calls, messages, rejects, incidents...) as
    Parquet files, with a manifest.json, for other tools (DuckDB, pandas, Polars, Spark, a
    warehouse) and for `detect --engine spark`.

    calls and messages are folders partitioned by day (DIR/calls/day=2025-12-13/, the hive
    layout); the other tables one file each. Exporting again into the same DIR writes only the
    days that are new or changed since, and removes the days no longer in the store (with
    --since/--until, only that window is exported and the other days are left as they are).

    \b
    Example:
      llm-forensics export --parquet tables/
    """
    from analyzer.engine.export_layout import read_manifest
    from analyzer.views.export import ExportView, export_parquet

    with reading(db, view, detect=True, empty=False) as store:
        written = export_parquet(store, Path(folder))
    emit(ExportView(Path(folder), read_manifest(Path(folder))))
    note(f"wrote {len(written):,} files and {Path(folder) / 'manifest.json'}")
