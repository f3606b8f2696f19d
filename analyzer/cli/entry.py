"""The installed command's entry point: ``llm-forensics ...``.

The commands an agent runs on every step (``guard claude-hook``, Claude Code's hook, and
``statusline``, its status line) must answer in milliseconds, so they are told apart here
from the command line's words alone and run without click or the rest of the command line
(``analyzer.api.hook_fast``). Any other command line, or one of theirs that the fast path
does not understand, goes to the full command line (``analyzer.cli.main``), which says what
is wrong the way every command does.
"""

from __future__ import annotations

import sys


def main() -> None:
    args = sys.argv[1:]
    if args[:2] == ["guard", "claude-hook"] or args[:1] == ["statusline"]:
        from analyzer.api.hook_fast import run_fast

        code = run_fast(args)
        if code is not None:
            sys.exit(code)
    from analyzer.cli.main import main as full

    full()
