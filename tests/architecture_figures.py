"""The figures issue 34 ("the house, step two") sets targets for, measured on the package:
modules that run SQL themselves, multi-line SQL in Python strings, modules flat in
``analyzer/``, long functions and ``# fmt: skip`` markers.

``python -m tests.architecture_figures`` prints each beside its recorded baseline and its
target; ``tests/test_architecture.py`` fails when one grows past its baseline (lower a baseline
when a refactoring lowers the figure: the ratchet only turns one way)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "analyzer"

# A call that runs SQL on a connection: ``con.execute(``, ``.sql(``, ``.query(``, ``executemany``
# (not sqlglot's ``tree.sql(dialect=...)``, which writes text).
_RUNS_SQL = re.compile(r"\.(?:execute|executemany|query)\(|\.sql\((?!dialect=)")
# SQL as this project writes it: keywords in capitals (prose in a docstring is not counted).
_SQL_WORD = re.compile(
    r"\b(?:SELECT|INSERT|UPDATE|DELETE|CREATE|WITH|COPY|ATTACH|ALTER|DROP)\b[\s\S]*"
    r"\b(?:FROM|INTO|TABLE|VIEW|SET|AS|TO|DATABASE)\b"
)
LONG_FUNCTION = 80
ENGINE = PACKAGE / "engine"  # the package that owns the connection

# name: (what it counts, its value on main before issue 34 (commit ca33582, measured by this
# script as it is now: sqlglot's text-writing ``.sql(dialect=`` not counted, f-strings read
# whole), the baseline it may not grow past (lowered as refactorings lower it), issue 34's
# target).
FIGURES: dict[str, tuple[str, int, int, int]] = {
    "sql_modules": ("modules outside an engine that run SQL (execute/sql/query)", 30, 1, 3),
    "sql_string_lines": (
        "lines of multi-line SQL in Python strings and f-strings",
        1080,
        0,
        150,
    ),
    "flat_modules": ("modules flat in analyzer/", 43, 4, 12),
    "long_functions": (f"functions over {LONG_FUNCTION} lines", 15, 0, 0),
    "fmt_skip": ("`# fmt: skip` markers", 253, 0, 20),
}


def _sources(package: Path) -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in sorted(package.rglob("*.py"))}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _string_nodes(tree: ast.AST) -> list[ast.expr]:
    """String literals and f-strings (not docstrings, nor the parts of an f-string counted
    twice)."""
    skip = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    skip |= _docstrings(tree)
    return [
        n
        for n in ast.walk(tree)
        if id(n) not in skip
        and (
            isinstance(n, ast.JoinedStr)
            or (isinstance(n, ast.Constant) and isinstance(n.value, str))
        )
    ]


def _fstring_text(node: ast.JoinedStr) -> str:
    """An f-string's literal text, each placeholder as ``x`` (``ast.unparse`` would write a
    newline as ``\\n`` and hide the keyword after it)."""
    return "".join(
        v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "x"
        for v in node.values
    )


def _sql_lines(tree: ast.AST) -> int:
    total = 0
    for node in _string_nodes(tree):
        lines = (node.end_lineno or node.lineno) - node.lineno + 1
        text = node.value if isinstance(node, ast.Constant) else _fstring_text(node)
        if lines > 1 and isinstance(text, str) and _SQL_WORD.search(text):
            total += lines
    return total


def runs_sql(path: Path, text: str) -> bool:
    """Whether a module outside the engine runs SQL on a connection itself."""
    return ENGINE not in path.parents and bool(_RUNS_SQL.search(text))


def long_functions(tree: ast.AST) -> list[str]:
    """The functions (and methods) over ``LONG_FUNCTION`` lines, with their lengths."""
    return [
        f"{n.name} ({(n.end_lineno or n.lineno) - n.lineno + 1} lines)"
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and (n.end_lineno or n.lineno) - n.lineno + 1 > LONG_FUNCTION
    ]


def per_module(package: Path = PACKAGE) -> dict[str, tuple[bool, int, list[str]]]:
    """Each module (its path under the package's parent): whether it runs SQL outside the
    engine, its lines of multi-line SQL in strings, its functions over the limit."""
    found = {}
    for path, text in _sources(package).items():
        tree = ast.parse(text)
        name = path.relative_to(package.parent).as_posix()
        found[name] = (runs_sql(path, text), _sql_lines(tree), long_functions(tree))
    return found


def measure(package: Path = PACKAGE) -> dict[str, int]:
    """Each figure on the package (as it is now, or another copy of it)."""
    sources = _sources(package)
    modules = per_module(package)
    return {
        "sql_modules": sum(1 for runs, _, _ in modules.values() if runs),
        "sql_string_lines": sum(lines for _, lines, _ in modules.values()),
        "flat_modules": sum(1 for p in sources if p.parent == package and p.name != "__init__.py"),
        "long_functions": sum(len(long) for _, _, long in modules.values()),
        "fmt_skip": sum(text.count("# fmt: skip") for text in sources.values()),
    }


def main() -> None:
    """Print the figures (of the package, or of the copy of it named on the command line)."""
    now = measure(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else PACKAGE)
    print(f"{'figure':<62} {'before':>7} {'now':>6} {'baseline':>9} {'target':>7}")
    for name, (what, before, baseline, target) in FIGURES.items():
        print(f"{what:<62} {before:>7,} {now[name]:>6,} {baseline:>9,} {target:>7,}")


if __name__ == "__main__":
    main()
