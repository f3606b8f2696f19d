"""Bills per time bucket against the logs: how much of what a provider charged in each bucket
the logged calls explain, and what has no log.

A *unit* is one provider's bucket (its start and end) for one model, as the bills group it:
the Console's and the API's reports of the same day and model (tokens from the usage report,
dollars from the cost report) make one unit. Its bill is the cost report's dollars when there
is one, else the usage report's tokens at list prices (``estimated``). Its logs are the calls
the store holds (every call once) in that bucket, of that provider and model (compared by
``lf_model_key``; a bill not grouped by model takes all the provider's calls of the bucket),
that the provider itself billed: a call billed by a gateway that charges the user (OpenRouter)
is not on the provider's bill. Their dollars are what the store says they cost (a log's own
figure, else list prices): a bucket the logs cover whole reconciles to the cent when the bill
is priced at the same list prices.

``unexplained`` is the bill less the logs: above zero, dollars with no log (a machine, a key
or a tool whose logs were not loaded); below zero, logs with no bill (another organisation's
key, or a bill not loaded for that bucket).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, ClassVar

from analyzer.engine.store import Store
from analyzer.model.formatting import iso
from analyzer.model.records import JsonForm, fixed, json_record

CENT = Decimal("0.01")
# The dollar fields of the bills' records: written in JSON as exact fixed-point text.
_USD = (
    "billed_usd",
    "estimate_usd",
    "logged_usd",
    "unexplained_usd",
    "placeholder_usd",
    "explained_usd",
    "no_log_usd",
    "over_usd",
)
# Formats whose calls a gateway bills to the user itself: not on a provider's bill.
GATEWAY_BILLS = ("openrouter_csv",)


@dataclass
class Unit:
    """One provider's bucket for one model: the bill, and the logged calls that explain it."""

    JSON_FORM: ClassVar[JsonForm] = JsonForm(
        rename={
            "bill_input": "bill_input_tokens",
            "bill_output": "bill_output_tokens",
            "requests": "bill_requests",
            "calls": "logged_calls",
            "log_input": "log_input_tokens",
            "log_output": "log_output_tokens",
            "unpriced_calls": "unpriced_logged_calls",
        },
        omit=("cost_rows",),
        convert={
            **dict.fromkeys(("start", "end"), iso),
            **dict.fromkeys((*_USD, "unexplained_at_logged_output_usd"), fixed),
        },
        derived=(
            ("unexplained_usd", "unpriced_calls"),
            ("status", "unexplained_usd"),
            ("unexplained_at_logged_output_usd", ""),
        ),
    )

    provider: str
    start: datetime
    end: datetime
    model: str | None  # as the bill names it (None: the bill is not grouped by model)
    billed_usd: Decimal
    basis: str  # billed (a cost report) | estimated (tokens at list prices) | unpriced
    estimate_usd: Decimal | None  # the usage report's tokens at list prices
    bill_input: int | None  # the bill's tokens (usage reports; None: only dollars)
    bill_output: int | None
    requests: int | None
    cost_rows: int  # the cost report's records in it (each may be rounded to the cent)
    calls: int
    logged_usd: Decimal
    log_input: int
    log_output: int
    unpriced_calls: int
    # Logged calls whose output count is a streaming placeholder, and what their estimated
    # output adds to ``logged_usd`` over their logged counts (the gap it explains).
    placeholder_calls: int = 0
    placeholder_usd: Decimal = Decimal(0)

    @property
    def unexplained_usd(self) -> Decimal:
        return self.billed_usd - self.logged_usd

    @property
    def tolerance(self) -> Decimal:
        """How far apart bill and logs may be and still agree: half a cent, per cost record
        when the bill is a cost report (the Console rounds each record to the cent)."""
        return CENT / 2 * max(1, self.cost_rows)

    @property
    def status(self) -> str:
        if self.basis == "unpriced":
            return "unpriced"
        if not self.calls:
            return "no log"
        if abs(self.unexplained_usd) <= self.tolerance:
            return "explained"
        return "partly" if self.unexplained_usd > 0 else "more in logs"

    @property
    def unexplained_at_logged_output_usd(self) -> Decimal:
        """What the logs leave unexplained at their logged (placeholder) output counts."""
        return self.unexplained_usd + self.placeholder_usd

    def to_json(self) -> dict[str, Any]:
        return json_record(self)


def units(store: Store) -> list[Unit]:
    """Every unit of the bucketed bills the store holds, in time order."""
    found = []
    rows = store.engine.rows("detect/bill_units.sql", {"gateways": list(GATEWAY_BILLS)})
    for (
        provider,
        start,
        end,
        model,
        cost,
        cost_rows,
        estimate,
        unpriced_rows,
        inp,
        outp,
        requests,
        calls,
        logged,
        log_in,
        log_out,
        unpriced_calls,
        ph_calls,
        ph_usd,
    ) in rows:
        if cost_rows:
            billed, basis = Decimal(cost), "billed"
        elif estimate is not None and not unpriced_rows:
            billed, basis = Decimal(estimate), "estimated"
        else:
            billed, basis = Decimal(estimate or 0), "unpriced"
        found.append(
            Unit(
                provider=str(provider),
                start=start,
                end=end,
                model=model,
                billed_usd=billed,
                basis=basis,
                estimate_usd=None if estimate is None else Decimal(estimate),
                bill_input=None if inp is None else int(inp),
                bill_output=None if outp is None else int(outp),
                requests=None if requests is None else int(requests),
                cost_rows=int(cost_rows),
                calls=int(calls),
                logged_usd=Decimal(logged),
                log_input=int(log_in),
                log_output=int(log_out),
                unpriced_calls=int(unpriced_calls),
                placeholder_calls=int(ph_calls),
                placeholder_usd=Decimal(ph_usd),
            )
        )
    return found


@dataclass
class Totals:
    """What the bucketed bills add up to, and how much of it the logs explain."""

    JSON_FORM: ClassVar[JsonForm] = JsonForm(
        rename={"over_usd": "logs_beyond_bill_usd"},
        omit=("calls",),
        convert=dict.fromkeys(_USD, fixed),
    )

    billed_usd: Decimal
    explained_usd: Decimal  # per unit, the logs' dollars up to the bill's
    no_log_usd: Decimal  # per unit, the bill's dollars beyond the logs'
    over_usd: Decimal  # per unit, the logs' dollars beyond the bill's
    units: int
    providers: list[str]
    calls: int = 0  # the logged calls in the units

    @property
    def logged_usd(self) -> Decimal:
        """The logs' dollars in the priced units."""
        return self.explained_usd + self.over_usd

    @property
    def unexplained_usd(self) -> Decimal:
        """The bill less the logs, over the priced units."""
        return self.no_log_usd - self.over_usd

    def to_json(self) -> dict[str, Any]:
        return json_record(self)


def totals(found: list[Unit]) -> Totals:
    priced = [u for u in found if u.basis != "unpriced"]
    return Totals(
        billed_usd=sum((u.billed_usd for u in priced), Decimal(0)),
        explained_usd=sum((min(u.billed_usd, u.logged_usd) for u in priced), Decimal(0)),
        no_log_usd=sum((max(u.unexplained_usd, Decimal(0)) for u in priced), Decimal(0)),
        over_usd=sum((max(-u.unexplained_usd, Decimal(0)) for u in priced), Decimal(0)),
        units=len(found),
        providers=sorted({u.provider for u in found}),
        calls=sum(u.calls for u in found),
    )


def has_buckets(store: Store) -> bool:
    return bool(store.scalar("SELECT count(*) > 0 FROM bill_buckets"))


@dataclass
class BillRow:
    """A bucketed bill's figures for one bucket, provider and model (``usage bills``)."""

    JSON_FORM: ClassVar[JsonForm] = JsonForm(
        convert={**dict.fromkeys(("start", "end"), iso), **dict.fromkeys(_USD, fixed)}
    )

    provider: str
    start: datetime
    end: datetime
    model: str | None
    requests: int | None
    input: int  # fresh prompt tokens (cache reads and writes apart), as the usage views
    cache_write: int
    cache_read: int
    output: int
    billed_usd: Decimal | None  # the cost report's dollars
    estimate_usd: Decimal | None  # the usage report's tokens at list prices
    formats: list[str]

    def to_json(self) -> dict[str, Any]:
        return json_record(self)


def bills(store: Store) -> list[BillRow]:
    """The bucketed bills, one row per bucket, provider and model, in time order."""
    rows = store.engine.rows("detect/bill_rows.sql")
    return [
        BillRow(
            str(p),
            start,
            end,
            model,
            None if req is None else int(req),
            int(inp),
            int(cw),
            int(cr),
            int(out),
            None if usd is None else Decimal(usd),
            None if est is None else Decimal(est),
            [str(f) for f in fmts],
        )
        for p, start, end, model, req, inp, cw, cr, out, usd, est, fmts in rows
    ]


@dataclass
class BillTotals:
    """What the rows of ``bills`` add up to (``usage bills``'s last line)."""

    requests: int | None  # None: no row counts requests
    input: int
    cache_write: int
    cache_read: int
    output: int
    billed_usd: Decimal  # the cost reports' dollars
    estimate_usd: Decimal  # the usage reports' tokens at list prices


def bill_totals(rows: list[BillRow]) -> BillTotals:
    counted = [r.requests for r in rows if r.requests is not None]
    return BillTotals(
        requests=sum(counted) if counted else None,
        input=sum(r.input for r in rows),
        cache_write=sum(r.cache_write for r in rows),
        cache_read=sum(r.cache_read for r in rows),
        output=sum(r.output for r in rows),
        billed_usd=sum((r.billed_usd or Decimal(0) for r in rows), Decimal(0)),
        estimate_usd=sum((r.estimate_usd or Decimal(0) for r in rows), Decimal(0)),
    )
