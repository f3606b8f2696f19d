"""Terminal and CSV views of the bucketed bills: ``usage bills`` (what each provider's report
says per bucket and model) and ``usage reconcile`` (how much of it the logs explain)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from analyzer.console import strong
from analyzer.detect.reconcile import BillRow, Totals, Unit, bill_totals
from analyzer.model.formatting import cut, money, printable, wrap
from analyzer.views.table import Column, Table, csv_text
from analyzer.views.view import How, View

PROVIDERS = {"anthropic": "Anthropic", "openai": "OpenAI"}


def bucket_label(start: datetime, end: datetime) -> str:
    """A bucket as a day (``2026-03-05``), an hour, or its two ends."""
    midnight = start.hour == start.minute == start.second == 0
    if end - start == timedelta(days=1) and midnight:
        return f"{start:%Y-%m-%d}"
    if end - start == timedelta(hours=1) and start.minute == start.second == 0:
        return f"{start:%Y-%m-%d %H:00}"
    return f"{start:%Y-%m-%d %H:%M}–{end:%Y-%m-%d %H:%M}"


def model_label(model: str | None) -> str:
    """A bill's model as shown (a bill not grouped by model covers them all)."""
    return printable(model) if model else "(all models)"


def provider_name(provider: str) -> str:
    return PROVIDERS.get(provider, provider)


def _table(head: list[tuple[str, int]], rows: list[list[str]], key_w: int) -> list[str]:
    """Rows of cells under ``head`` (heading, width); the first column left-aligned."""

    def line(cells: list[str]) -> str:
        first = cut(cells[0], key_w).ljust(key_w)
        return first + "".join(f" {c:>{w}}" for c, (_, w) in zip(cells[1:], head[1:], strict=True))

    out = [line([h for h, _ in head])]
    out += [line(r) for r in rows[:-1]]
    out.append("-" * len(out[0]))
    out.append(strong(line(rows[-1])))
    return out


def render_bills(rows: list[BillRow], width: int = 100) -> str:
    """``usage bills``: each bucket's figures, and the totals."""
    if not rows:
        return (
            "No provider bill per bucket in this store (Anthropic's usage or cost report, "
            "OpenAI's usage or costs).\n"
        )
    head = [
        ("bucket / model", 0),
        ("requests", 9),
        ("input", 11),
        ("cache write", 11),
        ("cache read", 13),
        ("output", 11),
        ("$ billed", 10),
        ("$ list price", 12),
    ]
    cells: list[list[str]] = [
        [
            f"{bucket_label(r.start, r.end)} {provider_name(r.provider)} {model_label(r.model)}",
            "–" if r.requests is None else f"{r.requests:,}",
            f"{r.input:,}",
            f"{r.cache_write:,}",
            f"{r.cache_read:,}",
            f"{r.output:,}",
            money(r.billed_usd),
            money(r.estimate_usd),
        ]
        for r in rows
    ]
    t = bill_totals(rows)
    cells.append(
        [
            "Total",
            "–" if t.requests is None else f"{t.requests:,}",
            f"{t.input:,}",
            f"{t.cache_write:,}",
            f"{t.cache_read:,}",
            f"{t.output:,}",
            money(t.billed_usd),
            money(t.estimate_usd),
        ]
    )
    key_w = max(12, min(max(len(c[0]) for c in cells), width - sum(w + 1 for _, w in head)))
    lines = _table(head, cells, key_w)
    notes = [
        "buckets in UTC, as the providers bill them; $ billed: the cost report's dollars; "
        "$ list price: the usage report's tokens at list prices",
        "input: fresh prompt tokens (cache reads and writes apart). Bills are not calls: the "
        "other usage views and the detectors never count them; `usage reconcile` compares them "
        "with the logs",
    ]
    for n in notes:
        lines += wrap(n, width)
    return "\n".join(lines) + "\n"


def remainder_lines(units: list[Unit]) -> list[str]:
    """One plain sentence per unit the logs do not explain."""
    said = []
    for u in units:
        who = provider_name(u.provider)
        where = f"{bucket_label(u.start, u.end)} {model_label(u.model)}"
        if u.status == "unpriced":
            said.append(f"{where}: {who}'s usage has no known list price: not compared")
        elif u.status == "no log":
            said.append(f"{where}: {money(u.billed_usd)} of {who}'s bill has no log")
        elif u.status == "partly":
            said.append(
                f"{where}: the logs explain {money(u.logged_usd)} of {who}'s "
                f"{money(u.billed_usd)}; {money(u.unexplained_usd)} has no log"
            )
        elif u.status == "more in logs":
            said.append(
                f"{where}: the logs show {money(u.logged_usd)} where {who} billed "
                f"{money(u.billed_usd)} ({money(-u.unexplained_usd)} more: calls "
                "billed elsewhere, or a bill not loaded)"
            )
        if u.placeholder_calls and u.status != "unpriced":
            said.append(
                f"{where}: {u.placeholder_calls:,} logged calls carry only a streaming "
                f"placeholder for their output; its estimate adds {money(u.placeholder_usd)} to "
                f"the logs (unexplained {money(u.unexplained_usd + u.placeholder_usd)} at the "
                f"logged counts, {money(u.unexplained_usd)} at the estimate)"
            )
    return said


def explained_line(t: Totals) -> str:
    """The reconciliation's totals in one sentence."""
    return (
        f"The logs explain {money(t.explained_usd)} of the {money(t.billed_usd)} billed; "
        f"{money(t.no_log_usd)} has no log"
        + (f", and the logs show {money(t.over_usd)} no bill here covers" if t.over_usd else "")
        + "."
    )


def render_reconcile(units: list[Unit], t: Totals, width: int = 100) -> str:
    """``usage reconcile``: per unit the bill, the logs and what is unexplained; then the
    remainder named, one line each."""
    if not units:
        return (
            "No provider bill per bucket in this store to reconcile: load Anthropic's usage "
            "or cost report, or OpenAI's usage or costs, with the logs.\n"
        )
    head = [
        ("bucket / model", 0),
        ("bill", 11),
        ("basis", 9),
        ("logs", 11),
        ("calls", 7),
        ("unexplained", 12),
        ("status", 12),
    ]
    cells = [
        [
            f"{bucket_label(u.start, u.end)} {provider_name(u.provider)} {model_label(u.model)}",
            money(u.billed_usd),
            u.basis,
            money(u.logged_usd),
            f"{u.calls:,}",
            money(u.unexplained_usd),
            u.status,
        ]
        for u in units
    ]
    cells.append(
        [
            "Total",
            money(t.billed_usd),
            "",
            money(t.logged_usd),
            f"{t.calls:,}",
            money(t.unexplained_usd),
            "",
        ]
    )
    key_w = max(12, min(max(len(c[0]) for c in cells), width - sum(w + 1 for _, w in head)))
    lines = _table(head, cells, key_w)
    lines += wrap(explained_line(t), width)
    for said in remainder_lines(units):
        lines += wrap(said, width, indent="  ")
    lines += wrap(
        "bill: the cost report's dollars (billed), else the usage report's tokens at list "
        "prices (estimated); logs: the calls of that provider and model in the bucket, at "
        "their own cost; buckets in UTC",
        width,
    )
    return "\n".join(lines) + "\n"


def _json_table(records: list[dict[str, Any]], lists: bool) -> Table:
    """Records (the rows' JSON) as a table, values written as they are (with ``lists``, a
    list joined by ``;``); with none, the columns that name a bucket."""
    names = list(records[0]) if records else ["provider", "start", "end", "model"]
    columns = [Column(n, "list" if lists and n == "formats" else "text") for n in names]
    return Table(columns, [list(r.values()) for r in records])


def reconcile_csv(units: list[Unit]) -> str:
    return csv_text(_json_table([u.to_json() for u in units], lists=False))


def bills_csv(rows: list[BillRow]) -> str:
    return csv_text(_json_table([r.to_json() for r in rows], lists=True))


class BillsView(View):
    """``usage bills``: the providers' bills per bucket and model."""

    name = "bills"

    def __init__(self, rows: list[BillRow]) -> None:
        self.rows = rows

    def text(self, how: How) -> str:
        return render_bills(self.rows, how.width)

    def json(self) -> dict[str, Any]:
        return {"view": "bills", "rows": [r.to_json() for r in self.rows]}

    def table(self) -> Table:
        return _json_table([r.to_json() for r in self.rows], lists=True)


class ReconcileView(View):
    """``usage reconcile``: each bucket's bill against the logs, and their totals."""

    name = "reconcile"

    def __init__(self, units: list[Unit], totals: Totals) -> None:
        self.units = units
        self.totals = totals

    def text(self, how: How) -> str:
        return render_reconcile(self.units, self.totals, how.width)

    def json(self) -> dict[str, Any]:
        units = [u.to_json() for u in self.units]
        return {"view": "reconcile", "units": units, "totals": self.totals.to_json()}

    def table(self) -> Table:
        return _json_table([u.to_json() for u in self.units], lists=False)
