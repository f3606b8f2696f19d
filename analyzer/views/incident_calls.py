"""The calls of incidents as a view shows them (``show N``, the report's incident cards): each
call's time, ids, tokens, finish, kind and cost, with the provider's own id where a bill was
linked to it."""

from __future__ import annotations

from typing import Any

from analyzer.engine.store import Store
from analyzer.formats import billing_formats
from analyzer.model.incident import Incident


def incidents_calls(store: Store, incs: list[Incident]) -> dict[str, list[tuple[Any, ...]]]:
    """The calls of each incident: its stream from the first to the last call (both included);
    when they lie in different streams (a parent and its sub-agents), every call of the
    session and its sub-agents in the incident's time span. One query for all incidents."""
    if not incs:
        return {}
    keys = ("incident_id", "first_call_id", "last_call_id", "session_id", "start_ts", "end_ts")
    incidents = [{k: getattr(inc, k) for k in keys} for inc in incs]
    rows = store.engine.rows(
        "views/incident_calls.sql", {"incs": incidents, "bills": billing_formats()}
    )
    # The provider's id: the linked billing row's generation id, else the call's own.
    linked = sorted({r[10] for r in rows if r[10] is not None})
    billed = dict(
        store.engine.rows(
            "SELECT call_id, native_id FROM calls WHERE call_id IN (SELECT unnest($ids))",
            {"ids": linked},
        )
        if linked
        else []
    )
    out: dict[str, list[tuple[Any, ...]]] = {inc.incident_id: [] for inc in incs}
    for iid, ts, cid, own, resp, pt, ot, fr, rk, cost, bid, *more in rows:
        pid = next((x for x in (billed.get(bid), own, resp) if x is not None), None)
        out[iid].append((ts, cid, pid, pt, ot, fr, rk, cost, *more))
    return out
