"""What was spent, for a live spend cap: the ledger the default store's refresh leaves beside
it, and the baseline a live guard starts a period from.

A cap on the day, the 5-hour window or the month (a budget whose scope is ``day``, ``window``
or ``month``, ``analyzer.guards.primitives``) counts every session's spend. A live guard sees
only its own transcript's calls; what the other sessions spent it reads here:

* **The ledger** (``spend.json`` beside the default store, :func:`write_ledger`, written by
  one SQL unit, ``sql/spend_ledger.sql``, after a refresh that changed the store): the
  recent periods (today and yesterday, the last two windows, this month and the last), each
  with the dollars of every source file and its last call's time, and when it was written.
  Priced as the usage views price calls (``cost_usd``), days and months in UTC as they count
  them by default, windows as ``blocks`` finds them.
* **The baseline** (:func:`baseline`): what the ledger knew was spent in a period outside one
  transcript; read without DuckDB (a JSON file: well under 5 ms), for the hook's fast path.
  ``Guard(policy, baseline=baselines(ledger, scope, excluding=transcript))`` then decides on
  the baseline plus its own calls.

What live cannot see: what other sessions spent since the store's last refresh (the ledger
is as old as it says), and a window the other sessions started that this transcript's calls
did not (the guard's windows are its own calls', seeded with the ledger's latest window,
:func:`last_window`).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analyzer.engine.store import Store

LEDGER = "spend.json"
PERIOD_SCOPES = ("day", "window", "month")
_TEN = Decimal("1e-10")


def ledger_path(store_path: str | Path) -> Path:
    """The ledger of a store: ``spend.json`` beside it."""
    return Path(store_path).with_name(LEDGER)


def ledger_of(store: Store, now: datetime | None = None) -> dict[str, Any]:
    """The ledger's content from ``store``: its recent periods (spend_ledger.sql) as
    ``{"day": {key: {"last_call": iso, "by_source": {path: "dollars"}}}, "window": ...,
    "month": ...}``, beside ``"written"`` (when, UTC) and ``"zone"``."""
    from analyzer.guards.primitives import unit_sql

    at = (now or datetime.now(UTC)).astimezone(UTC).replace(tzinfo=None)
    starts = unit_sql("guards/window_starts.sql", calls="live_calls")
    periods: dict[str, dict[str, Any]] = {scope: {} for scope in PERIOD_SCOPES}
    for scope, key, path, usd, last in store.engine.rows(
        "spend_ledger.sql", {"now": at}, starts=starts
    ):
        period = periods[scope].setdefault(key, {"last_call": last.isoformat(), "by_source": {}})
        period["by_source"][path] = str(Decimal(usd).quantize(_TEN))
    return {"written": at.isoformat() + "Z", "zone": "UTC", "periods": periods}


def write_ledger(store: Store, path: str | Path, now: datetime | None = None) -> bool:
    """Write ``store``'s ledger to ``path`` (atomically: a reader sees the old one or the new
    one), unless its periods are those already written. Returns whether it wrote."""
    made = ledger_of(store, now)
    old = read_ledger(path)
    if old is not None and old.get("periods") == made["periods"]:
        return False
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    tmp.write_text(json.dumps(made, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(target)
    return True


def read_ledger(path: str | Path) -> dict[str, Any] | None:
    """The ledger at ``path``, or None when there is none (or it cannot be read)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("periods"), dict) else None


def _same_file(a: str, b: str | Path | None) -> bool:
    return b is not None and os.path.normpath(a) == os.path.normpath(str(b))


def baseline(
    ledger: dict[str, Any] | None,
    scope: str,
    period_key: str,
    excluding: str | Path | None = None,
) -> Decimal:
    """What the ledger knew was spent in the period ``period_key`` of ``scope`` (day, window
    or month: ``2026-11-29``, ``2026-11-29T14:00``, ``2026-11``) outside the file
    ``excluding`` (the transcript a live guard reads itself)."""
    if ledger is None:
        return Decimal(0)
    period = ledger.get("periods", {}).get(scope, {}).get(period_key)
    if not period:
        return Decimal(0)
    return sum(
        (
            Decimal(usd)
            for path, usd in period["by_source"].items()
            if not _same_file(path, excluding)
        ),
        Decimal(0),
    )


def baselines(
    ledger: dict[str, Any] | None, scope: str, excluding: str | Path | None = None
) -> dict[str, Decimal]:
    """:func:`baseline` of every period of ``scope`` the ledger holds, by key: what a live
    guard (``Guard(policy, baseline=...)``) adds to its own calls in each period."""
    if ledger is None:
        return {}
    keys = ledger.get("periods", {}).get(scope, {})
    return {key: baseline(ledger, scope, key, excluding) for key in keys}


def last_window(ledger: dict[str, Any] | None) -> tuple[datetime, datetime] | None:
    """The ledger's latest 5-hour window: its start and its last call (naive UTC), to seed a
    live guard's windows with the store's (``Guard(policy, window=...)``)."""
    windows = (ledger or {}).get("periods", {}).get("window") or {}
    if not windows:
        return None
    key = max(windows)
    return datetime.fromisoformat(key), datetime.fromisoformat(windows[key]["last_call"])
