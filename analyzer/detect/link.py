"""Billing <-> log reconciliation: link each logged call to the billing row of the same call.

When a billing export and the agent logs of the same activity are both loaded, every call is in
the store twice: once as billed, once as logged (with content, tool calls, turns). A logged call
is linked to its billing row

1. by id, when the log kept the provider's response id and it equals the ``generation_id``;
2. else by time (within 2 s), model (compared by ``lf_model_key``) and token counts (the prompt
   size must agree when the log has it; the output too when the log's count is final - Claude
   Code's is a snapshot and is not compared).

Each side is linked at most once, nearest in time first. The logged call then carries the billed
dollars (``cost_basis = 'billed'``), the bill's model, app, key and user (so spend tables name
each call as the bill does) and, where the log had none, the billed token counts; the
billing row is marked ``superseded_by`` the logged call, so every call is counted once
(``live_calls``). What stayed unmatched on each side is reported: the reconciliation users now do
by hand in spreadsheets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analyzer.engine import cache
from analyzer.engine.engine import Engine
from analyzer.engine.store import Store
from analyzer.formats import billing_formats
from analyzer.model.records import json_record

WINDOW_S = 2
NEAR_LOGS_S = 300  # billing rows this close to a logged session count as "should have matched"


@dataclass
class Reconciliation:
    billing_rows: int
    log_calls: int
    matched: int
    log_calls_unmatched: int  # logged calls inside the billing export's period, not matched
    billing_rows_unmatched: int  # billing rows of a logged model near its sessions, not matched

    def to_dict(self) -> dict[str, int]:
        return json_record(self)


def is_bill(column: str = "format") -> str:
    """SQL: whether a call's format is a bill (a format that declares ``KIND = "bill"``)."""
    names = ", ".join("'" + n.replace("'", "''") + "'" for n in billing_formats())
    return f"{column} IN ({names})" if names else "false"


def link_if_needed(store: Store, loaded: bool) -> None:
    """Link after files were ``loaded`` - or when a run was stopped between loading its files
    and linking them (the store notes which data version was last linked)."""
    if not loaded and cache.linked(store):
        return
    with store.transaction():
        link(store)
        cache.bump(store, cache.DATA)
        store.engine.run(
            "detect/meta_put.sql",
            {"key": "linked_version", "value": cache.version(store, cache.DATA)},
        )


def link(store: Store, max_rounds: int = 20) -> int:
    """Link what can be linked now; returns the number of new links.

    Each round links the pairs that are each other's nearest candidate; a call that lost its
    nearest partner to a closer one tries its next candidate in the following round.
    """
    total = 0
    for _ in range(max_rounds):
        n = _link_round(store.engine)
        total += n
        if n == 0:
            break
    return total


def _slots() -> dict[str, str]:
    """The fragments the link units take: what a bill is, and the window."""
    return {
        "is_bill": is_bill(),
        "window_s": str(WINDOW_S),
        "window_us": str(WINDOW_S * 1_000_000),
    }


def _link_round(engine: Engine) -> int:
    """One round: the unlinked logs staged, their nearest bills paired, the pairs applied (the
    round's tables dropped when it ends)."""
    # Nothing to pair when one side is missing (a bill alone, logs alone): no link table.
    if not engine.scalar("detect/link_pending.sql", is_bill=is_bill()):
        return 0
    with engine.step():
        lo, hi = _stage_logs(engine)
        n = _pair(engine, lo, hi)
        if n:
            engine.run("detect/link_apply.sql")
    return n


def _stage_logs(engine: Engine) -> tuple[Any, Any]:
    """The unlinked logs as ``lf_link_logs``; returns their time range widened by the window."""
    found = engine.one("detect/link_logs.sql", **_slots())
    assert found is not None  # an aggregate has a row
    return found[0], found[1]


def _pair(engine: Engine, lo: Any, hi: Any) -> int:
    """This round's links as ``lf_links`` (bills compared only within ``lo``..``hi``); returns
    how many."""
    return int(engine.scalar("detect/link_pairs.sql", {"lo": lo, "hi": hi}, **_slots()))


def reconciliation(store: Store) -> Reconciliation | None:
    """Matched and unmatched on each side; None unless both a bill and logs are loaded."""
    row = store.engine.one("detect/reconcile_sides.sql", is_bill=is_bill())
    assert row is not None
    bills, logs, matched, lo, hi = row
    if not bills or not logs:
        return None
    unmatched = store.engine.one(
        "detect/reconcile_unmatched.sql",
        {"lo": lo, "hi": hi},
        is_bill=is_bill(),
        near_s=str(NEAR_LOGS_S),
    )
    assert unmatched is not None
    log_unmatched, bill_unmatched = unmatched
    return Reconciliation(
        billing_rows=int(bills),
        log_calls=int(logs),
        matched=int(matched),
        log_calls_unmatched=int(log_unmatched),
        billing_rows_unmatched=int(bill_unmatched),
    )
