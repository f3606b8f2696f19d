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
import uuid
from functools import cache
from pathlib import Path
from typing import Any

from analyzer.store import Store

DATA = "data_version"
INCIDENTS = "incidents_version"


def version(store: Store, name: str) -> str:
    value = store.scalar("SELECT value FROM meta WHERE key = ?", [name])
    return str(value) if value is not None else "0"


def bump(store: Store, name: str) -> None:
    """Mark the store changed (call inside the transaction that changes it)."""
    store.con.execute(
        "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [name, uuid.uuid4().hex],
    )


@cache
def code_fingerprint() -> str:
    """Changes whenever a file of this package changes (code, SQL, templates)."""
    from analyzer import __version__
    from analyzer.resources import resource_dir

    h = hashlib.sha256(__version__.encode())
    roots = [Path(__file__).resolve().parent, resource_dir("queries"), resource_dir("reports")]
    for root in roots:
        for f in sorted(root.rglob("*")):
            if f.is_file() and f.suffix in {".py", ".sql", ".j2", ".css", ".toml"}:
                st = f.stat()
                h.update(f"{f}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()


def key(store: Store, *parts: Any, incidents: bool = True) -> str:
    """A key for a result computed from the store's current data (and incidents, unless
    ``incidents`` is false) and ``parts``."""
    seen = version(store, INCIDENTS) if incidents else None
    blob = json.dumps(
        [code_fingerprint(), version(store, DATA), seen, store.window, *parts],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def get(store: Store, name: str, k: str) -> str | None:
    value = store.scalar("SELECT payload FROM cache WHERE name = ? AND key = ?", [name, k])
    return None if value is None else str(value)


def put(store: Store, name: str, k: str, payload: str) -> None:
    """Keep ``payload`` as the one cached ``name`` (replacing the previous one); a store
    opened read-only keeps it when it closes, if the file can be written then."""
    if store.read_only:
        store.pending = [e for e in store.pending if e[0] != name] + [(name, k, payload)]
        return
    store.con.execute(
        "INSERT INTO cache VALUES (?, ?, ?) ON CONFLICT (name) "
        "DO UPDATE SET key = excluded.key, payload = excluded.payload",
        [name, k, payload],
    )
