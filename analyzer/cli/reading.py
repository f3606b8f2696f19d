"""How a command that reads a store opens it: read-only, the default store refreshed first
(unless ``--db`` names one), seeing only the command's time window."""

from __future__ import annotations

import click

from analyzer.api import home
from analyzer.cli.options import View, refreshing
from analyzer.console import note, out
from analyzer.engine.store import Store
from analyzer.ingest.base import IngestOptions


def reading(
    db: str | None,
    view: View,
    incidents: bool = True,
    detect: bool = False,
    content: bool = True,
    empty: bool = True,
) -> Store:
    """The store opened read-only, seeing only ``view``'s window (with ``incidents``, only
    the incidents that start in it). Without ``--db``, the default store, refreshed first
    (and with ``detect``, its incidents found again where its calls changed; without
    ``content``, for a view of usage, reading usage first: ``analyzer.load.usage_first``).
    With ``empty``, no store and no agent logs is no usage data, not an error
    (:func:`nothing_found`)."""
    store = opened(db, detect, content, empty)
    store.keep_cache = click.get_current_context().meta.get("lf.keep_cache", True)
    try:
        store.see_only(view.window, incidents=incidents)
    except BaseException:
        store.close()
        raise
    return store


def opened(db: str | None, detect: bool, content: bool = True, empty: bool = True) -> Store:
    """The store at ``db`` (or the default store, refreshed first), opened read-only (with
    ``empty``, an empty one when there is neither a store nor agent logs: ``nothing_found``)."""
    choice = home.choose(db)
    options = IngestOptions(content=content)
    if refreshing() and not detect:
        unchanged = home.unchanged_reading(choice, options)
        if unchanged is not None:
            return unchanged
    try:
        busy = home.refresh(choice, options, incidents=detect, enabled=refreshing())
    except home.NoAgentLogs as exc:
        if not empty:
            raise
        nothing_found(exc)
        return home.empty_store()
    return home.open_reading(choice, busy)


def nothing_found(exc: home.NoAgentLogs) -> None:
    """No store yet and no agent logs in their default places, for a command that shows what
    the store holds: no usage data, not an error (exit 0). On the terminal that is its one
    line, and the command ends; with --json or --csv the line goes to stderr and the command
    goes on to write its view of an empty store (a valid document of its own shape, nothing
    written to disk: ``home.empty_store``)."""
    ctx = click.get_current_context()
    if not (ctx.params.get("as_json") or ctx.params.get("as_csv")):
        out(exc.no_usage_data())
        ctx.exit(0)
    note(exc.no_usage_data())
