"""The commands an agent runs on every step, without the command line's machinery.

``llm-forensics guard claude-hook ...`` and ``llm-forensics statusline`` are run by Claude Code
in a new process at every tool call (at every refresh of its status line): their answer is due
in milliseconds, and importing click, DuckDB and pyarrow alone takes longer. The entry point
(``analyzer.cli.entry``) hands their words here first. What is understood runs at once; a
command line this parser does not understand (an option it does not know, ``--help``) returns
None and goes to the full command line, which answers it as it always has (the hook's usage
error: one line on stderr and "go on").
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analyzer.api.alerts import AlertSettings

# The hook's options that take a value, and its flags (guard_command.claude_hook_command).
_VALUED = {"--policy", "--policies", "--tail-mib", "--webhook", "--alert-at"}
_FLAGS = {"--notify"}


def parse(args: list[str]) -> dict[str, str | bool] | None:
    """``--name value``, ``--name=value`` and flags; None for anything else."""
    out: dict[str, str | bool] = {}
    i = 0
    while i < len(args):
        word = args[i]
        name, eq, value = word.partition("=")
        if name in _FLAGS and not eq:
            out[name] = True
        elif name in _VALUED and eq:
            out[name] = value
        elif name in _VALUED and i + 1 < len(args):
            out[name] = args[i + 1]
            i += 1
        else:
            return None
        i += 1
    return out


def run_fast(argv: list[str]) -> int | None:
    """Run ``argv`` (the words after the program's name) if it is a fast command this parser
    understands: its exit code; else None (the full command line runs it)."""
    runner: Callable[[dict[str, str | bool]], int | None]
    if argv[:2] == ["guard", "claude-hook"]:
        words, runner = argv[2:], _claude_hook
    elif argv[:1] == ["statusline"]:
        words, runner = argv[1:], _statusline
    else:
        return None
    options = parse(words)
    return None if options is None else runner(options)


def _claude_hook(options: dict[str, str | bool]) -> int | None:
    """``guard claude-hook``, as guard_command.claude_hook_command runs it."""
    from analyzer.api.claude_hook import TAIL_MIB, run_hook

    policy, policies = options.get("--policy"), options.get("--policies")
    if not isinstance(policy, str) or not policy:
        return None  # (the full command line says what is missing)
    try:
        tail_mib = float(str(options.get("--tail-mib", TAIL_MIB)))
    except ValueError:
        return None
    if tail_mib < 0:
        return None
    alerts = _alerts(options)
    stdin = getattr(sys.stdin, "buffer", None)
    chosen = policies if isinstance(policies, str) else None
    said = run_hook(stdin, policy, chosen, tail_mib, alerts=alerts)
    _say(said.stdout, said.stderr)
    return 0


def _alerts(options: dict[str, str | bool]) -> AlertSettings | None:
    """The hook's alert settings, as guard_command.claude_hook_command makes them (None: no
    channel given, so nothing of the alerts is imported: the hook's start stays short)."""
    webhook, alert_at = options.get("--webhook"), options.get("--alert-at")
    if not webhook and not options.get("--notify"):
        return None
    from analyzer.api.alerts import LEVELS, AlertSettings, check_webhook, parse_levels

    try:
        return AlertSettings(
            check_webhook(str(webhook)) if webhook else None,
            bool(options.get("--notify")),
            parse_levels(str(alert_at)) if alert_at is not None else LEVELS,
        )
    except ValueError as exc:
        _say("", f"llm-forensics guard: {exc} (going on without alerts)")
        return None


def _statusline(options: dict[str, str | bool]) -> int | None:
    """``statusline``, as statusline_command runs it (it takes no options)."""
    if options:
        return None
    from analyzer.api.statusline import run_statusline

    _say(run_statusline(getattr(sys.stdin, "buffer", None)), "")
    return 0


def _say(stdout: str, stderr: str) -> None:
    if stdout:
        sys.stdout.write(stdout + "\n")
        sys.stdout.flush()
    if stderr:
        sys.stderr.write(stderr + "\n")
        sys.stderr.flush()
