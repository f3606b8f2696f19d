"""What a format module declares about itself: one ``FormatSpec``, named ``SPEC`` at module
level. The registry (``analyzer.formats``) collects the specs of the package's modules; sniffing,
``--format``'s choices and the bills' lists read them, and nothing
probes a module for the members it happens to have."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (annotations only: a format's spec is made without the ingest's base)
    from analyzer.ingest.base import Head, LoadContext, LoadResult

# What a format is. "bill": its rows are what a provider or gateway charged, one per call
# (logged calls are linked to them, and they are superseded by the logged call); "bucket_bill":
# what a provider charged per time bucket (``bill_buckets``: no calls, reconciled with the
# logged calls of the bucket); "log": an agent's own record.
KINDS = ("bill", "bucket_bill", "log")


@dataclass(frozen=True)
class FormatSpec:
    """One input format: what it is called, how it is recognised and read, where it lives."""

    name: str  # the format's id, stored in sources.format and calls.format
    title: str  # a human name, for messages that list what a file could be
    kind: str  # one of KINDS
    sniff_order: int  # formats are tried lowest first (the loosest sniffer last)
    call_prefix: str  # call_id = call_prefix + the call's native id
    # Does this content look like the format? (content, never the name)
    sniff: Callable[[Head], bool]
    # Lower the file into the canonical tables, inside the transaction the caller holds, and
    # account for every record.
    load: Callable[[LoadContext], LoadResult]
    # (Where the agent keeps its logs by default, and its own hidden folders: in
    # ``analyzer.formats.places``, read without importing the format.)
    own_files: tuple[str, ...] = ()  # name patterns of its files that hold no call
    # The file that reads ``path`` with it (an OpenHands event file is read with its
    # conversation's ``base_state.json``), or None.
    member_of: Callable[[Path], Path | None] | None = None
    batch: bool = False  # small files are loaded many at a time (analyzer.load.batch)
    # Its loader reads on from where the last read of a file that grew stopped, given the
    # state it saved there (``LoadContext.resume``; analyzer.ingest.resume).
    resumes: bool = False
    # Its loader can read only what the usage views show (``IngestOptions.content`` false):
    # the calls, with every usage rule, and no messages (``analyzer.load.usage_first``).
    usage_first: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"format {self.name}: kind {self.kind!r} is not one of {KINDS}")

    @property
    def gateway_bill(self) -> bool:
        """A gateway's bill, one row per call (OpenRouter, LiteLLM): the only bills that list
        calls, linked to the logged calls and superseded by them."""
        return self.kind == "bill"
