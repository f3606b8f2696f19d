"""The layers are a contract: checked here over every import in analyzer/.

cli -> pipeline (api, sample) -> report and views -> analysis (detect, guards) -> load (reading
files into the store) -> formats (one module per input format) -> ingest (the machinery a format
is written with) -> engine (the store, the SQL) -> the foundation (model, errors, console). A
module may import modules of its own layer or any layer below, never one above; and no module
imports itself round a circle. The size rule is on functions, not files: the figures of
``tests/architecture_figures.py`` (functions over 80 lines among them) may only fall.
"""

from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

import pytest

from tests.helpers import REPO

PACKAGE = REPO / "analyzer"

# Top to bottom, by package (a package holds its submodules). No module is an exception to its
# package's layer: the folder graph is the layer graph. A module in none is an error.
LAYERS: list[tuple[str, set[str]]] = [
    ("cli", {"analyzer.cli", "analyzer.__main__"}),
    ("pipeline", {"analyzer.api", "analyzer.pipeline", "analyzer.sample"}),
    ("report", {"analyzer.report", "analyzer.views"}),
    ("analysis", {"analyzer.detect", "analyzer.guards"}),
    ("load", {"analyzer.load"}),
    ("formats", {"analyzer.formats"}),
    ("ingest", {"analyzer.ingest"}),
    ("engine", {"analyzer.engine"}),
    ("foundation", {"analyzer", "analyzer.model", "analyzer.errors", "analyzer.console"}),
]


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    """The index of the layer holding ``module`` (a package holds its submodules)."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for i, (_, members) in enumerate(LAYERS):
        for m in members:
            inside = module == m or (m != "analyzer" and module.startswith(m + "."))
            if inside and (best is None or len(m) > best[0]):
                best = (len(m), i)
    if best is None and module == "analyzer":
        return len(LAYERS) - 1
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[1]


def imports(path: Path) -> set[str]:
    """The analyzer modules a file imports (at any depth of the file: a function-level import
    is an import too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("analyzer")}
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.startswith("analyzer")
        ):
            # `from analyzer import cache` imports the module analyzer.engine.cache
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                is_module = (REPO / Path(*sub.split(".")).with_suffix(".py")).exists() or (
                    REPO / Path(*sub.split(".")) / "__init__.py"
                ).exists()
                found.add(sub if is_module else node.module)
    return found


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {m: imports(p) - {m} for m, p in MODULES.items()}


def test_every_module_has_a_layer() -> None:
    for m in MODULES:
        layer_of(m)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_nothing_imports_upward(module: str) -> None:
    mine = layer_of(module)
    upward = sorted(
        f"{dep} ({LAYERS[layer_of(dep)][0]})" for dep in GRAPH[module] if layer_of(dep) < mine
    )
    assert upward == [], f"{module} ({LAYERS[mine][0]}) imports upward: {', '.join(upward)}"


def test_no_import_circle() -> None:
    """Between modules (a package's __init__ importing its own submodules is not a circle)."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for dep in sorted(GRAPH.get(m, ())):
            if dep not in MODULES or m.startswith(dep + "."):
                continue  # a submodule importing its own package's registry
            if state.get(dep) == 1:
                raise AssertionError("import circle: " + " -> ".join([*path, dep]))
            if state.get(dep) is None:
                visit(dep)
        path.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m)


def package_of(module: str) -> str:
    """The package a module is in (``analyzer.detect.link`` -> ``detect``; a top module is its
    own: ``pipeline``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_no_circle_between_packages() -> None:
    """Between packages too: no package imports one that imports it back, by any road, and
    none is excepted."""
    edges: dict[str, set[str]] = {}
    for m, deps in GRAPH.items():
        edges.setdefault(package_of(m), set()).update(
            package_of(d) for d in deps if package_of(d) != package_of(m)
        )
    state: dict[str, int] = {}

    def visit(pkg: str, path: list[str]) -> None:
        state[pkg] = 1
        for dep in sorted(edges.get(pkg, ())):
            if state.get(dep) == 1:
                raise AssertionError("package circle: " + " -> ".join([*path, pkg, dep]))
            if state.get(dep) is None:
                visit(dep, [*path, pkg])
        state[pkg] = 2

    for pkg in sorted(edges):
        if pkg not in state:
            visit(pkg, [])


def test_no_module_is_an_exception_to_its_package() -> None:
    packages = {package_of(m) for members in (ms for _, ms in LAYERS) for m in members}
    named = [m for _, members in LAYERS for m in members if m.count(".") > 1]
    assert named == [], f"modules named apart from their package: {named} ({packages})"


def test_the_ingest_layer_never_reaches_up() -> None:
    """Spelled out, as the issue states it: ingest never imports link, report or pipeline."""
    for m in MODULES:
        if m.startswith("analyzer.ingest"):
            assert not {
                d for d in GRAPH[m] if d.split(".")[1:2] in (["link"], ["report"], ["pipeline"])
            }, m


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "analyzer.__main__"))
def test_doctests(module: str) -> None:
    """The pure helpers' examples (parse_duration, parse_sweep, the formatting helpers...)."""
    failed, _ = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert failed == 0


def test_the_plumbing_figures_never_grow() -> None:
    """Issue 34's figures (``python -m tests.architecture_figures`` prints them): none may
    grow past its baseline; a refactoring that lowers one lowers its baseline too."""
    from tests.architecture_figures import FIGURES, measure

    now = measure()
    grown = {n: (now[n], base) for n, (_, _, base, _) in FIGURES.items() if now[n] > base}
    assert grown == {}, f"grown past the baseline (now, baseline): {grown}"


# Issue 34, step 6: the rules that keep the plumbing straight.
RUNS_SQL_ITSELF = {
    "analyzer/detect/spark_engine.py",  # Spark is an engine: it runs the detectors' SQL itself
}


def _modules() -> dict[str, tuple[bool, int, list[str]]]:
    from tests.architecture_figures import per_module

    return per_module()


def test_no_module_outside_the_engine_runs_sql() -> None:
    """Only ``analyzer/engine/`` (and Spark's engine) call execute/sql/query on a connection;
    everything else runs SQL through ``store.engine`` or an ``Engine``."""
    running = {m for m, (runs, _, _) in _modules().items() if runs}
    assert running <= RUNS_SQL_ITSELF, f"run it through the engine: {running - RUNS_SQL_ITSELF}"


def test_no_multi_line_sql_outside_sql_files() -> None:
    holding = {m: lines for m, (_, lines, _) in _modules().items() if lines}
    assert holding == {}, f"put the statements in analyzer/sql/ (lines per module): {holding}"


def test_no_function_over_80_lines() -> None:
    """The size rule is on functions, not files: split by meaning, never squeeze."""
    long = {m: f for m, (_, _, f) in _modules().items() if f}
    assert long == {}, f"split them: {long}"


def test_no_fmt_skip() -> None:
    """Code is laid out by ``ruff format``; ``# fmt: skip`` compressed it to meet a size rule."""
    from tests.architecture_figures import measure

    assert measure()["fmt_skip"] == 0


FORMAT_MODULES = sorted(p for p in (PACKAGE / "formats").rglob("*.py"))


def test_a_format_is_given_an_engine_never_a_connection() -> None:
    """The input formats (``analyzer/formats/``) run SQL through the load's engine
    (``LoadContext.engine``): none imports duckdb or reaches for a raw connection."""
    specs = [p for p in FORMAT_MODULES if "SPEC = FormatSpec(" in p.read_text()]
    assert len(specs) >= 18
    for path in FORMAT_MODULES:
        text = path.read_text(encoding="utf-8")
        assert "import duckdb" not in text, path.name
        assert ".con)" not in text and "ctx.con" not in text and ".con." not in text, path.name


# What a format may import besides the machinery's public pieces: other formats, the
# foundation, and the type of the engine it is handed.
FORMAT_MAY_IMPORT = (
    "analyzer.formats",
    "analyzer.errors",
    "analyzer.console",
    "analyzer.model",
    "analyzer.engine.engine",
    # the layout of a Parquet export and of a shared history's batches, which the share
    # format reads (``llm-forensics share DIR``, then ``ingest DIR``)
    "analyzer.engine.export_layout",
)
# ``places`` is no format: where the agents keep their logs, and Aider's are under the roots
# the user named (kept beside the default store by ``analyzer.engine.roots``).
PLACES_MAY_IMPORT = ("analyzer.engine.roots",)


def test_a_format_imports_only_the_machinerys_public_pieces() -> None:
    """A format imports of ``analyzer.ingest`` only the modules its ``PUBLIC`` names (never
    the sink, its Arrow tables or the masks behind the content keys), and nothing of the
    load, the analysis or above."""
    from analyzer.ingest import PUBLIC

    wrong: dict[str, list[str]] = {}
    for m in MODULES:
        if not m.startswith("analyzer.formats"):
            continue
        for dep in sorted(GRAPH[m]):
            if dep.startswith("analyzer.ingest."):
                ok = dep.split(".")[2] in PUBLIC
            else:
                ok = any(dep == a or dep.startswith(a + ".") for a in FORMAT_MAY_IMPORT)
                ok = ok or (m == "analyzer.formats.places" and dep in PLACES_MAY_IMPORT)
            if not ok:
                wrong.setdefault(m, []).append(dep)
    assert wrong == {}, f"formats importing what is not the machinery's public pieces: {wrong}"


def test_a_format_says_what_was_said_through_the_conversation_builder() -> None:
    """No format builds a message row by hand: it says what a session said with the builder
    (``ingest/conversation.py``), which numbers, measures and excerpts every message alike."""

    def builds_rows(path: Path) -> bool:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                if name in ("MessageRow", "Message"):
                    return True
        return "MessageRow" in path.read_text(encoding="utf-8")

    by_hand = [p.name for p in FORMAT_MODULES if builds_rows(p)]
    assert by_hand == [], f"message rows built by hand in: {by_hand}"
