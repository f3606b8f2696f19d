"""``llm-forensics guard``: the policies you backtested, run live (``analyzer.guards.guard``).

``guard claude-hook``: a Claude Code hook (``analyzer.api.claude_hook``). It reads the hook's
JSON on standard input and answers on standard output as Claude Code's hooks reference says;
it never fails the user's work by its own error (any problem: one line on standard error, exit
0, Claude goes on).
"""

from __future__ import annotations

import sys

import click

from analyzer.api.claude_hook import claude_hook


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


@guard_group.command("claude-hook")
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
def claude_hook_command(policy: str | None, policies_file: str | None) -> None:
    """A Claude Code hook: stop Claude when the policy trips.

    Reads the hook's JSON on stdin (it names the transcript), replays the session so far
    through the policy and, when it trips, answers {"continue": false, "stopReason": ...}
    (a stop) or, after a tool, {"decision": "block", "reason": ...} (a nudge). Otherwise it
    says nothing. Any problem is one line on stderr and exit 0: the hook never stops your
    work by its own error. Example, in .claude/settings.json:

    \b
      {"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [{"type": "command",
        "command": "llm-forensics guard claude-hook --policy NAME"}]}]}}
    """
    if not policy:  # (not click's usage error: its exit 2 would block Claude Code's tool)
        click.echo("llm-forensics guard: give --policy NAME (going on)", err=True)
        return
    try:
        text = sys.stdin.read()
    except Exception as exc:  # (stdin unreadable: go on)
        click.echo(f"llm-forensics guard: cannot read the hook's input: {exc} (going on)", err=True)
        return
    said = claude_hook(text, policy, policies_file)
    if said.stdout:
        click.echo(said.stdout)
    if said.stderr:
        click.echo(said.stderr, err=True)


COMMANDS = (guard_group,)
