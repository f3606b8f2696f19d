"""The input formats this tool reads, one module each (bills under ``bills/``), sniffed from
content; this module is their registry.

A format is parsing: it reads its records and hands them to the ingest machinery's public
pieces (``analyzer.ingest``: the conversation builder, the lowering to the store, the value
readers). Reading files, sniffing them and loading them in batches is ``analyzer.load``, which
asks this registry which formats there are.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from fnmatch import fnmatch
from pathlib import Path

from analyzer.errors import InputError
from analyzer.ingest.spec import FormatSpec

# The type of a format, as the rest of the package names it.
Format = FormatSpec


def _discover() -> tuple[FormatSpec, ...]:
    """The ``SPEC`` of every module of this package and of ``bills`` that declares one, in
    sniffing order: adding a format is adding its module."""
    found: list[FormatSpec] = []
    for info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        module = importlib.import_module(info.name)
        spec = vars(module).get("SPEC")
        if isinstance(spec, FormatSpec):
            found.append(spec)
    names = [s.name for s in found]
    assert len(set(names)) == len(names), f"two formats share a name: {sorted(names)}"
    return tuple(sorted(found, key=lambda f: (f.sniff_order, f.name)))


# Every supported input format, in sniffing order.
FORMATS: tuple[FormatSpec, ...] = _discover()


def format_names() -> list[str]:
    return [f.name for f in FORMATS]


def billing_formats() -> list[str]:
    """The formats that are bills per call (a gateway's: ``kind = "bill"``)."""
    return [f.name for f in FORMATS if f.gateway_bill]


def bucket_bill_formats() -> list[str]:
    """The formats that are bills per time bucket (``kind = "bucket_bill"``)."""
    return [f.name for f in FORMATS if f.kind == "bucket_bill"]


def format_by_name(name: str) -> FormatSpec:
    for fmt in FORMATS:
        if name == fmt.name:
            return fmt
    raise InputError(f"unknown format {name!r} (known: {', '.join(format_names())})")


def agent_folders() -> frozenset[str]:
    """The hidden folders that are an agent's own (``.claude``, ``.codex``...): a walk of a
    home folder enters them."""
    return frozenset(d for f in FORMATS for d in f.agent_folders)


def owner_of(path: Path) -> tuple[str, Path] | None:
    """The format and the file that read ``path`` with them (an OpenHands event file is read
    with its conversation's ``base_state.json``: the ``member_of`` of the specs that declare
    one), or None."""
    for f in FORMATS:
        owner = f.member_of(path) if f.member_of is not None else None
        if owner is not None:
            return f.name, owner
    return None


def agent_own_file(path: Path) -> str | None:
    """What an unrecognised file is when it belongs to an agent but holds no call (an index,
    settings, a prompt log): named by a format's ``own_files`` (name patterns), or lying in an
    agent's own hidden folder (``.claude``, ``.gemini``...). None: unknown."""
    for f in FORMATS:
        if any(fnmatch(path.name, p) for p in f.own_files):
            return f"{f.title}: a file of its own that holds no call"
    inside = set(path.parts[:-1]) & agent_folders()
    if inside:
        return f"a file of an agent's own folder ({sorted(inside)[0]}) that holds no call"
    return None


def default_homes(env: Mapping[str, str], home: Path) -> list[tuple[str, Path]]:
    """Where each agent format keeps its logs by default (the ``homes`` of the specs that
    declare them), whether they exist or not: ``audit`` with no path reads those that do."""
    found: list[tuple[str, Path]] = []
    for f in FORMATS:
        if f.homes is not None:
            found += [(f.name, p) for p in f.homes(env, home)]
    return found


def expected_formats() -> str:
    """The formats a file could have been, for a message."""
    return "; ".join(f"{f.title} [{f.name}]" for f in FORMATS)
