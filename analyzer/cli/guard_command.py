"""``llm-forensics guard``: the policies you backtested, run live (``analyzer.guards.guard``).

``guard claude-hook``: a Claude Code hook (``analyzer.api.claude_hook``). It reads the hook's
JSON on standard input and answers on standard output as Claude Code's hooks reference says;
it never fails the user's work by its own error (any problem, a usage error of its own command
line too: one line on standard error, exit 0, Claude goes on).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from analyzer.api.alerts import LEVELS, AlertSettings, check_webhook, parse_levels
from analyzer.api.claude_hook import TAIL_MIB, run_hook
from analyzer.console import safe_line

if TYPE_CHECKING:
    from analyzer.guards.policy import Policy

# (install, uninstall and status import what they use when they run: the hook's start is not
# to pay for them.)

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


def _where(user: bool, project: str | None) -> Path:
    """The settings file a command changes: the user's (--user) or the project's."""
    from analyzer.guards.install import project_settings, user_settings

    if user and project is not None:
        raise click.UsageError("give --user or --project DIR, not both")
    if user:
        return user_settings(os.environ, Path.home())
    return project_settings(Path(project or ".").resolve())


def _set_refresh(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    from analyzer.cli.options import _set_refresh as set_refresh

    return set_refresh(ctx, _param, value)


_user_option = click.option(
    "--user",
    is_flag=True,
    help="The user's settings: $CLAUDE_CONFIG_DIR/settings.json when that is set, else "
    "~/.claude/settings.json.",
)
_project_option = click.option(
    "--project",
    "project",
    type=click.Path(file_okay=False),
    metavar="DIR",
    default=None,
    help="The project's settings, DIR/.claude/settings.json (default: the current folder's).",
)
_dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Say what would change, and write nothing."
)


@guard_group.command("install")
@click.option(
    "--policy",
    "policy",
    default=None,
    metavar="NAME",
    help="The policy to run: a preset (`llm-forensics policies`) or one of --policies FILE.",
)
@click.option(
    "--policies",
    "policies_file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    metavar="FILE",
    help="A TOML file of policies, as `backtest --policies` reads it (the hook names it by "
    "its absolute path).",
)
@_user_option
@_project_option
@click.option(
    "--recommend",
    is_flag=True,
    help="Install the policy `backtest --recommend` recommends on your history (none when "
    "no guard would have saved a cent: then nothing is installed).",
)
@_dry_run_option
@click.option(
    "--refresh/--no-refresh",
    default=True,
    show_default=True,
    expose_value=False,
    callback=_set_refresh,
    help="First read the agents' new and grown log files into the default store (for the "
    "backtest). --no-refresh backtests what it holds as it is.",
)
def install_command(
    policy: str | None,
    policies_file: str | None,
    user: bool,
    project: str | None,
    recommend: bool,
    dry_run: bool,
) -> None:
    """Install the guard as a Claude Code hook: after every tool call, Claude Code runs
    `llm-forensics guard claude-hook --policy NAME` (by the command's absolute path), which
    stops Claude when the policy trips.

    Writes the project's .claude/settings.json (or the user's, --user), made when missing,
    merged with what is there: other settings and hooks are left as they are, a hook of ours
    is replaced (never added twice), and the file is backed up first
    (settings.json.llm-forensics.bak). First it says what the policy would have done on your
    history (the backtest of the default store, refreshed as `backtest` does).

    \b
    Examples:
      llm-forensics guard install --policy opencode_doom_loop
      llm-forensics guard install --recommend --user
      llm-forensics guard install --policy mine --policies guards.toml --project ~/code/app
    """
    from analyzer.console import note
    from analyzer.engine.resources import COMMAND
    from analyzer.guards import install as inst

    if (policy is None) == (not recommend):
        raise click.UsageError("give --policy NAME or --recommend (one of them)")
    path = _where(user, project)
    inst.installed_bytes(inst.read_bytes(path), "check", path)  # a bad file: before any work
    if recommend:
        chosen = _recommended(policies_file)
        if chosen is None:
            click.echo("nothing installed")
            return
        name, policies, table = chosen
        if table is not None:
            policies = inst.write_policy_file(path.parent, table, dry_run)
            click.echo(f"{'would write' if dry_run else 'wrote'} the policy {name} to {policies}")
    else:
        assert policy is not None
        name, policies = policy, Path(policies_file) if policies_file else None
        _history(_policy(name, policies))
    command = inst.hook_command(name, policies)
    if command.startswith(COMMAND + " "):
        note(f"note: {COMMAND} was not found by an absolute path: the hook runs it from PATH")
    change = inst.install(path, command, dry_run)
    would = "would " if dry_run else ""
    if change.backup is not None:
        click.echo(f"{would}back up {path} to {change.backup}")
    if not change.changed:
        click.echo(f"already installed in {path}: {command}")
        return
    for old in change.commands:
        click.echo(f"{would}replace the guard hook: {old}")
    events = ", ".join(inst.HOOK_EVENTS)
    click.echo(f"{'would install' if dry_run else 'installed'} in {path} ({events}): {command}")


def _policy(name: str, policies: Path | None) -> Policy:
    """The policy the hook will load, loaded as it will load it (an unknown name: exit 3)."""
    from analyzer.guards.guard import Guard

    return Guard.load(name, policies).policy


def _history(policy: Policy) -> None:
    """What ``policy`` would have done on the user's history (the default store, refreshed),
    in the words of ``backtest --recommend``; no history, or a store that cannot be read: said
    in one line (the hook is installed all the same)."""
    from analyzer.api import home
    from analyzer.cli.reading import opened
    from analyzer.errors import ForensicsError
    from analyzer.guards.backtest import backtest
    from analyzer.guards.recommend import outcome

    try:
        with opened(None, detect=True, empty=False) as store:
            [result] = backtest(store, [policy], stops=False)
    except home.NoAgentLogs:
        click.echo("no history to backtest the policy on yet (no agent logs found)")
        return
    except ForensicsError as exc:  # (said, and the hook installed all the same)
        click.echo(f"not backtested on your history: {exc}")
        return
    click.echo(f"on your history, {policy.name} {outcome(result)}")


def _recommended(policies_file: str | None) -> tuple[str, Path | None, str | None] | None:
    """The policy ``backtest --recommend`` recommends on the user's history (said as it
    says it): its name, its file and, for one that is in no file yet, its TOML table; None
    (said) when it recommends none."""
    from analyzer.api import home
    from analyzer.cli.options import policies_named
    from analyzer.cli.reading import opened
    from analyzer.guards.recommend import (
        GUARDS_FILE,
        Budget,
        outcome,
        recommend,
        recommended_toml,
        running,
    )
    from analyzer.views.backtest import RecommendView

    budget = Budget()
    try:
        with opened(None, detect=True, empty=False) as store:
            policies = policies_named((policies_file,) if policies_file else ())
            rec, weighed, within = recommend(store, policies, budget)
    except home.NoAgentLogs:
        click.echo("no history to recommend a policy from (no agent logs found)")
        return None
    if rec is None:
        click.echo(RecommendView(None, budget, weighed, within).reason())
        return None
    click.echo(
        f"recommended: {rec.policy.name} at stop = {rec.policy.stop:g}; on your history it "
        f"{outcome(rec.result)}"
    )
    name, file = running(rec.policy)
    if file == GUARDS_FILE:
        return name, None, recommended_toml(rec.policy, rec.result)
    return name, Path(file) if file is not None else None, None


@guard_group.command("uninstall")
@_user_option
@_project_option
@_dry_run_option
def uninstall_command(user: bool, project: str | None, dry_run: bool) -> None:
    """Remove the guard's hook from Claude Code's settings: only ours, every other setting
    and hook left as it is. A file untouched since `guard install` gets its bytes from
    before the install back (from the backup); one changed since loses only our hook.

    \b
    Examples:
      llm-forensics guard uninstall
      llm-forensics guard uninstall --user
    """
    from analyzer.guards import install as inst

    path = _where(user, project)
    change = inst.uninstall(path, dry_run)
    would = "would " if dry_run else ""
    if not change.commands:
        click.echo(f"no guard hook of ours in {path}: nothing to remove")
        return
    for command in change.commands:
        click.echo(f"{would}remove the guard hook: {command}")
    if change.restored and change.after is None:
        click.echo(f"{would}remove {path} (guard install made it)")
    elif change.restored:
        click.echo(f"{would}restore {path} as it was before `guard install` (its backup)")
    else:
        click.echo(f"{would}write {path} without it")
    for gone in inst.remove_policy_files(
        [inst.Hook("", None, c) for c in change.commands], dry_run
    ):
        click.echo(f"{would}remove {gone} (guard install --recommend wrote it)")


@guard_group.command("status")
@_project_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")
def status_command(project: str | None, as_json: bool) -> None:
    """Say where the guard's hook is installed: in the project's settings (the current
    folder's, or --project DIR) and in the user's, with its policy, its command, and whether
    the command and its --policies file are there to run.

    \b
    Examples:
      llm-forensics guard status
      llm-forensics guard status --project ~/code/app --json
    """
    from analyzer.guards import install as inst

    folder = Path(project or ".").resolve()
    found = [
        inst.installed("project", inst.project_settings(folder)),
        inst.installed("user", inst.user_settings(os.environ, Path.home())),
    ]
    if as_json:
        click.echo(json.dumps({"files": [f.to_json(folder) for f in found]}, indent=2))
        return
    for line in inst.status_lines(found, folder):
        click.echo(line)
