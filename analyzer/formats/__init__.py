"""The input formats this tool reads, one module each (bills under ``bills/``), sniffed from
content; this module is their registry.

A format is parsing: it reads its records and hands them to the ingest machinery's public
pieces (``analyzer.ingest``: the conversation builder, the lowering to the store, the value
readers). Reading files, sniffing them and loading them in batches is ``analyzer.load``, which
asks this registry which formats there are.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyzer.errors import InputError
from analyzer.ingest.spec import FormatSpec

# The type of a format, as the rest of the package names it.
Format = FormatSpec


def _discover() -> tuple[FormatSpec, ...]:
    """The ``SPEC`` of every module of this package and of ``bills`` that declares one, in
    sniffing order: adding a format is adding its module."""
    import pkgutil  # (here: one format's module imports this package without walking it)

    found: list[FormatSpec] = []
    for info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        module = importlib.import_module(info.name)
        spec = vars(module).get("SPEC")
        if isinstance(spec, FormatSpec):
            found.append(spec)
    names = [s.name for s in found]
    assert len(set(names)) == len(names), f"two formats share a name: {sorted(names)}"
    return tuple(sorted(found, key=lambda f: (f.sniff_order, f.name)))


@cache
def formats() -> tuple[FormatSpec, ...]:
    """Every supported input format, in sniffing order (their modules imported the first time
    they are asked for: the default places and the agents' folders need none, ``places``)."""
    return _discover()


def __getattr__(name: str) -> Any:
    if name == "FORMATS":  # (``registry.FORMATS``: the formats, imported when first read)
        return formats()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    FORMATS: tuple[FormatSpec, ...]


def format_names() -> list[str]:
    return [f.name for f in formats()]


def billing_formats() -> list[str]:
    """The formats that are bills per call (a gateway's: ``kind = "bill"``)."""
    return [f.name for f in formats() if f.gateway_bill]


def bucket_bill_formats() -> list[str]:
    """The formats that are bills per time bucket (``kind = "bucket_bill"``)."""
    return [f.name for f in formats() if f.kind == "bucket_bill"]


def format_by_name(name: str) -> FormatSpec:
    for fmt in formats():
        if name == fmt.name:
            return fmt
    raise InputError(f"unknown format {name!r} (known: {', '.join(format_names())})")


def agent_folders() -> frozenset[str]:
    """The hidden folders that are an agent's own (``.claude``, ``.codex``...): a walk of a
    home folder enters them."""
    from analyzer.formats import places  # (here and below: a format's module does not need it)

    return frozenset(d for folders in places.AGENT_FOLDERS.values() for d in folders)


def agent_files() -> frozenset[str]:
    """The hidden files that are an agent's own and hold its calls
    (``.aider.chat.history.md``): a walk of a folder reads them, and a refresh reads those of
    its default places."""
    from analyzer.formats import places

    return frozenset(f for files in places.AGENT_FILES.values() for f in files)


def owner_of(path: Path) -> tuple[str, Path] | None:
    """The format and the file that read ``path`` with them (an OpenHands event file is read
    with its conversation's ``base_state.json``: the ``member_of`` of the specs that declare
    one), or None."""
    for f in formats():
        owner = f.member_of(path) if f.member_of is not None else None
        if owner is not None:
            return f.name, owner
    return None


def agent_own_file(path: Path) -> str | None:
    """What an unrecognised file is when it belongs to an agent but holds no call (an index,
    settings, a prompt log): named by a format's ``own_files`` (name patterns), or lying in an
    agent's own hidden folder (``.claude``, ``.gemini``...). None: unknown."""
    from fnmatch import fnmatch

    for f in formats():
        if any(fnmatch(path.name, p) for p in f.own_files):
            return f"{f.title}: a file of its own that holds no call"
    inside = set(path.parts[:-1]) & agent_folders()
    if inside:
        return f"a file of an agent's own folder ({sorted(inside)[0]}) that holds no call"
    return None


def default_homes(env: Mapping[str, str], home: Path) -> list[tuple[str, Path]]:
    """Where each agent format keeps its logs by default (``places.HOMES``: folders, and the
    agents' own files under the roots the user named), whether they exist or not: ``audit``
    with no path reads those that do. No format is imported."""
    from analyzer.formats import places

    return [(name, p) for name, homes in places.HOMES.items() for p in homes(env, home)]


def expected_formats() -> str:
    """The formats a file could have been, for a message."""
    return "; ".join(f"{f.title} [{f.name}]" for f in formats())
