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
from importlib.abc import Loader
from importlib.machinery import ModuleSpec, PathFinder
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
    """Make pyarrow's one look for pandas find none (unless pandas is already imported): at
    once if pyarrow is loaded, else when it is (a command that never builds an Arrow table
    never imports pyarrow for it)."""
    if "pandas" in sys.modules:
        return
    if "pyarrow" in sys.modules:
        _first_conversion(sys.modules["pyarrow"])
    elif not any(isinstance(f, _WhenPyarrowLoads) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenPyarrowLoads())


def _first_conversion(pa: ModuleType) -> None:
    """pyarrow's first conversion, with pandas not to be found."""
    if "pandas" in sys.modules:
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # the first conversion: pyarrow looks for pandas here, once
    finally:
        sys.meta_path.remove(finder)


class _WhenPyarrowLoads:
    """A finder that waits for ``import pyarrow``: it lets the import run as it would, then
    makes pyarrow's first conversion (``_first_conversion``), and leaves ``sys.meta_path``."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "pyarrow":
            return None
        sys.meta_path.remove(self)
        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _ThenSkip(spec.loader)
        return spec


class _ThenSkip(Loader):
    """pyarrow's own loader, then its first conversion."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        _first_conversion(module)
