"""The command line's shared options, declared once and bundled (as sqlite-utils does): each
bundle hands the command what it means (``IngestOptions``, a checked detector ``Selection``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from analyzer.cli import CONSOLE
from analyzer.console import Console, csv_out, current, out, width
from analyzer.engine.default_store import DB_ENV
from analyzer.errors import ForensicsError
from analyzer.model.formatting import SEVERITIES, money, severity_rank
from analyzer.model.timewindow import Window, parse_when
from analyzer.report.render import STDOUT, render, write_file
from analyzer.views.view import How
from analyzer.views.view import View as Shown

if TYPE_CHECKING:
    # (What only some commands need is imported where it is used: a command loads only what
    # it uses, and ``usage`` starts without the detectors, the formats or pyarrow.)
    from analyzer.detect.detectors import Selection
    from analyzer.guards.policy import Policy
    from analyzer.model.incident import Incident

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr)?\s*$", re.IGNORECASE)


class Dollars(click.ParamType[Decimal]):
    """An amount of US dollars, exact: a ``Decimal``, never below 0 (``--fail-on-waste``,
    ``--max-false-usd``), so it is compared with the store's exact sums as it was written."""

    name = "usd"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Decimal:
        if isinstance(value, Decimal):
            return value
        try:
            amount = Decimal(str(value).strip().removeprefix("$").replace(",", ""))
        except ArithmeticError:
            amount = None
        if amount is None or not amount.is_finite() or amount < 0:
            self.fail(f"{value!r} is not an amount of dollars (a number, 0 or more)", param, ctx)
        return amount


DOLLARS = Dollars()


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
    if value == "UTC":  # the default: no database opened to check it (a warm command's time)
        return value
    import duckdb

    from analyzer.engine.engine import Engine
    from analyzer.engine.store import OFFLINE

    try:
        Engine(duckdb.connect(config=OFFLINE)).run(
            "SELECT timezone(?, TIMESTAMP '2000-01-01')", [value]
        )
    except duckdb.Error:
        raise click.BadParameter(
            f"unknown time zone {value!r} (use an IANA name such as UTC or Europe/Berlin)"
        ) from None
    return value


DB_HELP = (
    f"The DuckDB store. Default: the default store, ${DB_ENV} if set, else "
    "llm-forensics/forensics.duckdb in your data folder (~/.local/share, or $XDG_DATA_HOME), "
    "refreshed from the agents' default places first when no input is given."
)


def db_option(help_text: str = DB_HELP) -> Callable[[Callable[..., Any]], Any]:
    """--db FILE (None: the default store, ``analyzer.api.home``)."""
    return click.option("--db", "db", default=None, metavar="FILE", help=help_text)


def _set_refresh(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    ctx.meta["lf.refresh"] = value
    return value


def refresh_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """--refresh/--no-refresh, for the commands that read the default store (read back by
    ``refreshing`` from the context)."""
    return click.option(
        "--refresh/--no-refresh",
        default=True,
        show_default=True,
        expose_value=False,
        callback=_set_refresh,
        help="Without --db: first read the agents' new and grown log files into the default "
        "store. --no-refresh shows what it holds as it is.",
    )(f)


def refreshing() -> bool:
    """Whether this command refreshes the default store (``--no-refresh`` not given)."""
    return bool(click.get_current_context().meta.get("lf.refresh", True))


Option = Callable[[Callable[..., Any]], Callable[..., Any]]


def bundle(
    f: Callable[..., Any],
    options: Sequence[Option],
    meaning: Callable[[dict[str, Any]], None] | None = None,
) -> Callable[..., Any]:
    """``f`` with ``options`` (in the order given, as ``--help`` lists them) and, with
    ``meaning``, given what their values mean: ``meaning`` takes them out of the command's
    keyword arguments and puts in what the command is handed instead."""
    for option in reversed(options):
        f = option(f)
    if meaning is None:
        return f
    command = f

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        meaning(kwargs)
        return command(*args, **kwargs)

    return wrapper


def _ingest_meaning(kwargs: dict[str, Any]) -> None:
    from analyzer.ingest.base import IngestOptions

    kwargs["options"] = IngestOptions(
        tz=kwargs.pop("input_tz"),
        session_gap_s=parse_duration(kwargs.pop("session_gap")),
        strict=kwargs.pop("strict"),
        format=kwargs.pop("fmt"),
        full_paths=kwargs.pop("full_paths"),
    )


def ingest_options(f: Callable[..., Any]) -> Callable[..., Any]:
    from analyzer.formats import format_names

    options = [
        click.option(
            "--input-tz",
            "input_tz",
            default="UTC",
            show_default=True,
            callback=_check_tz,
            metavar="ZONE",
            help="Time zone of input timestamps written without one (they are stored as UTC).",
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
    return bundle(f, options, _ingest_meaning)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")


def _selection(
    only: tuple[str, ...], params: tuple[str, ...], queries: tuple[str, ...]
) -> Selection:
    """The detectors to run, their names and parameters checked once, before anything runs:
    a wrong one is a usage error."""
    from analyzer.detect.detectors import ParamError, select

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
            type=DOLLARS,
            default=None,
            metavar="USD",
            help="Exit 1 if the incidents waste at least this many dollars.",
        ),
    ]
    return bundle(f, options, _selection_meaning)


def _selection_meaning(kwargs: dict[str, Any]) -> None:
    kwargs["selection"] = _selection(
        kwargs.pop("only"), kwargs.pop("params"), kwargs.pop("queries")
    )


def report_options(output_required: bool) -> Callable[[Callable[..., Any]], Any]:
    from analyzer.report.pages import REPORT_FORMATS

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        options = [
            click.option(
                "-o",
                "--output",
                type=click.Path(dir_okay=False, allow_dash=True),
                default="report.html" if output_required else None,
                show_default=output_required,
                help="Write the report to this file: .html, .md, .json, or the incident table "
                "as .csv or .parquet; - for stdout"
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
        return bundle(f, options)

    return decorate


@dataclass(frozen=True)
class View:
    """How a command shows the store: the time window it looks at and the zone of its times."""

    window: Window
    tz: str


def view_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--since, --until and --tz (given to the command as ``view``)."""
    options = [
        click.option(
            "--since",
            metavar="WHEN",
            default=None,
            help="Only calls from this time on: a date (2025-12-01), a date-time "
            "(2025-12-01 06:00), or a span back from now (7d, 24h, 2w).",
        ),
        click.option(
            "--until",
            metavar="WHEN",
            default=None,
            help="Only calls before this time (a date includes its whole day).",
        ),
        click.option(
            "--tz",
            "tz",
            default="UTC",
            show_default=True,
            callback=_check_tz,
            metavar="ZONE",
            help="Time zone times are shown in (and days counted in, and --since/--until "
            "read in), e.g. Europe/Berlin.",
        ),
    ]
    return bundle(f, options, _view_meaning)


def _view_meaning(kwargs: dict[str, Any]) -> None:
    since, until, tz = kwargs.pop("since"), kwargs.pop("until"), kwargs.pop("tz")
    try:
        window = Window(
            parse_when(since, tz) if since else None,
            parse_when(until, tz, end=True) if until else None,
        )
    except ForensicsError as exc:
        raise click.BadParameter(exc.message, param_hint="--since/--until") from None
    if window.since and window.until and window.since >= window.until:
        raise click.BadParameter(
            f"--since ({since}) is not before --until ({until})", param_hint="--since"
        )
    kwargs["view"] = View(window, tz)


def _set_keep_cache(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    ctx.meta["lf.keep_cache"] = value
    return value


def keep_cache_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """--keep-cache/--no-keep-cache, for the commands that open the store read-only (read
    back by ``cli_store``'s reading helper from the context)."""
    return click.option(
        "--keep-cache/--no-keep-cache",
        default=True,
        show_default=True,
        expose_value=False,
        callback=_set_keep_cache,
        help="Keep what this command computed (a page, a replay) in the store's cache, so the "
        "next run reuses it: this writes to the store file (its bytes change, never its data) "
        "after the command. --no-keep-cache leaves the file byte for byte as it was.",
    )(f)


def run_console(ctx: click.Context) -> Console:
    """The console of this command's run (made by the command group before the command's
    options are read; the one in use otherwise)."""
    found = ctx.meta.get(CONSOLE)
    return found if isinstance(found, Console) else current()


def _set_quiet(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        run_console(ctx).quiet = True
    return value


def _set_verbose(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        run_console(ctx).verbose = True
    return value


def chatter_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--quiet and --verbose: how much the command says on stderr."""
    f = click.option(
        "-v",
        "--verbose",
        is_flag=True,
        expose_value=False,
        callback=_set_verbose,
        help="Say what happened to every file read (by default: one summary line).",
    )(f)
    return click.option(
        "-q",
        "--quiet",
        is_flag=True,
        expose_value=False,
        callback=_set_quiet,
        help="No progress and no notes on stderr (warnings and errors still).",
    )(f)


def policies_named(files: tuple[str, ...], only: tuple[str, ...] = ()) -> list[Policy]:
    """The built-in policies and those of ``files`` (only those named in ``only``, if any)."""
    from analyzer.guards.policy import all_policies

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


def failing(
    incidents: list[Incident],
    fail_on: str | None,
    fail_on_waste: Decimal | None,
    wasted: Decimal | None = None,
) -> bool:
    """Whether the run fails (exit 1) under --fail-on / --fail-on-waste; says why on stderr.
    ``wasted``: what the incidents wasted, each call once (else their dollars added up)."""
    if fail_on is not None:
        floor = severity_rank(fail_on)
        hits = [i for i in incidents if severity_rank(i.severity) >= floor]
        if hits:
            click.echo(
                f"exit 1: {len(hits):,} incident(s) at severity {fail_on} or higher "
                f"(--fail-on {fail_on})",
                err=True,
            )
            return True
    if fail_on_waste is not None:
        if wasted is None:
            wasted = sum((i.wasted_usd for i in incidents), Decimal(0))
        if wasted >= fail_on_waste:
            click.echo(
                f"exit 1: the incidents wasted {money(wasted)}, at least "
                f"--fail-on-waste {fail_on_waste:g}",
                err=True,
            )
            return True
    return False


def output_format(output: str, fmt: str | None) -> str:
    """The format ``-o FILE`` is written in (``--format``, else its extension); an extension
    no format has is a usage error naming those that do."""
    from analyzer.report.pages import format_for

    try:
        return format_for(output, fmt)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'-o' / '--output'") from None


def output_choice(as_json: bool = False, as_csv: bool = False, output: str | None = None) -> str:
    """The format a command writes its view in: ``--json``, ``--csv``, the extension of
    ``-o FILE``, else its text layout (one of them only: two is a usage error).

    >>> output_choice(), output_choice(as_json=True), output_choice(output="x.csv")
    ('text', 'json', 'csv')
    """
    asked = [f for f, on in (("json", as_json), ("csv", as_csv)) if on]
    if len(asked) > 1:
        raise click.UsageError("give one of --json and --csv")
    if output is not None:
        if asked:
            raise click.UsageError(f"give --{asked[0]} or -o, not both")
        return output_format(output, None)
    return asked[0] if asked else "text"


def emit(view: Shown, fmt: str = "text", tz: str = "UTC", output: str | None = None) -> None:
    """Write ``view`` in ``fmt`` (``output_choice``) by that format's renderer: to ``output``
    (a file, written whole then moved into place) or on stdout - text with its styles
    (dropped off a terminal), CSV made safe for a terminal, JSON as it is."""
    written = render(view, fmt, How(width(), tz))
    if output is not None and output != STDOUT:
        write_file(written, Path(output))
        return
    if isinstance(written, bytes):
        raise click.UsageError(f"{fmt} cannot be written to standard output: give -o FILE")
    if fmt == "text":
        out(written, nl=False)
    elif fmt == "csv":
        csv_out(written)
    else:
        click.echo(written, nl=False)
