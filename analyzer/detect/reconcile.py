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


# What ``--match`` may name on a bill's side: the bill_buckets column holding it.
MATCH_COLUMNS = {
    "workspace": "workspace",
    "api_key": "api_key",
    "project": "project",
    "user": "user_id",
}
_TOKENS = ("input", "cache_read", "cache_write", "output")


@dataclass(frozen=True)
class Match:
    """Which call label holds which of the bill's keys (``--match workspace=LABEL``): a
    bill grouped by that key is then compared key by key with the calls that carry it."""

    column: str  # a key of MATCH_COLUMNS
    label: str  # the calls' label (a key of calls.labels)

    @classmethod
    def parse(cls, text: str) -> Match:
        column, sep, label = text.partition("=")
        column = column.strip().replace("-", "_")
        if not sep or column not in MATCH_COLUMNS or not label.strip():
            raise ValueError(
                f"--match takes BILL_KEY=LABEL, BILL_KEY one of {', '.join(MATCH_COLUMNS)} "
                f"(e.g. workspace=workspace.id), not {text[:60]!r}"
            )
        return cls(column, label.strip())


@dataclass
class Unit:
    """One provider's bucket for one model (and key): the bill, and the logged calls that
    explain it; or, with no bill row (``has_bill`` false), logged calls inside a bucket the
    bill covers under a model or key it does not name."""

    JSON_FORM: ClassVar[JsonForm] = JsonForm(
        rename={
            "bill_input": "bill_input_tokens",
            "bill_cache_read": "bill_cache_read_tokens",
            "bill_cache_write": "bill_cache_write_tokens",
            "bill_output": "bill_output_tokens",
            "requests": "bill_requests",
            "calls": "logged_calls",
            "log_input": "log_input_tokens",
            "log_cache_read": "log_cache_read_tokens",
            "log_cache_write": "log_cache_write_tokens",
            "log_output": "log_output_tokens",
            "unpriced_calls": "unpriced_logged_calls",
            "stated_calls": "logged_calls_cost_stated",
            "estimated_calls": "logged_calls_at_list_prices",
        },
        omit=("cost_rows", "has_bill"),
        convert={
            **dict.fromkeys(("start", "end"), iso),
            **dict.fromkeys(
                (*_USD, "unexplained_at_logged_output_usd", "missing_usd", "extra_usd"), fixed
            ),
        },
        derived=(
            ("unexplained_usd", "unpriced_calls"),
            ("status", "unexplained_usd"),
            ("missing_usd", ""),
            ("extra_usd", ""),
            ("missing_calls", ""),
            ("extra_calls", ""),
            *((f"missing_{k}_tokens", "") for k in _TOKENS),
            *((f"extra_{k}_tokens", "") for k in _TOKENS),
            ("unexplained_at_logged_output_usd", ""),
        ),
    )

    provider: str
    start: datetime
    end: datetime
    model: str | None  # as the bill names it (None: the bill is not grouped by model)
    billed_usd: Decimal
    # billed (a cost report) | apportioned (a cost report's longer bucket shared over the
    # usage report's buckets by their list prices) | estimated (tokens at list prices) |
    # unpriced | no bill (logged calls only)
    basis: str
    estimate_usd: Decimal | None  # the usage report's tokens at list prices
    bill_input: int | None  # the bill's tokens (usage reports; None: only dollars)
    bill_output: int | None
    requests: int | None  # the bill's requests (OpenAI's usage; None: not counted)
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
    key: str | None = None  # the bill's key, workspace or project (with --match)
    has_bill: bool = True
    bill_cache_read: int | None = None  # of bill_input: read from the cache
    bill_cache_write: int | None = None  # of bill_input: written to it
    log_cache_read: int = 0
    log_cache_write: int = 0
    stated_calls: int = 0  # logged calls at the log's own (or a bill's) figure
    estimated_calls: int = 0  # logged calls priced here from list prices

    @property
    def unexplained_usd(self) -> Decimal:
        return self.billed_usd - self.logged_usd

    @property
    def missing_usd(self) -> Decimal:
        """The bill's dollars the logs lack."""
        return max(self.unexplained_usd, Decimal(0))

    @property
    def extra_usd(self) -> Decimal:
        """The logs' dollars the bill lacks."""
        return max(-self.unexplained_usd, Decimal(0))

    @property
    def missing_calls(self) -> int | None:
        """Requests the bill counts and the logs lack (None: the bill counts none)."""
        return None if self.requests is None else max(self.requests - self.calls, 0)

    @property
    def extra_calls(self) -> int | None:
        """Logged calls beyond the bill's requests (all of them where there is no bill)."""
        if not self.has_bill:
            return self.calls
        return None if self.requests is None else max(self.calls - self.requests, 0)

    def tokens(self, side: str) -> dict[str, int] | None:
        """The bill's (``bill``) or the logs' (``log``) tokens by kind: fresh input, cache
        reads, cache writes, output (None: the bill gives no tokens)."""
        if side == "bill":
            if not self.has_bill:
                return dict.fromkeys(_TOKENS, 0)
            if self.bill_input is None and self.bill_output is None:
                return None
            whole, read, write, out = (
                self.bill_input or 0,
                self.bill_cache_read or 0,
                self.bill_cache_write or 0,
                self.bill_output or 0,
            )
        else:
            whole, read, write, out = (
                self.log_input,
                self.log_cache_read,
                self.log_cache_write,
                self.log_output,
            )
        return {
            "input": max(whole - read - write, 0),
            "cache_read": read,
            "cache_write": write,
            "output": out,
        }

    def token_gap(self, kind: str, missing: bool) -> int | None:
        """Tokens of ``kind`` the bill has and the logs lack (``missing``), or the reverse."""
        bill, log = self.tokens("bill"), self.tokens("log")
        if bill is None or log is None:
            return None
        gap = bill[kind] - log[kind]
        return max(gap if missing else -gap, 0)

    @property
    def missing_tokens(self) -> int | None:
        gaps = [self.token_gap(k, True) for k in _TOKENS]
        return None if gaps[0] is None else sum(g or 0 for g in gaps)

    @property
    def extra_tokens(self) -> int | None:
        gaps = [self.token_gap(k, False) for k in _TOKENS]
        return None if gaps[0] is None else sum(g or 0 for g in gaps)

    @property
    def tolerance(self) -> Decimal:
        """How far apart bill and logs may be and still agree: half a cent, per cost record
        when the bill is a cost report (the Console rounds each record to the cent)."""
        return CENT / 2 * max(1, self.cost_rows)

    @property
    def status(self) -> str:
        if self.basis == "unpriced":
            return "unpriced"
        if not self.has_bill:
            return "no bill"
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


def _token_property(kind: str, missing: bool) -> property:
    def gap(u: Unit) -> int | None:
        return u.token_gap(kind, missing)

    return property(gap)


# missing_input_tokens, extra_input_tokens, ... (written in the JSON and the CSV)
for _kind in _TOKENS:
    setattr(Unit, f"missing_{_kind}_tokens", _token_property(_kind, True))
    setattr(Unit, f"extra_{_kind}_tokens", _token_property(_kind, False))


def _int(value: object) -> int | None:
    return None if value is None else int(str(value))


def units(store: Store, match: Match | None = None) -> list[Unit]:
    """Every unit of the bucketed bills the store holds, in time order (with ``match``, per
    key of the bill where the calls carry the label that names it)."""
    found = []
    if match is None:
        names = {"key": "CAST(NULL AS VARCHAR)", "label": "CAST(NULL AS VARCHAR)"}
    else:
        names = {"key": MATCH_COLUMNS[match.column], "label": "labels ->> $label"}
    params = {"gateways": list(GATEWAY_BILLS), "label": None if match is None else match.label}
    for r in store.engine.records("detect/bill_units.sql", params, **names):
        cost_rows = int(r["cost_rows"])
        estimate = r["estimate"]
        if not r["has_bill"]:
            billed, basis = Decimal(0), "no bill"
        elif cost_rows:
            billed = Decimal(r["cost"])
            basis = "apportioned" if r["apportioned"] else "billed"
        elif estimate is not None and not r["unpriced_rows"]:
            billed, basis = Decimal(estimate), "estimated"
        else:
            billed, basis = Decimal(estimate or 0), "unpriced"
        found.append(
            Unit(
                provider=str(r["provider"]),
                start=r["bs"],
                end=r["be"],
                model=r["model"],
                billed_usd=billed,
                basis=basis,
                estimate_usd=None if estimate is None else Decimal(estimate),
                bill_input=_int(r["input"]),
                bill_output=_int(r["output"]),
                requests=_int(r["requests"]),
                cost_rows=cost_rows,
                calls=int(r["calls"]),
                logged_usd=Decimal(r["logged_usd"]),
                log_input=int(r["log_input"]),
                log_output=int(r["log_output"]),
                unpriced_calls=int(r["unpriced_calls"]),
                placeholder_calls=int(r["placeholder_calls"]),
                placeholder_usd=Decimal(r["placeholder_usd"]),
                key=r["k"],
                has_bill=bool(r["has_bill"]),
                bill_cache_read=_int(r["cache_read"]),
                bill_cache_write=_int(r["cache_write"]),
                log_cache_read=int(r["log_cache_read"]),
                log_cache_write=int(r["log_cache_write"]),
                stated_calls=int(r["stated_calls"]),
                estimated_calls=int(r["estimated_calls"]),
            )
        )
    return found


@dataclass
class Totals:
    """What the bucketed bills add up to, and how much of it the logs explain."""

    JSON_FORM: ClassVar[JsonForm] = JsonForm(
        rename={"over_usd": "logs_beyond_bill_usd"},
        omit=("calls",),
        convert=dict.fromkeys((*_USD, "no_bill_usd"), fixed),
    )

    billed_usd: Decimal
    explained_usd: Decimal  # per unit, the logs' dollars up to the bill's
    no_log_usd: Decimal  # per unit, the bill's dollars beyond the logs'
    over_usd: Decimal  # per unit, the logs' dollars beyond the bill's
    units: int
    providers: list[str]
    calls: int = 0  # the logged calls in the units
    logged_calls: int = 0  # the same, written
    bill_requests: int | None = None  # None: no unit's bill counts requests
    counted_calls: int = 0  # the logged calls in the units whose bill counts requests
    missing_calls: int | None = None  # where the bill counts requests
    extra_calls: int | None = None  # logged calls beyond the bill's requests
    missing_tokens: int = 0
    extra_tokens: int = 0
    no_bill_usd: Decimal = Decimal(0)  # of over_usd: logs in units with no bill row
    estimated_calls: int = 0  # logged calls priced here from list prices (no stated cost)

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


def _known(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def totals(found: list[Unit]) -> Totals:
    priced = [u for u in found if u.basis != "unpriced"]
    return Totals(
        billed_usd=sum((u.billed_usd for u in priced), Decimal(0)),
        explained_usd=sum((min(u.billed_usd, u.logged_usd) for u in priced), Decimal(0)),
        no_log_usd=sum((u.missing_usd for u in priced), Decimal(0)),
        over_usd=sum((u.extra_usd for u in priced), Decimal(0)),
        units=len(found),
        providers=sorted({u.provider for u in found}),
        calls=sum(u.calls for u in found),
        logged_calls=sum(u.calls for u in found),
        bill_requests=_known([u.requests for u in found]),
        counted_calls=sum(u.calls for u in found if u.requests is not None),
        missing_calls=_known([u.missing_calls for u in found]),
        extra_calls=_known([u.extra_calls for u in found if u.requests is not None]),
        missing_tokens=sum(u.missing_tokens or 0 for u in found),
        extra_tokens=sum(u.extra_tokens or 0 for u in found),
        no_bill_usd=sum((u.logged_usd for u in found if not u.has_bill), Decimal(0)),
        estimated_calls=sum(u.estimated_calls for u in found),
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
