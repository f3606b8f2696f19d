"""Where the money went (``audit``): one computation over the store, the summary, shown as
text or JSON, with the guards replayed (``views.backtest``) and what was read
(``views.ingest``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, ClassVar

from analyzer.console import warn
from analyzer.detect.detectors import load_incidents, wasted_once
from analyzer.detect.link import reconciliation
from analyzer.detect.reconcile import Totals, Unit, has_buckets, totals, units
from analyzer.engine.store import Store
from analyzer.formats import billing_formats
from analyzer.guards.backtest import GuardRun
from analyzer.load.flow import FileReport
from analyzer.model.formatting import iso, money, printable, wrap
from analyzer.model.incident import Incident
from analyzer.model.pricing import unpriced_warning
from analyzer.model.records import JsonForm, json_record
from analyzer.model.timewindow import Window, local
from analyzer.views.backtest import render_backtest
from analyzer.views.bill_views import PROVIDERS
from analyzer.views.terminal import render_incident_list, waste_line
from analyzer.views.text_table import TextColumn, TextTable, lay_out
from analyzer.views.usage import UsageRow, placeholder_text
from analyzer.views.usage import totals as usage_totals
from analyzer.views.verdicts import Unstated, outcomes, unstated
from analyzer.views.view import How, View


@dataclass
class SpendRow:
    name: str
    calls: int
    usd: Decimal
    share: float  # of the total spend, 0..1


@dataclass
class Summary(View):
    """Where the money went (``audit``): the terminal summary, or ``audit --json``."""

    name = "summary"
    # ``audit --json``: its fields in this order, the period as one object, the placeholder
    # figures as the usage views write them, the bills per bucket only when loaded.
    JSON_FORM: ClassVar[JsonForm] = JsonForm(
        first=("period",),
        omit=("period_start", "period_end", "bucket_units"),
        derived=(("period", ""),),
        rename={
            "calls_by_basis": "calls_by_cost_basis",
            "usd_by_basis": "usd_by_cost_basis",
            "untokened": "unpriced_without_tokens",
            "unbilled": "unpriced_bill_rows",
            "figures": "placeholder_output",
            "by_model": "spend_by_model",
            "by_app": "spend_by_app",
            "by_key": "spend_by_api_key",
            "by_label": "spend_by_label",
        },
        convert={"figures": lambda f: f.placeholder_json() if f else None},
        unless_none=("bucket_bills", "unstated_runs", "by_label"),
    )

    period_start: datetime | None
    period_end: datetime | None
    calls: int
    # Calls whose log kept no time (most saved conversations).
    calls_without_time: int
    total_usd: Decimal
    wasted_usd: Decimal
    calls_by_basis: dict[str, int]  # billed / reported / estimated / unpriced
    usd_by_basis: dict[str, Decimal]
    # Models whose calls carry tokens but no cost: model (" (fast mode)" when so) -> calls.
    unpriced_models: dict[str, int]
    # Calls with neither tokens nor a cost in their log, by format (priced by nothing).
    untokened: dict[str, int]
    # A bill's rows that state no charge (a bill is never estimated).
    unbilled: int
    # Runs whose log says how they ended, by outcome ("none": a run with no verdict written).
    runs_by_outcome: dict[str, int]
    # The store's figures as every view counts them (``analyzer.views.usage.totals``): here for
    # what placeholder output counts do to them.
    figures: UsageRow | None
    calls_by_format: dict[str, int]
    reconciliation: dict[str, int] | None
    by_model: list[SpendRow]
    by_app: list[SpendRow]
    by_key: list[SpendRow]
    sources: list[dict[str, Any]]
    rejects: int
    incidents: list[Incident] = field(default_factory=list)
    # Bills per time bucket (Anthropic's, OpenAI's reports) against the logs, when loaded.
    bucket_bills: Totals | None = None
    bucket_units: list[Unit] = field(default_factory=list)  # what those totals add up
    # Spend by label and value (``calls.labels``), where calls have labels (else None).
    by_label: list[SpendRow] | None = None
    # Runs priced at list prices in files that state their other runs' costs (a run cut off
    # before its result line): how much of the spend is above what those files state.
    unstated_runs: Unstated | None = None

    @property
    def period(self) -> dict[str, str | None]:
        """The period its calls span, ISO times."""
        return {"start": iso(self.period_start), "end": iso(self.period_end)}

    def text(self, how: How) -> str:
        return render_text(self, how.tz, how.width)

    def json(self) -> dict[str, Any]:
        return self.to_json()

    def to_json(self) -> dict[str, Any]:
        """As ``audit --json`` prints it: dollars exact (``Decimal``, written as numbers with
        all their digits by ``formatting.json_text``)."""
        return json_record(self)


def _spend(store: Store, column: str, total: Decimal, top: int) -> list[SpendRow]:
    rows = store.engine.rows("views/spend.sql", {"top": top}, column=column)
    return _spend_rows(rows, total)


def _spend_rows(rows: list[Any], total: Decimal) -> list[SpendRow]:
    return [
        SpendRow(str(n), int(c), Decimal(u), float(u / total) if total else 0.0) for n, c, u in rows
    ]


def _spend_by_label(store: Store, total: Decimal, top: int) -> list[SpendRow] | None:
    """Spend per label and value (a call counts under each of its labels), or None where no
    call has labels."""
    rows = _spend_rows(store.engine.rows("views/spend_labels.sql", {"top": top}), total)
    return rows or None


def build_summary(store: Store, top: int = 10) -> Summary:
    bills = {"bills": billing_formats()}
    figures = usage_totals(store)  # the counts and dollars every view shows
    calls, total = figures.calls, figures.total_usd
    start, end = figures.first_ts, figures.last_ts
    untimed = store.scalar("SELECT count(*) FILTER (WHERE ts IS NULL) FROM live_calls")
    basis = figures.calls_by_basis
    usd_basis = dict(sorted(figures.usd.items()))
    cols = [
        "source_id",
        "path",
        "format",
        "bytes",
        "rows_read",
        "rows_loaded",
        "rows_rejected",
        "rows_duplicate",
        "rows_skipped",
    ]
    sources = [
        dict(zip(cols, row, strict=True))
        for row in store.engine.rows(
            "SELECT {{cols}} FROM sources ORDER BY source_id", cols=", ".join(cols)
        )
    ]
    rejects = int(store.scalar("SELECT count(*) FROM rejects"))
    by_format = {
        str(f): int(n)
        for f, n in store.engine.rows(
            "SELECT format, count(*) FROM live_calls GROUP BY 1 ORDER BY 2 DESC, 1"
        )
    }
    # Logged calls with tokens and no price (a bill's row is never priced: apart, below).
    unpriced_models = {
        str(m): int(n) for m, n in store.engine.rows("views/unpriced_models.sql", bills)
    }
    unbilled = int(store.engine.scalar("views/unbilled.sql", bills))
    untokened = {str(f): int(n) for f, n in store.engine.rows("views/untokened.sql")}
    rec = reconciliation(store)
    incidents = load_incidents(store)
    bucketed = units(store) if has_buckets(store) else []
    return Summary(
        calls=int(calls),
        total_usd=total,
        period_start=start,
        period_end=end,
        calls_by_basis=basis,
        usd_by_basis=usd_basis,
        by_model=_spend(store, "model", total, top),
        by_app=_spend(store, "app", total, top),
        by_key=_spend(store, "api_key", total, top),
        by_label=_spend_by_label(store, total, top),
        sources=sources,
        rejects=rejects,
        calls_by_format=by_format,
        reconciliation=rec.to_dict() if rec else None,
        calls_without_time=int(untimed),
        unpriced_models=unpriced_models,
        incidents=incidents,
        wasted_usd=wasted_once(store, incidents),
        bucket_bills=totals(bucketed) if bucketed else None,
        bucket_units=bucketed,
        untokened=untokened,
        unbilled=unbilled,
        runs_by_outcome=outcomes(store),
        figures=figures,
        unstated_runs=unstated(store),
    )


def warn_unpriced(s: Summary) -> None:
    """Name once on stderr each model whose calls have no price (the same line ingest says, so
    a run that loaded them says it once), so a user knows why dollars are missing."""
    for model, n in s.unpriced_models.items():
        if model == "(no model)":
            warn(f"{n:,} calls name no model: they are left unpriced")
        else:
            warn(unpriced_warning(model))


def render_text(s: Summary, tz: str = "UTC", width: int = 100) -> str:
    """The terminal summary, fitted to ``width`` (colour is dropped when piped)."""
    bills = _bills_line(s.bucket_bills)
    if not s.calls:
        return "No calls in the store.\n" + (f"Bills    {bills}\n" if bills else "")
    out = [_period(s, tz), *_facts(s, width, bills)]
    out += _field("Wasted", waste_line(s.wasted_usd, s.total_usd, s.incidents), width)
    if s.rejects:
        out += _field(
            "Rejects",
            f"{s.rejects:,} input records could not be loaded (`llm-forensics rejects` lists them)",
            width,
        )
    if s.incidents:
        out.append("")
        listed = render_incident_list(s.incidents, tz, width, limit=10, total=s.wasted_usd)
        out.append(listed.rstrip("\n"))
    out += _spend_tables(s, width)
    return "\n".join(out) + "\n"


def _period(s: Summary, tz: str) -> str:
    """The summary's first line: the period its calls span, in ``tz``."""
    if s.period_start is None or s.period_end is None:
        return f"Period   unknown: none of the {s.calls:,} calls has a time"
    days = (s.period_end - s.period_start).total_seconds() / 86400
    untimed = f"; {s.calls_without_time:,} calls have no time" if s.calls_without_time else ""
    start, end = local(s.period_start, tz), local(s.period_end, tz)
    return (
        f"Period   {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} {tz} ({days:.1f} days{untimed})"
    )


def _field(label: str, text: str, width: int) -> list[str]:
    """A labelled line of the summary, ``text`` wrapped under its first line."""
    lines = wrap(text, width - 9)
    return [f"{label:<9}{lines[0]}", *(" " * 9 + line for line in lines[1:])]


def _facts(s: Summary, width: int, bills: str) -> list[str]:
    """The summary's labelled lines from the calls to the bills."""
    out: list[str] = []
    basis = ", ".join(f"{n:,} {b}" for b, n in s.calls_by_basis.items())
    out += _field("Calls", f"{s.calls:,} ({basis})", width)
    if len(s.calls_by_format) > 1:
        out += _field("", ", ".join(f"{n:,} {f}" for f, n in s.calls_by_format.items()), width)
    if s.reconciliation:
        rec = s.reconciliation
        text = (
            f"{rec['matched']:,} logged calls to their billing rows; unmatched: "
            f"{rec['log_calls_unmatched']:,} logged calls in the billed period, "
            f"{rec['billing_rows_unmatched']:,} billing rows near logged sessions"
        )
        out += _field("Matched", text, width)
    parts = ", ".join(f"{money(u)} {b}" for b, u in s.usd_by_basis.items())
    spend = money(s.total_usd) + (f" ({parts})" if len(s.usd_by_basis) > 1 else "")
    out += _field("Spend", spend, width)
    for text in _unpriced(s):
        out += _field("Unpriced", text, width)
    if s.figures and s.figures.placeholder_calls:
        out += _field("Output", placeholder_text(s.figures), width)
    if s.runs_by_outcome:
        ends = ", ".join(
            f"{n:,} {'no verdict' if o == 'none' else o}" for o, n in s.runs_by_outcome.items()
        )
        runs = f"{sum(s.runs_by_outcome.values()):,} as their own logs end them: {ends}"
        out += _field("Runs", runs, width)
    if s.unstated_runs:
        out += _field("Unstated", s.unstated_runs.text(), width)
    if bills:
        out += _field("Bills", bills, width)
    return out


def _unpriced(s: Summary) -> list[str]:
    """Why calls have no cost, a line for each reason found."""
    out = []
    if s.unpriced_models:
        named = ", ".join(
            f"{printable(m)} ({n:,})" for m, n in s.unpriced_models.items() if m != "(no model)"
        )
        nameless = s.unpriced_models.get("(no model)")
        why = [f"{named}: no known price"] if named else []
        why += [f"{nameless:,} calls name no model in their log"] if nameless else []
        out.append("; ".join(why) + ", counted as $0")
    if s.unbilled:
        out.append(f"{s.unbilled:,} billing rows state no charge, counted as $0")
    if s.untokened:
        formats = ", ".join(f"{n:,} {f}" for f, n in s.untokened.items())
        out.append(f"{formats}: no tokens and no cost in the log, counted as $0")
    return out


_SPEND_COLUMNS = [
    TextColumn("calls", 9, lambda r: f"{r.calls:,}"),
    TextColumn("spend", 12, lambda r: money(r.usd)),
    TextColumn("share", 6, lambda r: f"{r.share:.1%}"),
]


def _spend_tables(s: Summary, width: int) -> list[str]:
    """Spend by model, app and API key: the top rows of each, as tables."""
    out: list[str] = []
    spend: tuple[tuple[str, list[SpendRow]], ...] = (
        ("model", s.by_model),
        ("app", s.by_app),
        ("API key", s.by_key),
        *((("label", s.by_label),) if s.by_label else ()),
    )
    for title, rows in spend:
        out.append("")
        out.append(f"Spend by {title} (top {len(rows)})")
        keyed = [(printable(r.name), r) for r in rows]
        table = TextTable(title, _SPEND_COLUMNS, keyed, indent="  ", gap="  ", margin=2)
        out += lay_out(table, width).lines
    return out


def _bills_line(t: Totals | None) -> str:
    """What the bills per bucket add up to, and what of it has no log."""
    if t is None:
        return ""
    who = " and ".join(PROVIDERS.get(p, p) for p in t.providers)
    return (
        f"{money(t.billed_usd)} on {who}'s bills per bucket: the logs explain "
        f"{money(t.explained_usd)}, {money(t.no_log_usd)} has no log (`llm-forensics usage "
        "reconcile` names it)"
    )


class AuditView(View):
    """What ``audit`` found: the summary (after the window, when one is set) and the guards
    replayed at their own thresholds; as JSON, the summary with the window, the replay, the
    guards that would have stopped each incident and what was ingested."""

    name = "audit"

    def __init__(
        self,
        summary: Summary,
        guards: GuardRun,
        reports: list[FileReport],
        window: Window,
        tz: str = "UTC",
    ) -> None:
        self.summary, self.guards, self.reports = summary, guards, reports
        self.window, self.tz = window, tz

    def text(self, how: How) -> str:
        window = f"Window   {self.window.describe(how.tz)}\n" if self.window else ""
        return (
            window
            + render_text(self.summary, how.tz, how.width)
            + "\nGuards (replayed at their own thresholds)\n"
            + render_backtest(self.guards.results, how.width)
        )

    def json(self) -> dict[str, Any]:
        data = self.summary.to_json()
        data["window"] = self.window.describe(self.tz)
        # How many of the incidents wasted money (the others are findings that cost nothing).
        data["incidents_with_waste"] = sum(1 for i in self.summary.incidents if i.wasted_usd > 0)
        data["backtest"] = [r.to_json() for r in self.guards.results]
        for inc in data["incidents"]:  # the guards that would have stopped it, as `show` has
            stops = self.guards.stops(inc["incident_id"]).stopped_by
            inc["stopped_by"] = [s.to_json() for s in stops]
        data["ingested"] = [r.to_dict() for r in self.reports]
        return data
