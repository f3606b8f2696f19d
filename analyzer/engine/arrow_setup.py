"""pyarrow without its pandas import.

The first time pyarrow converts a Python value (``pa.array``, ``pa.table``, ``from_pylist``) it
imports pandas, if installed, to see whether the value is a pandas object: about 0.2 s on
every command that builds an Arrow table (any ingest of an agent log), for nothing - this
program never hands pyarrow a pandas object. pyarrow tries that import once and remembers the
answer; :func:`skip_pandas` lets the try fail, so pyarrow treats values as plain Python. A
later explicit need of pandas (``to_pandas``, ``from_pandas``) still imports it: pyarrow tries
again when pandas is asked for by name.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class _NoPandas:
    """A finder (first on ``sys.meta_path``) that fails any import of pandas."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def skip_pandas() -> None:
    """Make pyarrow's one look for pandas find none (unless pandas is already imported)."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # the first conversion: pyarrow looks for pandas here, once
    finally:
        sys.meta_path.remove(finder)
