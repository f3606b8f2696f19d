"""The command line: thin commands over the library, one error boundary.

Exit codes: 0 ran clean; 1 findings at or above --fail-on; 2 usage error; 3 input or runtime
error (one line ``Error: <file>:<line>: <what>``, no traceback unless --traceback).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import click
import duckdb

from analyzer import __version__
from analyzer.console import progress
from analyzer.detect import SEVERITIES, Detector, detect, discover, parse_param_overrides
from analyzer.errors import ForensicsError
from analyzer.ingest import FileReport, format_names, ingest_paths
from analyzer.ingest.base import IngestOptions
from analyzer.store import DB_ENV, DEFAULT_DB, OFFLINE, open_store
from analyzer.summary import build_summary, render_incidents, render_text, warn_unpriced

BIG_STORE = 500_000  # calls from which audit shows the progress of its steps (on a terminal)


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


# -- shared options -----------------------------------------------------------------------

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr)?\s*$", re.IGNORECASE)


def parse_duration(text: str) -> int:
    """``90s``, ``30m``, ``2h``, or a bare number of minutes, as whole seconds."""
    m = _DURATION.match(text)
    if not m:
        raise click.BadParameter(f"{text!r} is not a duration like 90s, 30m or 2h")
    value, unit = float(m.group(1)), (m.group(2) or "m").lower()
    return int(value * {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600}[unit])


def _check_tz(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    try:
        duckdb.connect(config=OFFLINE).execute(
            "SELECT timezone(?, TIMESTAMP '2000-01-01')", [value]
        )
    except duckdb.Error:
        raise click.BadParameter(
            f"unknown time zone {value!r} (use an IANA name such as UTC or Europe/Berlin)"
        ) from None
    return value


def db_option(default: str | None = DEFAULT_DB) -> Callable[[Callable[..., Any]], Any]:
    return click.option(
        "--db",
        "db",
        default=default,
        envvar=DB_ENV,
        show_default=default is not None,
        show_envvar=True,
        metavar="FILE",
        help="The DuckDB store.",
    )


def ingest_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--tz",
            default="UTC",
            show_default=True,
            callback=_check_tz,
            help="Time zone of timestamps written without one (they are stored as UTC).",
        ),
        click.option(
            "--session-gap",
            default="30m",
            show_default=True,
            metavar="DURATION",
            help="In a billing export, a silence longer than this starts a new session.",
        ),
        click.option(
            "--strict", is_flag=True, help="Any record that cannot be loaded fails its file."
        ),
        click.option(
            "--format",
            "fmt",
            type=click.Choice(format_names()),
            default=None,
            help="Read every file as this format instead of sniffing it from its content.",
        ),
        click.option(
            "--full-paths",
            is_flag=True,
            help="Name files by their absolute path in the store and report (default: as "
            "given, and by their own name when given as an absolute path).",
        ),
    ]
    for option in reversed(options):
        f = option(f)

    @wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["options"] = IngestOptions(
            tz=kwargs.pop("tz"),
            session_gap_s=parse_duration(kwargs.pop("session_gap")),
            strict=kwargs.pop("strict"),
            format=kwargs.pop("fmt"),
            full_paths=kwargs.pop("full_paths"),
        )
        return f(*args, **kwargs)

    return wrapper


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")


def detector_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--only",
            multiple=True,
            metavar="NAME",
            help="Run only this detector (repeatable).",
        ),
        click.option(
            "--param",
            "params",
            multiple=True,
            metavar="NAME.KEY=VALUE",
            help="Set a detector parameter, e.g. constant_input_low_output.min_run=5.",
        ),
        click.option(
            "--queries",
            multiple=True,
            type=click.Path(file_okay=False),
            metavar="DIR",
            help="Also run the detectors (*.sql) in this folder.",
        ),
        click.option(
            "--fail-on",
            type=click.Choice(SEVERITIES),
            default=None,
            help="Exit 1 if an incident of this severity or higher is found.",
        ),
        click.option(
            "--fail-on-waste",
            type=float,
            default=None,
            metavar="USD",
            help="Exit 1 if the incidents waste at least this many dollars.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


REPORT_FORMATS = ("html", "md", "json")


def report_options(output_required: bool) -> Callable[[Callable[..., Any]], Any]:
    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        options = [
            click.option(
                "-o",
                "--output",
                type=click.Path(dir_okay=False),
                default="report.html" if output_required else None,
                show_default=output_required,
                help="Write the incident report to this file"
                + ("." if output_required else " (no report unless given)."),
            ),
            click.option(
                "--format" if output_required else "--report-format",
                "report_format",
                type=click.Choice(REPORT_FORMATS),
                default=None,
                help="Report format (default: from the file's extension, else html).",
            ),
            click.option(
                "--top-incidents",
                type=click.IntRange(min=0),
                default=20,
                show_default=True,
                help="Incidents that get a full section; the rest are table rows.",
            ),
        ]
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def _report_format(output: str, fmt: str | None) -> str:
    if fmt:
        return fmt
    suffix = Path(output).suffix.lower().lstrip(".")
    return {"md": "md", "markdown": "md", "json": "json"}.get(suffix, "html")


def _select(detectors: list[Detector], only: tuple[str, ...]) -> list[Detector]:
    if not only:
        return detectors
    names = {d.name for d in detectors}
    unknown = [n for n in only if n not in names]
    if unknown:
        raise click.BadParameter(
            f"no detector named {', '.join(unknown)} (see `llm-forensics detectors`)",
            param_hint="--only",
        )
    return [d for d in detectors if d.name in only]


def _run_detectors(
    store: Any,
    only: tuple[str, ...],
    params: tuple[str, ...],
    queries: tuple[str, ...],
    reuse: bool = False,
) -> list[dict[str, Any]]:
    detectors = _select(discover(list(queries)), only)
    try:  # a wrong --param is a usage error, caught before anything runs
        overrides = parse_param_overrides(list(params))
        by_name = {d.name: d for d in detectors}
        for name, values in overrides.items():
            if name not in by_name:
                raise ForensicsError(f"{name} is not a detector that runs")
            by_name[name].bind(values)
    except ForensicsError as exc:
        raise click.BadParameter(str(exc), param_hint="--param") from None
    return detect(store, detectors, overrides, reuse=reuse)


def _failing(
    incidents: list[dict[str, Any]], fail_on: str | None, fail_on_waste: float | None
) -> bool:
    if fail_on is not None:
        floor = SEVERITIES.index(fail_on)
        if any(SEVERITIES.index(i["severity"]) >= floor for i in incidents):
            return True
    if fail_on_waste is not None:
        return sum(float(i["wasted_usd"]) for i in incidents) >= fail_on_waste
    return False


def _print_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def _file_lines(reports: list[FileReport]) -> list[str]:
    lines = []
    for r in reports:
        if r.status == "loaded":
            lines.append(
                f"{r.path}  [{r.format}]  read {r.rows_read:,}  loaded {r.rows_loaded:,}  "
                f"rejected {r.rows_rejected:,}  duplicate {r.rows_duplicate:,}  "
                f"skipped {r.rows_skipped:,}"
            )
        elif r.status == "unchanged":
            lines.append(f"{r.path}  [{r.format}]  unchanged (already ingested)")
        elif r.status == "unreadable":
            lines.append(f"{r.path}  skipped (cannot be read as a file)")
        else:
            lines.append(f"{r.path}  skipped (not a recognised format)")
    return lines


# -- commands -------------------------------------------------------------------------------


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
    with open_store(db) as store:
        reports = ingest_paths(store, list(paths), options)
    if as_json:
        _print_json([r.to_dict() for r in reports])
    else:
        for line in _file_lines(reports):
            click.echo(line)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(readable=False))
@db_option(default=None)
@ingest_options
@detector_options
@report_options(output_required=False)
@click.option(
    "--policies",
    "policy_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also replay the guard policies of this TOML file.",
)
@json_option
@click.option("--top", default=10, show_default=True, help="Rows in each spend table.")
def audit(
    paths: tuple[str, ...],
    db: str | None,
    options: IngestOptions,
    only: tuple[str, ...],
    params: tuple[str, ...],
    queries: tuple[str, ...],
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
    # A throwaway store lives in memory (nothing to write twice), spilling to a temporary
    # folder past the memory limit.
    with (
        tempfile.TemporaryDirectory(prefix="llm-forensics-") as tmp,
        open_store(db or ":memory:", temp_dir=None if db else tmp) as store,
    ):
        reports = ingest_paths(store, list(paths), options)
        for line in _file_lines(reports):
            click.echo(line, err=True)
        # Unchanged data, detectors and policies: the results kept in the store are reused.
        # Steps over a large store show their progress on a terminal.
        big = options.progress and int(store.scalar("SELECT count(*) FROM calls")) >= BIG_STORE
        with progress("audit", store.con.query_progress, big) as shown:
            shown.stage("detecting")
            _run_detectors(store, only, params, queries, reuse=True)
            summary = build_summary(store, top=top)
            warn_unpriced(summary)
            from analyzer.backtest import guard_run

            shown.stage("replaying guards")
            guards = guard_run(store, _policies(policy_files, ()), reuse=True)
            if output:
                from analyzer.report import write_report

                shown.stage("writing the report")
                fmt = _report_format(output, report_format)
                write_report(
                    store, Path(output), fmt, top_incidents, summary, guards, top=top, reuse=True
                )
        if output:
            click.echo(f"wrote {output} ({fmt})", err=True)
    if as_json:
        data = summary.to_json()
        data["backtest"] = [r.to_json() for r in guards.results]
        data["ingested"] = [r.to_dict() for r in reports]
        _print_json(data)
    else:
        click.echo(render_text(summary), nl=False)
        click.echo("")
        click.echo("Guards (replayed at their own thresholds)")
        click.echo(_render_backtest(guards.results), nl=False)
    if _failing(summary.incidents, fail_on, fail_on_waste):
        sys.exit(1)


@cli.command("detect")
@db_option()
@detector_options
@json_option
def detect_command(
    db: str,
    only: tuple[str, ...],
    params: tuple[str, ...],
    queries: tuple[str, ...],
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
    from analyzer.detect import load_incidents

    if not Path(db).exists():
        raise ForensicsError("no store here (run `llm-forensics ingest` first)", path=db)
    with open_store(db) as store:
        ran = _run_detectors(store, only, params, queries)
        names = {r["detector"] for r in ran} | set(only)
        incidents = [i for i in load_incidents(store) if not only or i["detector"] in names]
    if as_json:
        _print_json(incidents)
    else:
        click.echo(render_incidents(incidents), nl=False)
    if _failing(incidents, fail_on, fail_on_waste):
        sys.exit(1)


@cli.command("detectors")
@click.option(
    "--queries",
    multiple=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Also list the detectors in this folder.",
)
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


def _policies(files: tuple[str, ...], only: tuple[str, ...]) -> list[Any]:
    from analyzer.guards import all_policies

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


def _render_backtest(results: list[Any]) -> str:
    if not results:
        return "No policies.\n"
    head = (
        f"{'policy':<30} {'stopped':>8} {'prevented':>10} {'saved':>7} {'saved $':>9} "
        f"{'false':>6} {'false $':>9} {'latency':>8}"
    )
    out = [head]
    for r in results:
        name = r.policy
        if len(results) > 1 and any(x.policy == r.policy for x in results if x is not r):
            name = f"{r.policy} stop={r.params['stop']:g}"
        latency = "–" if r.median_latency_calls is None else f"{r.median_latency_calls:g}"

        def usd(x: float) -> str:
            return f"${x:,.2f}"

        out.append(
            f"{name:<30} {r.incidents_stopped:>3}/{r.incidents_total:<4} "
            f"{usd(r.waste_prevented_usd):>10} {r.calls_saved:>7,} {usd(r.usd_saved):>9} "
            f"{r.false_trips:>6,} {usd(r.usd_false_trips):>9} {latency:>8}"
        )
    out.append(
        "stopped: incidents stopped at or before their last call; prevented: their waste after "
        "the trip; saved: calls (and dollars) after every stop; false: stops where no incident "
        "was; latency: median calls from an incident's start to the trip."
    )
    return "\n".join(out) + "\n"


@cli.command("backtest")
@db_option()
@click.option(
    "--policies",
    "policy_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A TOML file of your own policies (repeatable); see `llm-forensics policies`.",
)
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

    if not Path(db).exists():
        raise ForensicsError("no store here (run `llm-forensics ingest` first)", path=db)
    policies = _policies(policy_files, only)
    by_name = {p.name: p for p in policies}
    parsed: dict[str, tuple[str, list[float]]] = {}
    for text in sweeps:
        try:
            name, param, values = parse_sweep(text)
            if name not in by_name:
                raise ForensicsError(f"{name} is not a policy that runs")
            by_name[name].with_param(param, values[0])
        except ForensicsError as exc:
            raise click.BadParameter(str(exc), param_hint="--sweep") from None
        parsed[name] = (param, values)
    with open_store(db) as store:
        if not store.scalar("SELECT count(*) FROM incidents"):
            click.echo("note: no incidents in the store (run `llm-forensics detect`)", err=True)
        results = backtest(store, policies, parsed, Path(labels) if labels else None)
    if as_json:
        _print_json([r.to_json() for r in results])
    else:
        click.echo(_render_backtest(results), nl=False)


@cli.command("policies")
@click.option(
    "--policies",
    "policy_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also list the policies of this TOML file.",
)
@json_option
def policies_command(policy_files: tuple[str, ...], as_json: bool) -> None:
    """List the guard policies (built-in presets and your own) with their parameters.

    \b
    Example:
      llm-forensics policies
    """
    found = _policies(policy_files, ())
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
@click.option(
    "--policies",
    "policy_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also replay the guard policies of this TOML file in the Guards section.",
)
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
    from analyzer.report import write_report

    if not Path(db).exists():
        raise ForensicsError("no store here (run `llm-forensics ingest` first)", path=db)
    from analyzer.backtest import guard_run

    fmt = _report_format(output, report_format)
    with open_store(db) as store:
        if not store.scalar("SELECT count(*) FROM incidents"):
            click.echo("note: no incidents in the store (run `llm-forensics detect`)", err=True)
        guards = guard_run(store, _policies(policy_files, ()), reuse=True)
        write_report(store, Path(output), fmt, top_incidents, guards=guards, reuse=True)
    click.echo(output)


def main() -> None:
    try:
        cli(prog_name="llm-forensics")
    except BrokenPipeError:  # `llm-forensics ... | head`: the reader left; not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)


if __name__ == "__main__":
    sys.exit(main())
