"""The command line's shared options, declared once and bundled (as sqlite-utils does): each
bundle hands the command what it means (``IngestOptions``, a checked detector ``Selection``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps
from typing import Any

import click
import duckdb

from analyzer.detect import ParamError, Selection, select
from analyzer.formatting import SEVERITIES
from analyzer.ingest import format_names
from analyzer.ingest.base import IngestOptions
from analyzer.pages import REPORT_FORMATS
from analyzer.store import DB_ENV, DEFAULT_DB, OFFLINE

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr)?\s*$", re.IGNORECASE)


def parse_duration(text: str) -> int:
    """``90s``, ``30m``, ``2h``, or a bare number of minutes, as whole seconds.

    >>> parse_duration("90s"), parse_duration("30m"), parse_duration("2h"), parse_duration("5")
    (90, 1800, 7200, 300)
    """
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


def _selection(
    only: tuple[str, ...], params: tuple[str, ...], queries: tuple[str, ...]
) -> Selection:
    """The detectors to run, their names and parameters checked once, before anything runs:
    a wrong one is a usage error."""
    try:
        return select(list(only), list(params), list(queries))
    except ParamError as exc:
        raise click.BadParameter(
            exc.message, param_hint="--only" if exc.message.startswith("no detector") else "--param"
        ) from None


def queries_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--queries",
        multiple=True,
        type=click.Path(file_okay=False),
        metavar="DIR",
        help="Also use the detectors (*.sql) in this folder.",
    )(f)


def policies_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--policies",
        "policy_files",
        multiple=True,
        type=click.Path(dir_okay=False),
        metavar="FILE",
        help="Also use the guard policies of this TOML file (repeatable); see "
        "`llm-forensics policies`.",
    )(f)


def detector_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--only, --param, --queries (given to the command as ``selection``), --fail-on and
    --fail-on-waste."""
    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
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
        queries_option,
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

    @wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["selection"] = _selection(
            kwargs.pop("only"), kwargs.pop("params"), kwargs.pop("queries")
        )
        return f(*args, **kwargs)

    return wrapper


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
