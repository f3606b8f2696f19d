"""The ingest machinery a format is written with (the formats are ``analyzer.formats``; the
load of files, ``analyzer.load``).

A format is handed a ``LoadContext`` (``base``: the file, its options, the load's engine) and
declares itself with a ``FormatSpec`` (``spec``). It reads bytes and values with ``reading``,
``jsonl``, ``csv_scan``, ``values`` and ``usage``; says what a session said through the
conversation builder (``conversation``); and hands calls, messages and runs to its
``Lowering`` (``lowering``, ``rows``, ``runs``), which writes them through the sink. The
modules named in ``PUBLIC`` are what a format may import; the rest (the sink and its Arrow
tables, the masks behind the content keys, the decoders) are the machinery's own.
"""

from __future__ import annotations

# The modules of this package a format may import (held by tests/test_architecture.py).
PUBLIC = frozenset(
    {
        "base",
        "spec",
        "conversation",
        "lowering",
        "rows",
        "runs",
        "content",
        "values",
        "usage",
        "reading",
        "jsonl",
        "csv_scan",
        "resume",
        "output_estimate",
    }
)
