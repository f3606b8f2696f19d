"""The command line: thin commands over the library, one error boundary.

Exit codes: 0 ran clean; 1 findings at or above --fail-on; 2 usage error; 3 input or runtime
error (one line ``Error: <file>:<line>: <what>``, no traceback unless --traceback).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import click
import duckdb

from analyzer import __version__
from analyzer.cli_options import (
    db_option,
    detector_options,
    ingest_options,
    json_option,
    policies_option,
    queries_option,
    report_options,
)
from analyzer.detect import Selection, discover, load_incidents
from analyzer.errors import ForensicsError
from analyzer.formatting import severity_rank
from analyzer.guards import Policy, all_policies
from analyzer.incident import Incident
from analyzer.ingest.base import IngestOptions
from analyzer.pages import format_for
from analyzer.store import open_store
from analyzer.summary import file_lines, render_backtest, render_incidents, render_text


class ForensicsGroup(click.Group):
    """The one error boundary: known errors become one line on stderr and exit 3."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ForensicsError as exc:
            if ctx.meta.get("lf.traceback"):
                raise
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except BrokenPipeError:  # handled in main(): the reader of stdout went away
            raise
        except duckdb.Error as exc:
            if ctx.meta.get("lf.traceback"):
                raise
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            click.echo(f"Error: database: {first}", err=True)
            ctx.exit(3)
        except Exception as exc:
            if ctx.meta.get("lf.traceback"):
                raise
            click.echo(
                f"Error: unexpected {type(exc).__name__}: {exc} (rerun with --traceback)",
                err=True,
            )
            ctx.exit(3)


def _set_traceback(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    ctx.meta["lf.traceback"] = value
    return value


@click.group(cls=ForensicsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="llm-forensics")
@click.option(
    "--traceback",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_set_traceback,
    help="Show the full traceback of an error (for bug reports).",
)
def cli() -> None:
    """Find the money LLM agents burn in runaway loops.

    Load OpenRouter activity exports into a local DuckDB store and see where the money went.

    \b
    Example:
      llm-forensics audit sample_data/
    """


def _failing(incidents: list[Incident], fail_on: str | None, fail_on_waste: float | None) -> bool:
    if fail_on is not None:
        floor = severity_rank(fail_on)
        if any(severity_rank(i.severity) >= floor for i in incidents):
            return True
    if fail_on_waste is not None:
        return float(sum(i.wasted_usd for i in incidents)) >= fail_on_waste
    return False


def _print_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


# -- commands -------------------------------------------------------------------------------


def _policies(files: tuple[str, ...], only: tuple[str, ...] = ()) -> list[Policy]:
    found = all_policies(list(files))
    if only:
        names = {p.name for p in found}
        unknown = [n for n in only if n not in names]
        if unknown:
            raise click.BadParameter(
                f"no policy named {', '.join(unknown)} (see `llm-forensics policies`)",
                param_hint="--only",
            )
        found = [p for p in found if p.name in only]
    return found


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@db_option()
@ingest_options
@json_option
def ingest(paths: tuple[str, ...], db: str, options: IngestOptions, as_json: bool) -> None:
    """Load files or folders into the store (format sniffed from content; .gz too).

    Each file is loaded in one transaction; a file already ingested (same content) adds
    nothing, and generations already in the store count as duplicates.

    \b
    Example:
      llm-forensics ingest --db december.duckdb exports/openrouter-2025-12.csv
    """
    from analyzer.pipeline import ingest_paths

    with open_store(db) as store:
        reports = ingest_paths(store, list(paths), options)
    if as_json:
        _print_json([r.to_dict() for r in reports])
    else:
        for line in file_lines(reports):
            click.echo(line)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@db_option(default=None)
@ingest_options
@detector_options
@report_options(output_required=False)
@policies_option
@json_option
@click.option("--top", default=10, show_default=True, help="Rows in each spend table.")
def audit(
    paths: tuple[str, ...],
    db: str | None,
    options: IngestOptions,
    selection: Selection,
    fail_on: str | None,
    fail_on_waste: float | None,
    output: str | None,
    report_format: str | None,
    top_incidents: int,
    policy_files: tuple[str, ...],
    as_json: bool,
    top: int,
) -> None:
    """Ingest, find the incidents, replay them through the guard presets, and show where the
    money went (the main job).

    Without --db (or $LLM_FORENSICS_DB) the store is temporary and deleted afterwards. With
    -o FILE it also writes the incident report.

    \b
    Example:
      llm-forensics audit sample_data/ -o report.html
    """
    from analyzer import pipeline

    policies = _policies(policy_files)
    fmt = format_for(output, report_format) if output else "html"

    def said(reports: list[Any]) -> None:
        for line in file_lines(reports):
            click.echo(line, err=True)

    # A throwaway store lives in memory (nothing to write twice), spilling to a temporary
    # folder past the memory limit.
    with (
        tempfile.TemporaryDirectory(prefix="llm-forensics-") as tmp,
        open_store(db or ":memory:", temp_dir=None if db else tmp) as store,
    ):
        done = pipeline.audit(
            store, list(paths), options, selection, policies,
            output=Path(output) if output else None, report_format=fmt,
            top_incidents=top_incidents, top=top, on_files=said,
        )  # fmt: skip
    if output:
        click.echo(f"wrote {output} ({fmt})", err=True)
    if as_json:
        data = done.summary.to_json()
        data["backtest"] = [r.to_json() for r in done.guards.results]
        data["ingested"] = [r.to_dict() for r in done.reports]
        _print_json(data)
    else:
        click.echo(render_text(done.summary), nl=False)
        click.echo("")
        click.echo("Guards (replayed at their own thresholds)")
        click.echo(render_backtest(done.guards.results), nl=False)
    if _failing(done.incidents, fail_on, fail_on_waste):
        sys.exit(1)


@cli.command("detect")
@db_option()
@detector_options
@json_option
def detect_command(
    db: str,
    selection: Selection,
    fail_on: str | None,
    fail_on_waste: float | None,
    as_json: bool,
) -> None:
    """Run the detectors over the store and record their incidents.

    Each detector's earlier incidents are replaced, so running again gives the same incidents,
    not twice as many.

    \b
    Example:
      llm-forensics detect --db december.duckdb --fail-on high
    """
    from analyzer.detect import detect

    with open_store(db, must_exist=True) as store:
        detect(store, selection)
        incidents = load_incidents(store, selection.names)
    if as_json:
        _print_json([i.to_json() for i in incidents])
    else:
        click.echo(render_incidents(incidents), nl=False)
    if _failing(incidents, fail_on, fail_on_waste):
        sys.exit(1)


@cli.command("detectors")
@queries_option
@json_option
def detectors_command(queries: tuple[str, ...], as_json: bool) -> None:
    """List the detectors with their severity, title and parameters.

    \b
    Example:
      llm-forensics detectors
    """
    found = discover(list(queries))
    if as_json:
        _print_json(
            [
                {
                    "name": d.name,
                    "severity": d.severity,
                    "title": d.title,
                    "params": d.params,
                    "description": d.reasoning,
                    "path": str(d.path),
                }
                for d in found
            ]
        )
        return
    for d in found:
        click.echo(f"{d.name}  [{d.severity}]  {d.title}")
        if d.params:
            click.echo("    " + ", ".join(f"{k}={v}" for k, v in d.params.items()))


@cli.command()
@click.option(
    "-o",
    "--output",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder to write the sample data set into (created if missing).",
)
@click.option(
    "--rows",
    type=click.IntRange(min=1000),
    default=None,
    help="Rows in the billing export (default: the committed sample's size). Healthy traffic "
    "is scaled; the planted incidents stay as they are.",
)
@click.option(
    "--seed", default=2025, show_default=True, help="Random seed (same seed, same bytes)."
)
def sample(out_dir: str, rows: int | None, seed: int) -> None:
    """Write the deterministic sample data set with the seed incidents planted.

    \b
    Example:
      llm-forensics sample -o /tmp/big --rows 10000000
    """
    from analyzer.sample import DEFAULT_ROWS, write_sample

    written = write_sample(Path(out_dir), rows=rows or DEFAULT_ROWS, seed=seed)
    for path in written:
        click.echo(str(path))


@cli.command("backtest")
@db_option()
@policies_option
@click.option("--only", multiple=True, metavar="NAME", help="Replay only this policy.")
@click.option(
    "--sweep",
    "sweeps",
    multiple=True,
    metavar="NAME.PARAM=LO..HI[:STEP]",
    help="Replay a policy at every value of a threshold, e.g. "
    "netclaw_cumulative_per_turn.stop=2..20.",
)
@click.option(
    "--labels",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="CSV of id,label (call or incident ids, runaway|legitimate) to use as ground truth.",
)
@json_option
def backtest_command(
    db: str,
    policy_files: tuple[str, ...],
    only: tuple[str, ...],
    sweeps: tuple[str, ...],
    labels: str | None,
    as_json: bool,
) -> None:
    """Replay the stored calls through guard policies: which would have stopped each incident,
    how early, what it would have saved, and what legitimate work it would have killed.

    The ground truth is the incidents `detect` found (medium and high severity).

    \b
    Example:
      llm-forensics backtest --db december.duckdb --sweep netclaw_cumulative_per_turn.stop=2..20
    """
    from analyzer.backtest import backtest, parse_sweep

    policies = _policies(policy_files, only)
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
    with open_store(db, must_exist=True) as store:
        if not store.scalar("SELECT count(*) FROM incidents"):
            click.echo("note: no incidents in the store (run `llm-forensics detect`)", err=True)
        results = backtest(store, policies, parsed, Path(labels) if labels else None)
    if as_json:
        _print_json([r.to_json() for r in results])
    else:
        click.echo(render_backtest(results), nl=False)


@cli.command("policies")
@policies_option
@json_option
def policies_command(policy_files: tuple[str, ...], as_json: bool) -> None:
    """List the guard policies (built-in presets and your own) with their parameters.

    \b
    Example:
      llm-forensics policies
    """
    found = _policies(policy_files)
    if as_json:
        _print_json(
            [{"name": p.name, "description": p.description, "source": p.source,
              "params": p.params()} for p in found]
        )  # fmt: skip
        return
    for p in found:
        click.echo(f"{p.name}  [{p.type}, per {p.scope}]  {p.description}")
        params = ", ".join(f"{k}={v}" for k, v in p.params().items() if k not in ("type", "scope"))
        click.echo(f"    {params}")


@cli.command("report")
@db_option()
@report_options(output_required=True)
@policies_option
def report_command(
    db: str,
    output: str,
    report_format: str | None,
    top_incidents: int,
    policy_files: tuple[str, ...],
) -> None:
    """Write the incident report: one self-contained HTML page (or --format md / json).

    The page opens from disk, offline: CSS and charts inline, no scripts, no external
    requests. It reports the incidents in the store, so run `detect` first.

    \b
    Example:
      llm-forensics report --db december.duckdb -o december.html
    """
    from analyzer import pipeline

    policies = _policies(policy_files)
    with open_store(db, must_exist=True) as store:
        if not store.scalar("SELECT count(*) FROM incidents"):
            click.echo("note: no incidents in the store (run `llm-forensics detect`)", err=True)
        pipeline.report(store, Path(output), format_for(output, report_format), top_incidents,
                        policies)  # fmt: skip
    click.echo(output)


def main() -> None:
    try:
        cli(prog_name="llm-forensics")
    except BrokenPipeError:  # `llm-forensics ... | head`: the reader left; not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)


if __name__ == "__main__":
    main()
