"""The pipeline's commands: ``ingest``, ``detect`` and ``audit`` (the steps of
``analyzer.pipeline`` through the public API, ``analyzer.api.Forensics``)."""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import AbstractContextManager
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import click

from analyzer.api import Forensics, detect_on_spark, home
from analyzer.cli.options import (
    View,
    chatter_options,
    db_option,
    detector_options,
    emit,
    failing,
    ingest_options,
    json_option,
    output_choice,
    output_format,
    policies_named,
    policies_option,
    refresh_option,
    refreshing,
    report_options,
    view_options,
)
from analyzer.cli.reading import nothing_found
from analyzer.console import current, note, safe_line, verbose
from analyzer.detect.detectors import Selection
from analyzer.errors import NOT_ALL_READ_EXIT
from analyzer.ingest.base import IngestOptions
from analyzer.model.incident import Incident
from analyzer.pipeline import Inputs, default_inputs
from analyzer.views.audit import AuditView
from analyzer.views.ingest import IngestView, file_lines, files_summary


def _library(
    db: str, create: bool = True, temp_dir: str | None = None, writer: bool = False
) -> AbstractContextManager[Forensics]:
    """The library, through its public API, on the store at ``db``, speaking on this
    command's console. ``writer``: the default store, which another command may hold for a
    while (a refresh): waited for, up to ``home.WRITER_WAIT`` seconds."""

    def opened() -> AbstractContextManager[Forensics]:
        return Forensics.open(db, create=create, temp_dir=temp_dir, console=current())

    return home.patiently(opened, home.WRITER_WAIT, "the default store") if writer else opened()


def _inputs(paths: tuple[str, ...]) -> Inputs | list[str]:
    """The user's paths, or with none the places agents keep their logs by default."""
    return list(paths) if paths else default_inputs(os.environ, Path.home())


def _exit_if_not_all_read(reports: list[Any]) -> None:
    """Exit 4 when input was not read (the files were named as they were met)."""
    missed = [r.path for r in reports if r.not_read]
    if missed:
        more = f" and {len(missed) - 3:,} more" if len(missed) > 3 else ""
        click.echo(
            safe_line(
                f"exit {NOT_ALL_READ_EXIT}: {len(missed):,} "
                f"{'file' if len(missed) == 1 else 'files'} not read "
                f"({', '.join(missed[:3])}{more})"
            ),
            err=True,
        )
        sys.exit(NOT_ALL_READ_EXIT)


def _said_files(reports: list[Any]) -> None:
    """What ingest did: one summary line, or with --verbose a line for every file (stderr)."""
    if verbose():
        for line in file_lines(reports):
            click.echo(safe_line(line), err=True)
    else:
        note(files_summary(reports))


# -- commands -------------------------------------------------------------------------------


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(readable=False))
@db_option()
@click.option(
    "--machine",
    default=None,
    metavar="NAME",
    help="The machine these files come from (a copy of another machine's agent folders): "
    "its calls are kept and shown under NAME. Default: this machine's host name.",
)
@ingest_options
@chatter_options
@json_option
def ingest(
    paths: tuple[str, ...],
    db: str | None,
    machine: str | None,
    options: IngestOptions,
    as_json: bool,
) -> None:
    """Load files or folders into the store (format sniffed from content; .gz too). With no
    path, the places agents keep their logs (~/.claude/projects, ~/.codex/sessions, ...).

    Each file is loaded in one transaction; a file already ingested (same content) adds
    nothing, and generations already in the store count as duplicates. Finding nothing to
    load is an error (exit 3), and a new store is then not left behind. Without --db, into
    the default store (see --db).

    \b
    Examples:
      llm-forensics ingest --db december.duckdb exports/openrouter-2025-12.csv
      llm-forensics ingest --machine laptop2 /mnt/laptop2-home/.claude/projects
    """
    if machine is not None and not machine.strip():
        raise click.BadParameter("give the machine a name", param_hint="--machine")
    options = replace(options, machine=machine.strip() if machine else None)
    choice = home.choose(db)
    home.made_ready(choice)
    with _library(choice.path, writer=choice.default) as lf:
        reports = lf.ingest(_inputs(paths), options)
    home.keep_copy(choice)
    emit(IngestView(reports, verbose()), output_choice(as_json))
    _exit_if_not_all_read(reports)


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(readable=False))
@db_option(
    "The DuckDB store to keep. Default: with no path, the default store (see `ingest --help`); "
    "with paths, a temporary store deleted afterwards."
)
@ingest_options
@view_options
@detector_options
@report_options(output_required=False)
@policies_option
@chatter_options
@json_option
@click.option("--top", default=10, show_default=True, help="Rows in each spend table.")
def audit(
    paths: tuple[str, ...],
    db: str | None,
    options: IngestOptions,
    view: View,
    selection: Selection,
    fail_on: str | None,
    fail_on_waste: Decimal | None,
    output: str | None,
    report_format: str | None,
    top_incidents: int,
    policy_files: tuple[str, ...],
    as_json: bool,
    top: int,
) -> None:
    """Ingest, find the incidents, replay them through the guard presets, and show where the
    money went (the main job).

    With no path it reads the places agents keep their logs (~/.claude/projects,
    ~/.codex/sessions, ...: those that exist) into the default store (new and grown files
    only, after the first run). Given paths without --db, the store is temporary and deleted
    afterwards. With -o FILE it also writes the report: .html, .md or .json, or the incident
    table as .csv or .parquet; -o - writes it to stdout.

    \b
    Examples:
      llm-forensics audit                       # your Claude Code / Codex history
      llm-forensics audit sample_data/ -o report.html
      llm-forensics audit exports/ --since 7d --tz Europe/Berlin
    """
    policies = policies_named(policy_files)
    fmt = output_format(output, report_format) if output else "html"
    nothing = None if paths or db or output else home.no_agent_logs(home.choose(None))
    if nothing is not None:  # a new machine: no usage data, said (exit 0), no store made
        nothing_found(nothing)
        with _library(":memory:") as lf:
            shown = AuditView(lf.summary(top), lf.backtest(policies), [], view.window, view.tz)
        emit(shown, "json")
        return
    # Given paths, a throwaway store lives in memory (nothing to write twice), spilling to a
    # temporary folder past the memory limit; with none, the default store is kept.
    choice = home.choose(db) if db or not paths else None
    if choice is not None:
        home.made_ready(choice)
    with (
        tempfile.TemporaryDirectory(prefix="llm-forensics-") as tmp,
        _library(
            choice.path if choice else ":memory:",
            temp_dir=None if choice else tmp,
            writer=bool(choice and choice.default),
        ) as lf,
    ):
        done = lf.audit(
            _inputs(paths),
            options,
            selection,
            policies,
            output=Path(output) if output else None,
            report_format=fmt,
            top_incidents=top_incidents,
            top=top,
            on_files=_said_files,
            window=view.window,
        )
    if choice is not None:
        home.keep_copy(choice)
    if output and output != "-":
        note(f"wrote {output} ({fmt})")
    if as_json or output != "-":  # -o - has written the report on stdout
        shown = AuditView(done.summary, done.guards, done.reports, view.window, view.tz)
        emit(shown, output_choice(as_json), view.tz)
    if failing(done.incidents, fail_on, fail_on_waste, done.summary.wasted_usd):
        sys.exit(1)
    _exit_if_not_all_read(done.reports)


@click.command("detect")
@db_option()
@refresh_option
@view_options
@detector_options
@click.option(
    "--engine",
    type=click.Choice(["duckdb", "spark"]),
    default="duckdb",
    show_default=True,
    help="Where the detectors run: the store's DuckDB, or Spark over a Parquet "
    "export (--parquet; needs the [spark] extra and a Java runtime).",
)
@click.option(
    "--parquet",
    "folder",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="With --engine spark: the export to read (written by `llm-forensics "
    "export --parquet DIR`); the incidents go to DIR/detected/ and, if the "
    "store exists, into it.",
)
@click.option(
    "--master",
    metavar="URL",
    help="With --engine spark: the Spark master (default local[*]: every core of "
    "this machine; spark://host:7077, yarn, k8s://... for a cluster).",
)
@chatter_options
@json_option
def detect_command(
    db: str | None,
    view: View,
    selection: Selection,
    engine: str,
    folder: str | None,
    master: str | None,
    fail_on: str | None,
    fail_on_waste: Decimal | None,
    as_json: bool,
) -> None:
    """Run the detectors over the store and record their incidents.

    Each detector's earlier incidents are replaced, so running again gives the same incidents
    (with the same numbers), not twice as many. With --since / --until the detectors see only
    the calls in that window, and the incidents recorded are those found there.

    With --engine spark the same detector files run on Spark, translated from DuckDB's SQL by
    sqlglot, over the Parquet export in --parquet DIR: for data that has outgrown one machine.

    \b
    Examples:
      llm-forensics detect --db december.duckdb --fail-on high
      llm-forensics export --db year.duckdb --parquet lake/
      llm-forensics detect --engine spark --parquet lake/ --db year.duckdb
    """
    from analyzer.views.terminal import IncidentsView

    choice = home.choose(db)
    if engine == "spark":
        incidents, total = _detect_on_spark(choice, view, selection, folder, master)
    else:
        if folder or master:
            raise click.UsageError("--parquet and --master go with --engine spark")
        home.refresh(choice, IngestOptions(), incidents=False, enabled=refreshing(), writer=True)
        with _library(choice.path, create=False, writer=choice.default) as lf:
            incidents = lf.detect(selection, view.window)
            total = lf.wasted(incidents)
        home.keep_copy(choice)
    emit(IncidentsView(incidents, limit=25, total=total), output_choice(as_json), view.tz)
    if failing(incidents, fail_on, fail_on_waste, total):
        sys.exit(1)


def _detect_on_spark(
    choice: home.StoreChoice,
    view: View,
    selection: Selection,
    folder: str | None,
    master: str | None,
) -> tuple[list[Incident], Decimal | None]:
    """detect --engine spark: into the store when it exists (or was named), else only beside
    the export. The incidents, and what they wasted, each call once (None without a store:
    then added up)."""
    from analyzer.detect import spark_engine

    if not spark_engine.available():
        raise click.UsageError(f"--engine spark needs pyspark: {spark_engine.EXTRA}")
    if not folder:
        raise click.UsageError(
            "--engine spark reads a Parquet export: give --parquet DIR "
            "(write one with `llm-forensics export --parquet DIR`)"
        )
    if choice.default and not Path(choice.path).exists():
        incidents = detect_on_spark(folder, selection, master, view.window, console=current())
        note(f"no store at {choice.path}: the incidents are in {Path(folder) / 'detected'} only")
        return incidents, None
    with _library(choice.path, create=False, writer=choice.default) as lf:
        incidents = lf.detect_on_spark(folder, selection, master, view.window)
        return incidents, lf.wasted(incidents)
