"""The public API: one object that ingests, detects, replays the guards and reports, for a
program or a notebook - and the command line's one way into the library for its pipeline
commands (``ingest``, ``audit``, ``detect``).

Nothing is written to stderr unless asked: a :class:`Forensics` keeps the warnings and notes
of its run on its console (``lf.warnings``) and returns every result as an object::

    from analyzer.api import Forensics

    with Forensics.open("december.duckdb") as lf:
        loaded = lf.ingest(["exports/"])
        incidents = lf.detect()
        guards = lf.backtest()
        lf.report("report.html")
        print(lf.warnings)

A policy runs live in an agent as the backtest replayed it (``analyzer.guards.guard``)::

    from analyzer.api import Call, Guard

    guard = Guard.load("penguin_stale_context")
    if guard.feed(Call(call_id, session_id=sid, input_tokens=n_in, output_tokens=n_out)).stops:
        break

Give ``console=Console()`` to have it speak on stderr as the command line does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analyzer.api.forensics import Forensics as Forensics
    from analyzer.api.forensics import Inputs as Inputs
    from analyzer.api.forensics import detect_on_spark as detect_on_spark
    from analyzer.console import Console as Console
    from analyzer.guards.guard import Call as Call
    from analyzer.guards.guard import Decision as Decision
    from analyzer.guards.guard import Guard as Guard
    from analyzer.ingest.base import IngestOptions as IngestOptions
    from analyzer.model.timewindow import Window as Window

# Where each public name is defined: imported when it is first asked for, so a command that
# uses one corner of the library (``api.home`` for the default store) does not load it all.
_WHERE = {
    "Call": "analyzer.guards.guard",
    "Console": "analyzer.console",
    "Decision": "analyzer.guards.guard",
    "Forensics": "analyzer.api.forensics",
    "Guard": "analyzer.guards.guard",
    "IngestOptions": "analyzer.ingest.base",
    "Inputs": "analyzer.api.forensics",
    "Window": "analyzer.model.timewindow",
    "detect_on_spark": "analyzer.api.forensics",
}

__all__ = [
    "Call",
    "Console",
    "Decision",
    "Forensics",
    "Guard",
    "IngestOptions",
    "Inputs",
    "Window",
    "detect_on_spark",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
