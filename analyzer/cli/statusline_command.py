"""``llm-forensics statusline``: Claude Code's status line (``analyzer.api.statusline``).

The installed command answers it without this module (``analyzer.cli.entry``); this is its
``--help``, and the way in for ``python -m analyzer`` and the tests' CliRunner.
"""

from __future__ import annotations

import sys

import click


@click.command("statusline")
def statusline_command() -> None:
    """Claude Code's status line: the session's spend, today's, the nearest cap, a guard
    that trips.

    Reads the JSON Claude Code gives a status line command on stdin (it names the session's
    transcript) and prints one short line, e.g.

    \b
      $4.12 session | $18.40 today | daily_cost_cap 92% of $20.00 | STOP opencode_doom_loop

    Today is the UTC day, as the usage views and the caps count it, and adds what the default
    store knew the other sessions spent (as of its last refresh). The caps shown are those
    the hooks on this session run (`guard install`). It never fails: a problem is said on
    the line itself.

    Example, in .claude/settings.json, with the command's absolute path:

    \b
      {"statusLine": {"type": "command",
        "command": "/home/you/.local/bin/llm-forensics statusline"}}
      echo '{"transcript_path": "session.jsonl"}' | llm-forensics statusline
    """
    from analyzer.api.statusline import run_statusline

    click.echo(run_statusline(getattr(sys.stdin, "buffer", None)))
