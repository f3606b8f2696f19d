"""``llm-forensics watch``: follow the agents' logs as they are written, and say each new
incident and each trip of a policy in one line (the loop itself: ``analyzer.api.watch``)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import NoReturn

import click

from analyzer.api import home
from analyzer.api.alerts import (
    LEVELS,
    AlertBook,
    AlertSettings,
    Notifier,
    alert_once,
    check_webhook,
    parse_levels,
)
from analyzer.api.exec_runner import EXEC_TIMEOUT, ExecRunner
from analyzer.api.watch import (
    Alert,
    Ended,
    Found,
    Watcher,
    as_alert,
    ended_by_signals,
    exec_argv,
    on_stderr,
    watch,
)
from analyzer.cli.options import _check_tz, chatter_options, db_option
from analyzer.console import Console, current, note, safe_line
from analyzer.engine.store import interrupted
from analyzer.errors import Interrupted
from analyzer.guards.policy import Policy, all_policies, load_policies


def _policies(names: tuple[str, ...], files: tuple[str, ...]) -> list[Policy]:
    """The policies named with --policy (presets, or of the --policies files); with none named,
    every policy of the files given (none at all without files)."""
    if not names:
        return [p for f in files for p in load_policies(Path(f))]
    found = {p.name: p for p in all_policies(list(files))}
    unknown = [n for n in names if n not in found]
    if unknown:
        raise click.BadParameter(
            f"no policy named {', '.join(unknown)} (see `llm-forensics policies`)",
            param_hint="--policy",
        )
    return [found[n] for n in dict.fromkeys(names)]


def _tilde(path: str) -> str:
    home_dir = str(Path.home())
    return "~" + path[len(home_dir) :] if path.startswith(home_dir + os.sep) else path


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def _started(watcher: Watcher, found: Found, interval: float, throwaway: bool) -> str:
    """The first line: what is watched, into which store, and what is already there."""
    inputs = watcher.inputs()
    places = ", ".join(inputs.places())
    if not places:
        places = "the agents' default places (none there yet)"
    store = "a throwaway store" if throwaway else _tilde(watcher.choice.path)
    guards = ", ".join(p.name for p in watcher.policies) or "none (--policy NAME)"
    trips = f", {_count(len(found.trips), 'trip')}" if watcher.policies else ""
    return (
        f"watching {places} every {interval:g} s, into {store}: "
        f"{_count(len(found.incidents), 'incident')}{trips} already there (not reported); "
        f"policies: {guards}; Ctrl-C to stop"
    )


def _sayer(tz: str, notifier: Notifier, book: AlertBook) -> Callable[[Alert], None]:
    """Each alert: its line on stdout (at once), then, if no process sent it before, to the
    channels set: --notify, --webhook, the --exec program (which runs beside the polls)."""

    def say(alert: Alert) -> None:
        click.echo(safe_line(alert.line(tz)))
        sys.stdout.flush()
        alert_once(book, notifier, as_alert(alert, tz))

    return say


def _levels(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[float, ...]:
    try:
        return parse_levels(value) if value is not None else LEVELS
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _webhook(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    try:
        return check_webhook(value) if value is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("watch")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@db_option(
    "The DuckDB store to write. Default: with no path, the default store (see `ingest --help`); "
    "with paths, a temporary store deleted afterwards."
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Time from the start of one poll to the next.",
)
@click.option(
    "--policy",
    "policy_names",
    multiple=True,
    metavar="NAME",
    help="Also run this guard policy over the calls as they come, and say when it trips "
    "(repeatable; a preset, or a policy of --policies). Default: none.",
)
@click.option(
    "--policies",
    "policy_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A TOML file of guard policies, as `backtest --policies` takes (repeatable): its "
    "policies run, all of them unless --policy names some.",
)
@click.option(
    "--exec",
    "command",
    metavar="CMD",
    default=None,
    help="Run CMD (split as a shell splits it, run without one) for each new incident or "
    "trip, with it as JSON on standard input, in its own process group, one at a time in "
    "order, beside the polls; a failure is said and the watch goes on.",
)
@click.option(
    "--exec-timeout",
    type=click.FloatRange(min=0.1),
    default=EXEC_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="Time --exec's CMD, and whatever it started, may run; then they are ended.",
)
@click.option(
    "--webhook",
    metavar="URL",
    default=None,
    callback=_webhook,
    help='Also POST each alert as JSON to URL, with its line as a plain "text" field (what '
    "Slack's and Mattermost's incoming webhooks show); a failure is said and the watch goes "
    "on.",
)
@click.option(
    "--notify",
    "desktop",
    is_flag=True,
    help="Also show each alert as a desktop notification (notify-send on Linux, osascript "
    "on macOS; where there is none, nothing).",
)
@click.option(
    "--alert-at",
    "levels",
    metavar="PERCENTS",
    default="50,80,100",
    show_default=True,
    callback=_levels,
    help="The levels of a budget policy's cap said (percent), each once per period of the "
    "cap (its session, day...).",
)
@click.option(
    "--tz",
    "tz",
    default="UTC",
    show_default=True,
    callback=_check_tz,
    metavar="ZONE",
    help="Time zone times are shown in, e.g. Europe/Berlin.",
)
@chatter_options
def watch_command(
    paths: tuple[str, ...],
    db: str | None,
    interval: float,
    policy_names: tuple[str, ...],
    policy_files: tuple[str, ...],
    command: str | None,
    exec_timeout: float,
    webhook: str | None,
    desktop: bool,
    levels: tuple[float, ...],
    tz: str,
) -> None:
    """Follow the agents' logs as they are written; say each new incident and each policy
    trip in one line, with the dollars so far, and each level of a budget policy's cap
    (--alert-at) reached.

    With no path, the places agents keep their logs (~/.claude/projects, ~/.codex/sessions,
    ...), into the default store; with paths, those (into --db if given, else a throwaway
    store). Every poll reads only new and grown files; a place that disappears is said once
    and waited for. What is there when the watch starts is counted, not reported. The store is
    not held between polls: other commands read it meanwhile. Ctrl-C stops the watch (exit
    130; SIGTERM: 143), ending --exec's programs and removing a throwaway store.

    Each alert goes once ever to --notify, --webhook and --exec: the record of alerts sent
    (alerts.jsonl in the data folder), shared with other watches and the Claude Code hook,
    keeps a restarted watch from sending it again.

    \b
    Examples:
      llm-forensics watch
      llm-forensics watch --policy penguin_stale_context --exec 'python3 notify.py'
      llm-forensics watch ~/agent/logs --interval 5 --policies mine.toml
      llm-forensics watch --policy session_cost_cap --notify --webhook https://hooks.example/T
    """
    try:
        argv = exec_argv(command) if command is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--exec") from None
    if argv and os.name != "posix":  # (its process group, its exit seen without reaping it)
        raise click.BadParameter("runs only on Linux and macOS", param_hint="--exec")
    policies = _policies(policy_names, policy_files)
    cur = current()
    # Each poll's own notes (what it read) only with --verbose; its warnings always, once each.
    console = Console(quiet=not cur.verbose, colour=cur.colour, width=cur.width, stderr=cur.stderr)
    with ended_by_signals() as ended:
        try:
            with ExitStack() as stack:
                throwaway = bool(paths) and not db
                if throwaway:
                    tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="llm-forensics-"))
                    choice = home.StoreChoice(str(Path(tmp) / "watch.duckdb"), default=False)
                else:
                    choice = home.choose(db)
                runner = None  # (ended before the throwaway store is removed)
                if argv:
                    runner = stack.enter_context(ExecRunner(argv, on_stderr, exec_timeout))
                settings = AlertSettings(webhook, desktop, levels, verbose=cur.verbose)
                notifier = Notifier(settings, on_stderr, runner)
                watcher = Watcher(choice, list(paths), policies, console=console, levels=levels)
                found = watcher.start()
                note(_started(watcher, found, interval, throwaway))
                watch(watcher, interval, _sayer(tz, notifier, AlertBook()))
        except (KeyboardInterrupt, Interrupted):
            _stopped(ended)
        except Exception as exc:
            if interrupted(exc):  # Ctrl-C inside a DuckDB statement, or an error it caused
                _stopped(ended)
            raise


def _stopped(ended: Ended) -> NoReturn:
    """Ctrl-C, SIGTERM or SIGHUP: the poll under way stored nothing of the file it was reading
    (each file is one transaction); the store is closed, a throwaway store removed, --exec's
    programs ended."""
    said = "" if ended.signum is None else f" ({ended.name})"
    click.echo(f"stopped watching{said}", err=True)
    sys.exit(ended.exit_code)
