"""The command line: thin commands over the library, one error boundary.

Exit codes: 0 ran clean; 1 findings at or above --fail-on; 2 usage error; 3 input or runtime
error (one line ``Error: <file>:<line>: <what>``, no traceback unless --traceback); 4 ran, but
some input found in a folder was not read (each file named on stderr).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, NoReturn

import click

from analyzer import __version__
from analyzer.cli import CONSOLE
from analyzer.console import Console, safe_line, use
from analyzer.errors import ForensicsError, Interrupted

# Each command and where it is defined, imported when it runs (or is listed by --help): a
# command imports only what it uses, and ``--version`` nothing of the library.
COMMANDS: dict[str, str] = {
    "ingest": "analyzer.cli.pipeline_commands:ingest",
    "detect": "analyzer.cli.pipeline_commands:detect_command",
    "audit": "analyzer.cli.pipeline_commands:audit",
    "report": "analyzer.cli.store_commands:report_command",
    "backtest": "analyzer.cli.store_commands:backtest_command",
    "usage": "analyzer.cli.usage_command:usage_command",
    "daily": "analyzer.cli.usage_command:daily_command",
    "weekly": "analyzer.cli.usage_command:weekly_command",
    "monthly": "analyzer.cli.usage_command:monthly_command",
    "session": "analyzer.cli.usage_command:session_command",
    "blocks": "analyzer.cli.blocks_command:blocks_command",
    "incidents": "analyzer.cli.store_commands:incidents_command",
    "show": "analyzer.cli.store_commands:show_command",
    "rejects": "analyzer.cli.store_commands:rejects_command",
    "export": "analyzer.cli.store_commands:export_command",
    "share": "analyzer.cli.store_commands:share_command",
    "detectors": "analyzer.cli.catalog:detectors_command",
    "sample": "analyzer.cli.catalog:sample",
    "policies": "analyzer.cli.catalog:policies_command",
    "guard": "analyzer.cli.guard_command:guard_group",
    "statusline": "analyzer.cli.statusline_command:statusline_command",
    "watch": "analyzer.cli.watch_command:watch_command",
    "config": "analyzer.cli.config_command:config_group",
}


class ForensicsGroup(click.Group):
    """The one error boundary: known errors become one line on stderr and exit 3. Its
    commands are imported when they are asked for (``COMMANDS``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, name = where.split(":")
        command = getattr(importlib.import_module(module), name)
        assert isinstance(command, click.Command), where
        return command

    def invoke(self, ctx: click.Context) -> Any:
        # The run's console: made here, before the command's options (--quiet, --verbose) are
        # read into it, and the one the library writes to until the command ends.
        console = ctx.meta.setdefault(CONSOLE, Console())
        with use(console):
            return self._invoke(ctx)

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Interrupted as exc:  # Ctrl-C during ingest: what the store holds of the run
            click.echo(safe_line(str(exc)), err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            _said_interrupted(ctx)
        except ForensicsError as exc:
            if ctx.meta.get("lf.traceback"):
                raise
            click.echo(safe_line(f"Error: {exc}"), err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except BrokenPipeError:  # handled in main(): the reader of stdout went away
            raise
        except OSError as exc:  # the disk said no (full, read-only, no permission)
            if ctx.meta.get("lf.traceback"):
                raise
            from analyzer.engine.files import os_error

            click.echo(safe_line(f"Error: {os_error(exc, None)}"), err=True)
            ctx.exit(3)
        except Exception as exc:
            if _ctrl_c(exc):  # DuckDB's "Query interrupted", or an error it caused
                _said_interrupted(ctx)
            if ctx.meta.get("lf.traceback"):
                raise
            ctx.exit(_unexpected(exc))


def _ctrl_c(exc: Exception) -> bool:
    """Whether ``exc`` is Ctrl-C in one of DuckDB's forms (only DuckDB, once loaded, gives
    them: a command that never opened a store does not load it to ask)."""
    if "duckdb" not in sys.modules:
        return False
    from analyzer.engine.store import interrupted

    return interrupted(exc)


def _unexpected(exc: Exception) -> int:
    """Say an error no layer turned into a ``ForensicsError`` in one line; its exit code."""
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None and isinstance(exc, duckdb.Error):
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        click.echo(safe_line(f"Error: database: {first}"), err=True)
    else:
        click.echo(
            safe_line(f"Error: unexpected {type(exc).__name__}: {exc} (rerun with --traceback)"),
            err=True,
        )
    return 3


def _said_interrupted(ctx: click.Context) -> NoReturn:
    """Ctrl-C outside ingest (which says what it stored: ``Interrupted``)."""
    click.echo("interrupted: the step under way was not stored", err=True)
    ctx.exit(Interrupted.exit_code)


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

    Load agent logs (Claude Code, Codex, Gemini CLI, OpenCode, Cline, Aider, mini-swe-agent,
    SWE-agent, OpenHands, saved conversations) and bills (OpenRouter, LiteLLM, Anthropic and
    OpenAI usage) into a local DuckDB store, find the runaway loops, price the waste, and
    backtest the loop guards that would have stopped them. Nothing leaves the machine.

    Exit codes: 0 ran clean; 1 findings at --fail-on; 2 usage error; 3 input or runtime
    error; 4 some input found in a folder was not read (each file named on stderr).

    \b
    Examples:
      llm-forensics audit                  # your own Claude Code / Codex history
      llm-forensics audit sample_data/ -o report.html
    """


def main() -> None:
    from analyzer.engine.arrow_setup import skip_pandas

    skip_pandas()
    try:
        cli(prog_name="llm-forensics")
    except BrokenPipeError:  # `llm-forensics ... | head`: the reader left; not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)


if __name__ == "__main__":
    main()
