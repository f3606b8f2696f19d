"""``llm-forensics guard``: the policies you backtested, run live (``analyzer.guards.guard``).

``guard claude-hook``: a Claude Code hook (``analyzer.api.claude_hook``). It reads the hook's
JSON on standard input and answers on standard output as Claude Code's hooks reference says;
it never fails the user's work by its own error (any problem, a usage error of its own command
line too: one line on standard error, exit 0, Claude goes on).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from analyzer.api.alerts import LEVELS, AlertSettings, check_webhook, parse_levels
from analyzer.api.claude_hook import TAIL_MIB, run_hook
from analyzer.console import safe_line

_USAGE = "lf.hook_usage"  # (ctx.meta: the usage error the hook's command line had)


class _HookCommand(click.Command):
    """A hook's command: a usage error (an unknown option, a bad value) is one line on stderr
    and exit 0, never click's exit 2, which in a ``PreToolUse`` hook blocks the tool."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            ctx.meta[_USAGE] = exc.format_message()
            return []

    def invoke(self, ctx: click.Context) -> Any:
        if _USAGE in ctx.meta:
            line = f"llm-forensics guard: {ctx.meta[_USAGE]} (going on)"
            click.echo(safe_line(" ".join(line.split())), err=True)
            return None
        return super().invoke(ctx)


@click.group("guard")
def guard_group() -> None:
    """Run a guard policy live, in the agent, as the backtest replayed it.

    In Python: Guard.load(NAME) and guard.feed(call) (analyzer.api); for
    Claude Code: the hook below. `backtest --recommend` prints both for the policy it
    recommends.

    Example (what Claude Code runs after a tool call):

    \b
      echo '{"transcript_path": "session.jsonl", "hook_event_name": "PostToolUse"}' \\
        | llm-forensics guard claude-hook --policy opencode_doom_loop
    """


@guard_group.command("claude-hook", cls=_HookCommand)
@click.option(
    "--policy",
    "policy",
    default=None,
    metavar="NAME",
    help="The policy to run (needed): a preset (`llm-forensics policies`) or one of "
    "--policies FILE.",
)
@click.option(
    "--policies",
    "policies_file",
    metavar="FILE",
    default=None,
    help="A TOML file of policies, as `backtest --policies` reads it.",
)
@click.option(
    "--tail-mib",
    type=click.FloatRange(min=0),
    default=TAIL_MIB,
    show_default=True,
    metavar="MIB",
    help="Judge at most the transcript's last MIB MiB, from their first whole line (0: all "
    "of it), so that the hook answers well inside Claude Code's timeout; a longer transcript "
    "is judged as if the session began there.",
)
@click.option(
    "--webhook",
    metavar="URL",
    default=None,
    help="Also POST each alert (a cap's level reached, a stop) once ever to URL as JSON with "
    'a plain "text" field, as chat webhooks (Slack, Mattermost) take it.',
)
@click.option(
    "--notify",
    "desktop",
    is_flag=True,
    help="Also show each alert once ever as a desktop notification (notify-send, osascript).",
)
@click.option(
    "--alert-at",
    "alert_at",
    metavar="PERCENTS",
    default=None,
    help="The levels of a budget policy's cap alerted, in percent (default: 50,80,100).",
)
def claude_hook_command(
    policy: str | None,
    policies_file: str | None,
    tail_mib: float,
    webhook: str | None,
    desktop: bool,
    alert_at: str | None,
) -> None:
    """A Claude Code hook: stop Claude when the policy trips.

    Reads the hook's JSON on stdin (it names the transcript), replays the session so far
    (its last --tail-mib MiB) through the policy and, when it trips, answers {"continue":
    false, "stopReason": ...} (a stop) or, after a tool, {"decision": "block", "reason": ...}
    (a nudge). Otherwise it says nothing. Any problem, a mistake in this command line too, is
    one line on stderr and exit 0: the hook never stops your work by its own error. Example,
    in .claude/settings.json, with the command's absolute path (`command -v llm-forensics`:
    Claude Code runs hooks with the PATH it was started with):

    \b
      {"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [{"type": "command",
        "command": "/home/you/.local/bin/llm-forensics guard claude-hook --policy NAME"}]}]}}
    """
    if not policy:  # (not click's usage error: its exit 2 would block Claude Code's tool)
        click.echo("llm-forensics guard: give --policy NAME (going on)", err=True)
        return
    try:
        alerts = AlertSettings(
            check_webhook(webhook) if webhook else None,
            desktop,
            parse_levels(alert_at) if alert_at is not None else LEVELS,
        )
    except ValueError as exc:  # (no usage error: its exit 2 would block Claude Code's tool)
        click.echo(f"llm-forensics guard: {exc} (going on without alerts)", err=True)
        alerts = None
    stdin = getattr(sys.stdin, "buffer", None)
    said = run_hook(stdin, policy, policies_file, tail_mib, alerts=alerts)
    if said.stdout:
        click.echo(said.stdout)
    if said.stderr:
        click.echo(said.stderr, err=True)
