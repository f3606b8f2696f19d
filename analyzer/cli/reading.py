"""How a command that reads a store opens it: read-only, the default store refreshed first
(unless ``--db`` names one), seeing only the command's time window."""

from __future__ import annotations

import click

from analyzer.api import home
from analyzer.cli.options import View, refreshing
from analyzer.engine.store import Store
from analyzer.ingest.base import IngestOptions


def reading(
    db: str | None,
    view: View,
    incidents: bool = True,
    detect: bool = False,
    content: bool = True,
) -> Store:
    """The store opened read-only, seeing only ``view``'s window (with ``incidents``, only
    the incidents that start in it). Without ``--db``, the default store, refreshed first
    (and with ``detect``, its incidents found again where its calls changed; without
    ``content``, for a view of usage, reading usage first: ``analyzer.load.usage_first``)."""
    store = opened(db, detect, content)
    store.keep_cache = click.get_current_context().meta.get("lf.keep_cache", True)
    try:
        store.see_only(view.window, incidents=incidents)
    except BaseException:
        store.close()
        raise
    return store


def opened(db: str | None, detect: bool, content: bool = True) -> Store:
    """The store at ``db`` (or the default store, refreshed first), opened read-only."""
    choice = home.choose(db)
    options = IngestOptions(content=content)
    busy = home.refresh(choice, options, incidents=detect, enabled=refreshing())
    return home.open_reading(choice, busy)
