"""Terminal and CSV views of the bucketed bills: ``usage bills`` (what each provider's report
says per bucket and model) and ``usage reconcile`` (how much of it the logs explain)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from analyzer.detect.reconcile import BillRow, Totals, Unit, bill_totals
from analyzer.model.formatting import money, printable, wrap
from analyzer.views.table import Column, Table, csv_text
from analyzer.views.text_table import TextColumn, TextTable, lay_out
from analyzer.views.view import How, Rows, View

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


def bucket_key(x: BillRow | Unit, keyed: frozenset[str] = frozenset()) -> str:
    """A bill's bucket, provider and model in one key: ``2026-03-05 Anthropic claude-...``
    (and a unit's key, workspace or project where it is compared key by key: ``keyed``, the
    providers so compared)."""
    key = f"{bucket_label(x.start, x.end)} {provider_name(x.provider)} {model_label(x.model)}"
    return key + key_label(x, keyed) if isinstance(x, Unit) else key


def key_label(u: Unit, keyed: frozenset[str] = frozenset()) -> str:
    """A unit's key as shown after its model: nothing where it is not compared by key, ``[no
    label]`` for calls that carry none under a bill compared key by key."""
    if u.key is not None:
        return f" [{printable(u.key)}]"
    return " [no label]" if not u.has_bill and u.provider in keyed else ""


def _bucket_table(columns: list[TextColumn], rows: list[tuple[str, Any]], total: Any) -> TextTable:
    """A table of buckets (``usage bills``, ``usage reconcile``) and its totals."""
    return TextTable("bucket / model", columns, rows, ("Total", total), key_min=12, margin=1)


def render_bills(rows: list[BillRow], width: int = 100) -> str:
    """``usage bills``: each bucket's figures, and the totals."""
    if not rows:
        return (
            "No provider bill per bucket in this store (Anthropic's usage or cost report, "
            "OpenAI's usage or costs).\n"
        )
    columns = [
        TextColumn("requests", 9, lambda r: "–" if r.requests is None else f"{r.requests:,}"),
        TextColumn("input", 11, lambda r: f"{r.input:,}"),
        TextColumn("cache write", 11, lambda r: f"{r.cache_write:,}"),
        TextColumn("cache read", 13, lambda r: f"{r.cache_read:,}"),
        TextColumn("output", 11, lambda r: f"{r.output:,}"),
        TextColumn("$ billed", 10, lambda r: money(r.billed_usd)),
        TextColumn("$ list price", 12, lambda r: money(r.estimate_usd)),
    ]
    keyed = [(bucket_key(r), r) for r in rows]
    lines = lay_out(_bucket_table(columns, keyed, bill_totals(rows)), width).lines
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
            said.append(f"{where}: {money(u.billed_usd)} of {who}'s bill has no log{_lacking(u)}")
        elif u.status == "partly":
            said.append(
                f"{where}: the logs explain {money(u.logged_usd)} of {who}'s "
                f"{money(u.billed_usd)}; {money(u.unexplained_usd)} has no log{_lacking(u)}"
            )
        elif u.status == "no bill":
            said.append(
                f"{where}: {u.calls:,} logged calls, {money(u.logged_usd)}, that no row of "
                f"{who}'s bill names (another model's or key's name, or calls billed elsewhere)"
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


def _lacking(u: Unit) -> str:
    """What else the logs lack of a unit's bill: its requests (where it counts them) and
    its tokens."""
    parts = []
    if u.missing_calls:
        parts.append(f"{u.missing_calls:,} of its {u.requests:,} requests")
    if u.missing_tokens:
        parts.append(f"{u.missing_tokens:,} tokens")
    return f" ({' and '.join(parts)} not in the logs)" if parts else ""


def explained_line(t: Totals) -> str:
    """The reconciliation's totals in one sentence."""
    return (
        f"The logs explain {money(t.explained_usd)} of the {money(t.billed_usd)} billed; "
        f"{money(t.no_log_usd)} has no log"
        + (f", and the logs show {money(t.over_usd)} no bill here covers" if t.over_usd else "")
        + "."
        + (
            f" Where the bills count requests ({t.bill_requests:,}), the logs have "
            f"{t.counted_calls:,} calls: {t.missing_calls or 0:,} missing, "
            f"{t.extra_calls or 0:,} beyond them."
            if t.bill_requests is not None
            else ""
        )
    )


def render_reconcile(units: list[Unit], t: Totals, width: int = 100) -> str:
    """``usage reconcile``: per unit the bill, the logs and what is unexplained; then the
    remainder named, one line each."""
    if not units:
        return (
            "No provider bill per bucket in this store to reconcile: load Anthropic's usage "
            "or cost report, or OpenAI's usage or costs, with the logs.\n"
        )
    columns = [
        TextColumn("bill", 11, lambda u: money(u.billed_usd)),
        TextColumn("basis", 11, lambda u: u.basis if isinstance(u, Unit) else ""),
        TextColumn("requests", 9, lambda u: _count(u, "requests", "bill_requests"), keep=3),
        TextColumn("logs", 11, lambda u: money(u.logged_usd)),
        TextColumn("calls", 7, lambda u: f"{u.calls:,}"),
        TextColumn("tok missing", 12, lambda u: _count(u, "missing_tokens"), keep=2),
        TextColumn("tok extra", 11, lambda u: _count(u, "extra_tokens"), keep=1),
        TextColumn("unexplained", 12, lambda u: money(u.unexplained_usd)),
        TextColumn("status", 12, lambda u: u.status if isinstance(u, Unit) else ""),
    ]
    by_key = frozenset(u.provider for u in units if u.key is not None)
    keyed = [(bucket_key(u, by_key), u) for u in units]
    laid = lay_out(_bucket_table(columns, keyed, t), width)
    lines = laid.lines
    lines += wrap(explained_line(t), width)
    if t.estimated_calls:
        lines += wrap(
            f"{t.estimated_calls:,} of the {t.calls:,} logged calls state no cost of their own "
            "(a transcript; OpenTelemetry whose cost_usd is null): priced from list prices.",
            width,
        )
    for said in remainder_lines(units):
        lines += wrap(said, width, indent="  ")
    lines += wrap(
        "bill: the cost report's dollars (billed; apportioned: a day's cost shared over the "
        "usage report's hours by their list prices), else the usage report's tokens at list "
        "prices (estimated); logs: the calls of that provider and model in the bucket, at "
        "their own cost; requests: where the bill counts them; buckets in UTC, as the bill's"
        + (
            f"; left out to fit {width} columns: {', '.join(laid.left_out)} (--json and --csv "
            "have them)"
            if laid.left_out
            else ""
        ),
        width,
    )
    return "\n".join(lines) + "\n"


def _count(u: Unit | Totals, name: str, total: str | None = None) -> str:
    """A count of a unit or of the totals (``total``: the totals' name for it), or a dash
    where the bill does not give it."""
    value = getattr(u, total or name) if isinstance(u, Totals) else getattr(u, name)
    return "–" if value is None else f"{value:,}"


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


# ``usage``'s views of the bills (not calls): bills per bucket, and against the logs.
BILL_VIEWS = ("bills", "reconcile")


class BillsView(Rows):
    """``usage bills``: the providers' bills per bucket and model."""

    name = "bills"
    rows: list[BillRow]

    def layout(self, width: int) -> str:
        return render_bills(self.rows, width)

    def json(self) -> dict[str, Any]:
        return {"view": "bills", "rows": super().json()}

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
