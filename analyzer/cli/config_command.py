"""``llm-forensics config``: what is kept beside the default store for every command, the roots
of the user's projects (``analyzer.engine.roots``): Aider keeps no central folder, so its chat
histories are found under the folders the user names once."""

from __future__ import annotations

import os
from pathlib import Path

import click

from analyzer.console import note, out
from analyzer.engine import roots as kept
from analyzer.formats.places import chat_histories


@click.group("config")
def config_group() -> None:
    """The folders to read Aider's chat histories from, named once.

    Aider keeps no central folder: it writes its chat history, .aider.chat.history.md, into
    each project folder it runs in. Name a folder of your projects (a root) once, and every
    command given no input reads the chat history of the root itself and of each folder one
    level below it (ROOT/*/.aider.chat.history.md). The roots are kept in roots.json beside
    the default store; LLM_FORENSICS_ROOTS (folders separated by ':', ';' on Windows) adds
    roots for one run. A project folder given to audit or ingest is read with its chat
    history whatever the roots.

    \b
    Examples:
      llm-forensics config add-root ~/code        # ~/code/*/.aider.chat.history.md
      llm-forensics config roots                  # each root, and its chat histories
      llm-forensics config remove-root ~/code
      LLM_FORENSICS_ROOTS=~/work:~/play llm-forensics usage daily
    """


@config_group.command("add-root")
@click.argument("folder", metavar="DIR")
def add_root_command(folder: str) -> None:
    """Read the Aider chat histories in DIR and in each folder one level below it.

    DIR must be a folder; it is kept by its absolute path (a linked folder keeps its name).
    The next command given no input reads the histories found there, and each one added
    to a project below the root later.

    \b
    Example:
      llm-forensics config add-root ~/code
    """
    path, added = kept.add_root(folder, os.environ, Path.home())
    if not added:
        out(f"{path} is a root already: {_histories(path)}")
        return
    out(f"added root {path}: {_histories(path)}, read by every command given no input")


@config_group.command("remove-root")
@click.argument("folder", metavar="DIR")
def remove_root_command(folder: str) -> None:
    """Stop reading the chat histories under DIR (a root, there or gone).

    What was read from it before stays in the store.

    \b
    Example:
      llm-forensics config remove-root ~/code
    """
    path = kept.remove_root(folder, os.environ, Path.home())
    out(f"removed root {path} (the calls read from it stay in the store)")


@config_group.command("roots")
def roots_command() -> None:
    """List the roots, and how many Aider chat histories each holds.

    One line a root: its path, then the number of .aider.chat.history.md files in it and in
    the folders one level below it (those a command given no input reads), or that it is not
    there; roots from LLM_FORENSICS_ROOTS say so.

    \b
    Example:
      llm-forensics config roots
    """
    env, home = os.environ, Path.home()
    listed = kept.all_roots(env, home)
    if not listed:
        note(
            "no roots: add a folder of your projects with `llm-forensics config add-root DIR` "
            f"(kept in {kept.roots_file(env, home)})"
        )
        return
    for root in listed:
        where = "" if root.stored else f"  (from ${kept.ROOTS_ENV})"
        out(f"{root.path}  {_histories(root.path)}{where}")


def _histories(root: Path) -> str:
    """``3 Aider chat histories`` (``.aider.chat.history.md`` files), or that the root is not
    there."""
    if not root.is_dir():
        return "not there"
    n = sum(1 for p in chat_histories(root) if p.is_file())
    return f"{n:,} Aider chat {'history' if n == 1 else 'histories'}"
