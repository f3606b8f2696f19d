"""Where the default store lives, and the name this machine's calls are kept under.

With no ``--db``, every command uses one store in the user's data folder: ``$LLM_FORENSICS_DB``
when set, else ``llm-forensics/forensics.duckdb`` under ``$XDG_DATA_HOME`` (any platform, when
set), else the platform's data folder: ``~/.local/share`` (Linux and other Unixes),
``~/Library/Application Support`` (macOS), ``%LOCALAPPDATA%`` (Windows).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from analyzer.errors import ForensicsError

DB_ENV = "LLM_FORENSICS_DB"
FOLDER = "llm-forensics"
STORE_NAME = "forensics.duckdb"


def data_home(env: Mapping[str, str], home: Path, system: str = sys.platform) -> Path:
    """The folder user data goes in, on ``system`` (``sys.platform``'s names).

    >>> from pathlib import PurePosixPath as P
    >>> str(data_home({}, P("/h"), "linux")), str(data_home({}, P("/h"), "darwin"))
    ('/h/.local/share', '/h/Library/Application Support')
    >>> str(data_home({"XDG_DATA_HOME": "/x"}, P("/h"), "darwin"))
    '/x'
    """
    xdg = env.get("XDG_DATA_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():  # (the XDG spec: a relative value is to be ignored)
        return Path(xdg)
    if system == "darwin":
        return home / "Library" / "Application Support"
    if system.startswith("win"):
        local = env.get("LOCALAPPDATA", "").strip()
        return Path(local) if local else home / "AppData" / "Local"
    return home / ".local" / "share"


def default_store(env: Mapping[str, str], home: Path, system: str = sys.platform) -> Path:
    """The default store's file: ``$LLM_FORENSICS_DB``, else ``forensics.duckdb`` in
    ``llm-forensics`` under :func:`data_home` (``~`` and ``~user`` at the start of the
    variable are home folders, as a shell reads them).

    >>> from pathlib import PurePosixPath as P
    >>> str(default_store({}, P("/h"), "linux"))
    '/h/.local/share/llm-forensics/forensics.duckdb'
    >>> str(default_store({"LLM_FORENSICS_DB": "team.duckdb"}, P("/h"), "linux"))
    'team.duckdb'
    >>> str(default_store({"LLM_FORENSICS_DB": "~/s/team.duckdb"}, P("/h"), "linux"))
    '/h/s/team.duckdb'
    """
    named = env.get(DB_ENV, "").strip()
    if named:
        return _home_expanded(named, home)
    return data_home(env, home, system) / FOLDER / STORE_NAME


def _home_expanded(named: str, home: Path) -> Path:
    """``named`` with a leading ``~`` (``home``) or ``~user`` (that user's home folder)
    expanded; a ``~user`` of no user here is an error, never a folder named ``~user``."""
    if not named.startswith("~"):
        return Path(named)
    first, sep, rest = named.replace(os.sep, "/").partition("/")
    if first == "~":
        return home / rest if rest else home
    expanded = os.path.expanduser(first)
    if expanded == first:
        raise ForensicsError(
            f"${DB_ENV} = {named!r}: there is no user {first[1:]!r} on this machine, so "
            f"{first} is no home folder; give the store's full path"
        )
    return Path(expanded) / rest if sep and rest else Path(expanded)


def this_machine() -> str:
    """The name this machine's calls are kept under: its host name, without a domain
    (``laptop.example.com`` is ``laptop``); ``localhost`` if it has none."""
    import socket  # (only here: the fast hook does not import it)

    name = socket.gethostname().split(".")[0].strip()
    return name or "localhost"
