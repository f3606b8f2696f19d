"""Results that cost seconds to recompute, kept in the store and reused while nothing they were
computed from has changed.

Two counters in ``meta`` say when the store changed: ``data_version`` (bumped by every
transaction that loads a file or re-links calls) and ``incidents_version`` (bumped whenever the
detectors rewrite incidents). A cached result is keyed by a hash of those, of what was asked
(detectors and their parameters, policies, report options) and of this program's own code, so
a stale entry is never served: it simply does not match and is recomputed. Same inputs give the
same bytes, so a cached page is the page that would have been written.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from functools import cache
from pathlib import Path
from typing import Any

from analyzer.engine.store import Store

DATA = "data_version"
INCIDENTS = "incidents_version"
# The largest result kept. A guard replay listing half a million false trips was 330 MB of
# JSON: inserting it took the process 1.2 GB past its memory limit (and reading it back 13 s).
MAX_PAYLOAD_CHARS = 32 * 2**20


def version(store: Store, name: str) -> str:
    value = store.scalar("SELECT value FROM meta WHERE key = ?", [name])
    return str(value) if value is not None else "0"


def linked(store: Store) -> bool:
    """Whether what the store holds was linked (bills to logs) since it last changed: the
    data version the last link noted is the store's (a run stopped between loading its files
    and linking them leaves it behind)."""
    noted = store.scalar("SELECT value FROM meta WHERE key = 'linked_version'")
    return noted is not None and noted == version(store, DATA)


def bump(store: Store, name: str) -> None:
    """Mark the store changed (call inside the transaction that changes it)."""
    store.engine.run(
        "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [name, uuid.uuid4().hex],
    )


# The module whose code computes each cached step (its key changes when any module it imports,
# at any depth, or a file those modules read - SQL, templates, presets - changes; not when a
# module of another step does).
STEPS = {
    "detect": "analyzer.detect.detectors",
    "guards": "analyzer.guards.backtest",
    "report": "analyzer.report.pages",
}
_READS = re.compile(r'(?:resource_dir|package_sql)\(\s*"([\w.]+)"\s*\)|"([\w/-]+\.(?:sql|toml))"')


# ``from analyzer.x import a, b`` (parenthesised over lines too) and ``import analyzer.x``.
_FROM = re.compile(r"^\s*from\s+(analyzer[\w.]*)\s+import\s+(\([^)]*\)|[^\n]*)", re.MULTILINE)
_IMPORT = re.compile(r"^\s*import\s+(analyzer[\w.]*)", re.MULTILINE)


def _imports(text: str) -> list[str]:
    """The ``analyzer`` modules (or names in them: a module imported by name is a module) a
    module imports, at any depth of the file."""
    found = [m.group(1) for m in _IMPORT.finditer(text)]
    for m in _FROM.finditer(text):
        names = re.sub(r"#[^\n]*", "", m.group(2)).strip("()")
        found.append(m.group(1))
        found += [f"{m.group(1)}.{n.split()[0]}" for n in names.split(",") if n.strip()]
    return found


_CODE = {".py", ".sql", ".j2", ".css", ".toml"}  # what in a data folder is code, not notes


def _module_file(root: Path, name: str) -> Path | None:
    rel = Path(*name.split(".")[1:])
    for candidate in (root / rel / "__init__.py", (root / rel).with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def step_files(step: str, root: Path | None = None) -> list[Path]:
    """The files a cached step's result depends on: the module that computes it, every
    ``analyzer`` module it imports at any depth (function-level imports too), and the files
    and folders those modules read by name (an SQL or TOML file named in a string, a folder
    given to ``resource_dir``)."""
    from analyzer.engine.resources import resource_dir

    root = root or Path(__file__).resolve().parents[1]
    seen: set[Path] = set()
    todo = [STEPS[step]]
    read: set[Path] = set()
    while todo:
        path = _module_file(root, todo.pop())
        if path is None or path in seen:
            continue
        seen.add(path)
        text = path.read_text(encoding="utf-8")
        todo += _imports(text)
        for m in _READS.finditer(text):
            if m.group(1) and "." not in m.group(1):  # a folder of data
                folder = resource_dir(m.group(1)).rglob("*")
                read |= {f for f in folder if f.is_file() and f.suffix in _CODE}
            else:
                name = m.group(1) or m.group(2)
                read |= {
                    f for f in (root / "sql" / name, path.parent / name, root / name) if f.is_file()
                }
    return sorted(seen | read)


@cache
def code_fingerprint(step: str) -> str:
    """Changes whenever a file ``step`` depends on changes (``step_files``)."""
    from analyzer import __version__

    h = hashlib.sha256(__version__.encode())
    for f in step_files(step):
        st = f.stat()
        h.update(f"{f}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()


def key(store: Store, step: str, *parts: Any, incidents: bool = True) -> str:
    """A key for the result of ``step`` (one of ``STEPS``) computed from the store's current
    data (and incidents, unless ``incidents`` is false), its own code and ``parts``."""
    seen = version(store, INCIDENTS) if incidents else None
    blob = json.dumps(
        [code_fingerprint(step), version(store, DATA), seen, store.window, step, *parts],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def get(store: Store, name: str, k: str) -> str | None:
    value = store.scalar("SELECT payload FROM cache WHERE name = ? AND key = ?", [name, k])
    return None if value is None else str(value)


def keeps(store: Store) -> bool:
    """Whether results are kept in ``store``: not in a throwaway store in memory (``audit``
    without ``--db``), which nothing reads again."""
    return store.path != ":memory:"


def put(store: Store, name: str, k: str, payload: str) -> None:
    """Keep ``payload`` as the one cached ``name`` (replacing the previous one); a store
    opened read-only keeps it when it closes, if the file can be written then. A payload over
    :data:`MAX_PAYLOAD_CHARS` is not kept (nor anything in a store that ``keeps`` nothing):
    computing it again costs less than the memory that writing and reading it back takes."""
    if not keeps(store) or len(payload) > MAX_PAYLOAD_CHARS:
        return
    if store.read_only:
        store.pending = [e for e in store.pending if e[0] != name] + [(name, k, payload)]
        return
    store.engine.run("store/keep_cache.sql", [name, k, payload])
