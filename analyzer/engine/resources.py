"""The one place that finds the data shipped beside the code.

``queries/`` (detectors) and ``reports/`` (templates) sit at the top of the checkout and are
force-included into the wheel as ``analyzer/_data/<name>``. An installed copy finds the packaged
folder; a checkout or editable install finds the top-level one.
"""

from __future__ import annotations

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
