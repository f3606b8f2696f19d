"""The one place that finds the data shipped beside the code, and the installed command.

``queries/`` (detectors) and ``reports/`` (templates) sit at the top of the checkout and are
force-included into the wheel as ``analyzer/_data/<name>``. An installed copy finds the packaged
folder; a checkout or editable install finds the top-level one.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from analyzer.errors import ForensicsError

_PACKAGE = Path(__file__).resolve().parents[1]


def resource_dir(name: str) -> Path:
    """Return the folder ``name`` (``queries`` or ``reports``), installed or in the checkout."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise ForensicsError(f"the {name}/ folder is missing from this installation")


def package_sql(name: str) -> str:
    """Text of an SQL file that lives inside the package (schema, shared macros)."""
    return (_PACKAGE / "sql" / name).read_text(encoding="utf-8")


COMMAND = "llm-forensics"


def command_path() -> str:
    """The absolute path of the installed ``llm-forensics`` command, for a line another program
    runs (a Claude Code hook runs with the PATH it was started with, which need not hold a
    venv or ``~/.local/bin``): the script this process was started as, else the one on PATH,
    else the one beside this interpreter; the bare name only when none is found."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if started is not None and started.name == COMMAND and started.is_file():
        return os.path.abspath(started)
    on_path = shutil.which(COMMAND)
    if on_path:
        return os.path.abspath(on_path)
    beside = Path(sys.executable).parent / COMMAND
    if beside.is_file():
        return str(beside)
    return COMMAND
