"""Ingestion: the input formats this tool reads, one module each, sniffed from content.

The per-file load (``flow``), finding files (``discovery``), hashing and checking their bytes
(``checks``, ``reading``, ``encodings``), and lowering log records to the canonical tables
(``lowering``, ``values``, ``usage``) live in their own modules; this one is the registry.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from fnmatch import fnmatch
from pathlib import Path
from typing import Protocol, cast

from analyzer.errors import InputError
from analyzer.ingest.base import Head, LoadContext, LoadResult


class Format(Protocol):
    """What a format module provides (each is a module of this package)."""

    NAME: str  # the format's id, stored in sources.format and calls.format
    SNIFF_ORDER: int  # formats are tried lowest first (the loosest sniffer last)
    TITLE: str  # a human name, for messages that list what a file could be
    CALL_PREFIX: str  # call_id = CALL_PREFIX + the call's native id
    # "bill": its rows are what a provider or gateway charged, one per call (logged calls are
    # linked to them, and they are superseded by the logged call); "bucket_bill": what a
    # provider charged per time bucket (``bill_buckets``: no calls, reconciled with the logged
    # calls of the bucket); "log": an agent's own record.
    KIND: str

    def sniff(self, head: Head) -> bool:
        """Does this content look like the format? (content, never the name)"""
        ...

    def load(self, ctx: LoadContext) -> LoadResult:
        """Lower the file into the canonical tables, inside the transaction the caller holds,
        and account for every record."""
        ...


_FORMAT_MEMBERS = ("NAME", "TITLE", "CALL_PREFIX", "KIND", "SNIFF_ORDER", "sniff", "load")


def _discover() -> tuple[Format, ...]:
    """Every module of this package that is a format (it has all of ``Format``'s members), in
    sniffing order: adding a format is adding its module."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if all(hasattr(module, member) for member in _FORMAT_MEMBERS):
            found.append(cast(Format, module))
    return tuple(sorted(found, key=lambda f: (f.SNIFF_ORDER, f.NAME)))


# Every supported input format, in sniffing order.
FORMATS: tuple[Format, ...] = _discover()


def format_names() -> list[str]:
    return [f.NAME for f in FORMATS]


KINDS = ("bill", "bucket_bill", "log")
assert all(f.KIND in KINDS for f in FORMATS)


def billing_formats() -> list[str]:
    """The formats that are bills per call (``KIND = "bill"``)."""
    return [f.NAME for f in FORMATS if f.KIND == "bill"]


def bucket_bill_formats() -> list[str]:
    """The formats that are bills per time bucket (``KIND = "bucket_bill"``)."""
    return [f.NAME for f in FORMATS if f.KIND == "bucket_bill"]


def format_by_name(name: str) -> Format:
    for fmt in FORMATS:
        if name == fmt.NAME:
            return fmt
    raise InputError(f"unknown format {name!r} (known: {', '.join(format_names())})")


def agent_folders() -> frozenset[str]:
    """The hidden folders that are an agent's own (``.claude``, ``.codex``...): a walk of a
    home folder enters them."""
    return frozenset(d for f in FORMATS for d in getattr(f, "AGENT_FOLDERS", ()))


def owner_of(path: Path) -> tuple[str, Path] | None:
    """The format and the file that read ``path`` with them (an OpenHands event file is read
    with its conversation's ``base_state.json``: ``member_of`` of the format modules that have
    one), or None."""
    for f in FORMATS:
        member_of = getattr(f, "member_of", None)
        owner = member_of(path) if member_of is not None else None
        if owner is not None:
            return f.NAME, owner
    return None


def agent_own_file(path: Path) -> str | None:
    """What an unrecognised file is when it belongs to an agent but holds no call (an index,
    settings, a prompt log): named by a format's ``OWN_FILES`` (name patterns), or lying in an
    agent's own hidden folder (``.claude``, ``.gemini``...). None: unknown."""
    for f in FORMATS:
        if any(fnmatch(path.name, p) for p in getattr(f, "OWN_FILES", ())):
            return f"{f.TITLE}: a file of its own that holds no call"
    inside = set(path.parts[:-1]) & agent_folders()
    if inside:
        return f"a file of an agent's own folder ({sorted(inside)[0]}) that holds no call"
    return None


def default_homes(env: Mapping[str, str], home: Path) -> list[tuple[str, Path]]:
    """Where each agent format keeps its logs by default (``homes(env, home)`` of the format
    modules that have one), whether they exist or not: ``audit`` with no path reads those that
    do."""
    found: list[tuple[str, Path]] = []
    for f in FORMATS:
        homes = getattr(f, "homes", None)
        if homes is not None:
            found += [(f.NAME, p) for p in homes(env, home)]
    return found


def expected_formats() -> str:
    """The formats a file could have been, for a message."""
    return "; ".join(f"{f.TITLE} [{f.NAME}]" for f in FORMATS)
