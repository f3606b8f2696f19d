"""Where the money went: one computation over the store, shown as text or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from analyzer.console import warn
from analyzer.detect import load_incidents
from analyzer.formatting import iso, money
from analyzer.incident import Incident
from analyzer.ingest.flow import FileReport
from analyzer.link import reconciliation
from analyzer.pricing import unpriced_warning
from analyzer.scoring import Result
from analyzer.store import Store


@dataclass
class SpendRow:
    name: str
    calls: int
    usd: Decimal
    share: float  # of the total spend, 0..1


@dataclass
class Summary:
    calls: int
    total_usd: Decimal
    period_start: datetime | None
    period_end: datetime | None
    calls_by_basis: dict[str, int]  # billed / reported / estimated / unpriced
    usd_by_basis: dict[str, Decimal]
    by_model: list[SpendRow]
    by_app: list[SpendRow]
    by_key: list[SpendRow]
    sources: list[dict[str, Any]]
    rejects: int
    incidents: list[Incident] = field(default_factory=list)
    wasted_usd: Decimal = Decimal(0)
    calls_by_format: dict[str, int] = field(default_factory=dict)
    reconciliation: dict[str, int] | None = None
    calls_without_time: int = 0  # calls whose log kept no time (most saved conversations)
    # Models whose calls carry tokens but no cost: model (" (fast mode)" when so) -> calls.
    unpriced_models: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        def rows(items: list[SpendRow]) -> list[dict[str, Any]]:
            return [
                {"name": r.name, "calls": r.calls, "usd": float(r.usd), "share": r.share}
                for r in items
            ]

        return {
            "period": {
                "start": iso(self.period_start),
                "end": iso(self.period_end),
            },
            "calls": self.calls,
            "calls_without_time": self.calls_without_time,
            "total_usd": float(self.total_usd),
            "wasted_usd": float(self.wasted_usd),
            "calls_by_cost_basis": self.calls_by_basis,
            "usd_by_cost_basis": {b: float(u) for b, u in self.usd_by_basis.items()},
            "unpriced_models": self.unpriced_models,
            "calls_by_format": self.calls_by_format,
            "reconciliation": self.reconciliation,
            "spend_by_model": rows(self.by_model),
            "spend_by_app": rows(self.by_app),
            "spend_by_api_key": rows(self.by_key),
            "sources": self.sources,
            "rejects": self.rejects,
            "incidents": [i.to_json() for i in self.incidents],
        }


def _spend(store: Store, column: str, total: Decimal, top: int) -> list[SpendRow]:
    rows = store.con.execute(
        f"""SELECT coalesce({column}, '(none)') AS name, count(*) AS calls,
                   coalesce(sum(cost_usd), 0) AS usd
            FROM live_calls GROUP BY 1 ORDER BY usd DESC, calls DESC, name LIMIT ?""",
        [top],
    ).fetchall()
    return [
        SpendRow(str(n), int(c), Decimal(u), float(u / total) if total else 0.0) for n, c, u in rows
    ]


def build_summary(store: Store, top: int = 10) -> Summary:
    con = store.con
    calls, total, start, end, untimed = con.execute(
        """SELECT count(*), coalesce(sum(cost_usd), 0), min(ts), max(ts),
                  count(*) FILTER (WHERE ts IS NULL) FROM live_calls"""
    ).fetchall()[0]
    total = Decimal(total)
    by_basis = con.execute(
        """SELECT coalesce(cost_basis, 'unpriced'), count(*), coalesce(sum(cost_usd), 0)
           FROM live_calls GROUP BY 1 ORDER BY 1"""
    ).fetchall()
    basis = {str(b): int(n) for b, n, _ in by_basis}
    usd_basis = {str(b): Decimal(u) for b, _, u in by_basis if b != "unpriced"}
    cols = [
        "source_id", "path", "format", "bytes", "rows_read", "rows_loaded", "rows_rejected",
        "rows_duplicate", "rows_skipped",
    ]  # fmt: skip
    sources = [
        dict(zip(cols, row, strict=True))
        for row in con.execute(
            f"SELECT {', '.join(cols)} FROM sources ORDER BY source_id"
        ).fetchall()
    ]
    rejects = int(store.scalar("SELECT count(*) FROM rejects"))
    by_format = {
        str(f): int(n)
        for f, n in con.execute(
            "SELECT format, count(*) FROM live_calls GROUP BY 1 ORDER BY 2 DESC, 1"
        ).fetchall()
    }
    unpriced_models = {
        str(m): int(n)
        for m, n in con.execute(
            """SELECT coalesce(model, '(no model)')
                      || CASE WHEN variant = 'fast' THEN ' (fast mode)' ELSE '' END, count(*)
               FROM live_calls
               WHERE cost_usd IS NULL AND (input_tokens > 0 OR output_tokens > 0)
               GROUP BY 1 ORDER BY 2 DESC, 1"""
        ).fetchall()
    }
    rec = reconciliation(store)
    incidents = load_incidents(store)
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
        sources=sources,
        rejects=rejects,
        calls_by_format=by_format,
        reconciliation=rec.to_dict() if rec else None,
        calls_without_time=int(untimed),
        unpriced_models=unpriced_models,
        incidents=incidents,
        wasted_usd=sum((i.wasted_usd for i in incidents), Decimal(0)),
    )


def warn_unpriced(s: Summary) -> None:
    """Name once on stderr each model whose calls have no price (the same line ingest says, so
    a run that loaded them says it once), so a user knows why dollars are missing."""
    for model, n in s.unpriced_models.items():
        if model == "(no model)":
            warn(f"{n:,} calls name no model: they are left unpriced")
        else:
            warn(unpriced_warning(model))


def _clean(text: str) -> str:
    """Names come from untrusted exports: keep control characters off the user's terminal."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def render_incidents(incidents: list[Incident], limit: int = 25) -> str:
    """Incidents, most wasted dollars first, one line each."""
    if not incidents:
        return "No incidents.\n"
    total = sum((i.wasted_usd for i in incidents), Decimal(0))
    out = [f"Incidents ({len(incidents)}, {money(total)} wasted), most wasted first"]
    for i in incidents[:limit]:
        when = f"{i.start_ts:%Y-%m-%d %H:%M}" if i.start_ts else ""
        out.append(
            f"  {i.severity:<6} {money(i.wasted_usd):>9}  {i.detector:<26} {when:<16}  "
            + _clean(i.summary)
        )
    if len(incidents) > limit:
        out.append(f"  ... and {len(incidents) - limit} more (--json lists them all)")
    return "\n".join(out) + "\n"


def render_text(s: Summary) -> str:
    """The terminal summary (plain text, no colour: it may be piped)."""
    out: list[str] = []
    if not s.calls:
        return "No calls in the store.\n"
    if s.period_start is None or s.period_end is None:
        out.append(f"Period   unknown: none of the {s.calls:,} calls has a time")
    else:
        days = (s.period_end - s.period_start).total_seconds() / 86400
        untimed = f"; {s.calls_without_time:,} calls have no time" if s.calls_without_time else ""
        out.append(
            f"Period   {s.period_start:%Y-%m-%d %H:%M} to {s.period_end:%Y-%m-%d %H:%M} UTC"
            f" ({days:.1f} days{untimed})"
        )
    basis = ", ".join(f"{n:,} {b}" for b, n in s.calls_by_basis.items())
    out.append(f"Calls    {s.calls:,} ({basis})")
    if len(s.calls_by_format) > 1:
        out.append("         " + ", ".join(f"{n:,} {f}" for f, n in s.calls_by_format.items()))
    if s.reconciliation:
        rec = s.reconciliation
        out.append(
            f"Matched  {rec['matched']:,} logged calls to their billing rows; unmatched: "
            f"{rec['log_calls_unmatched']:,} logged calls in the billed period, "
            f"{rec['billing_rows_unmatched']:,} billing rows near logged sessions"
        )
    parts = ", ".join(f"{money(u)} {b}" for b, u in s.usd_by_basis.items())
    out.append(
        f"Spend    {money(s.total_usd)}" + (f" ({parts})" if len(s.usd_by_basis) > 1 else "")
    )
    if s.unpriced_models:
        named = ", ".join(f"{_clean(m)} ({n:,})" for m, n in s.unpriced_models.items())
        out.append(f"Unpriced {named}: no known price, counted as $0")
    share = float(s.wasted_usd / s.total_usd) if s.total_usd else 0.0
    out.append(f"Wasted   {money(s.wasted_usd)} ({share:.1%}) in {len(s.incidents)} incidents")
    if s.rejects:
        out.append(f"Rejects  {s.rejects:,} input records could not be loaded (see `rejects`)")
    if s.incidents:
        out.append("")
        out.append(render_incidents(s.incidents).rstrip("\n"))
    spend: tuple[tuple[str, list[SpendRow]], ...] = (
        ("model", s.by_model),
        ("app", s.by_app),
        ("API key", s.by_key),
    )
    for title, rows in spend:
        out.append("")
        out.append(f"Spend by {title} (top {len(rows)})")
        width = max([len(_clean(r.name)) for r in rows] + [len(title)])
        width = min(width, 48)
        out.append(f"  {title:<{width}}  {'calls':>9}  {'spend':>12}  {'share':>6}")
        for r in rows:
            name = _clean(r.name)
            name = name if len(name) <= width else name[: width - 1] + "…"
            out.append(f"  {name:<{width}}  {r.calls:>9,}  {money(r.usd):>12}  {r.share:>6.1%}")
    return "\n".join(out) + "\n"


def render_backtest(results: list[Result]) -> str:
    """The guard replay as a table, one policy (or swept value) a line, with what a team needs
    to pick a threshold: what it stopped of its targets, what it prevented and missed, the harm
    it did, the net, and how close healthy work came to tripping it (headroom)."""
    if not results:
        return "No policies.\n"
    sweep = len({r.policy for r in results}) < len(results)
    head = (
        f"{'policy':<30} {'stopped':>8} {'prevented':>10} {'missed':>9} {'false':>6} "
        f"{'harm':>9} {'net':>9} {'headroom':>8} {'nudges':>6} {'latency':>7}"
    )
    out = [head]
    single = len({r.policy for r in results}) == 1
    if sweep and single:
        out.insert(0, f"{results[0].policy}, its stop threshold swept")
    for r in results:
        name = r.policy
        if sweep and any(x.policy == r.policy for x in results if x is not r):
            suffix = f"stop={r.params['stop']:g}"
            name = suffix if single else f"{r.policy[: 29 - len(suffix)]} {suffix}"
        name = name if len(name) <= 30 else name[:29] + "…"
        latency = "–" if r.median_latency_events is None else f"{r.median_latency_events:g}"
        headroom = "–" if r.headroom is None else f"{r.headroom:g}"
        out.append(
            f"{name:<30} {r.incidents_stopped:>3}/{r.incidents_total:<4} "
            f"{money(r.waste_prevented_usd):>10} {money(r.waste_missed_usd):>9} "
            f"{r.false_trips:>6,} {money(r.harm_usd):>9} {money(r.net_usd):>9} "
            f"{headroom:>8} {len(r.nudges):>6,} {latency:>7}"
        )
    blind: dict[tuple[int, int], list[str]] = {}
    for r in {x.policy: x for x in results}.values():
        if r.blind_calls:
            blind.setdefault((r.blind_calls, r.calls_total), []).append(r.policy)
    for (n, total), names in blind.items():
        out.append(
            f"blind on {n:,} of {total:,} calls (billing rows carry no tool or thinking signal, "
            f"and no turns; left out): {', '.join(names)}"
        )
    judged = max((r.incidents_total for r in results), default=0)
    if sweep and judged < 5:
        out.append(f"judged on {judged} target incident(s): too few to read as proof")
    out.append(
        "stopped: target incidents (events: incidents sharing wasted calls count once; medium "
        "and high only) stopped / judged on; prevented, missed: their waste after the stop / "
        "left; false: stops that prevented nothing; harm: what the stops killed that was not "
        "waste, and outputs a failing stop threw away; net = prevented - harm; headroom: the "
        "highest value the guard reached on healthy work; latency: median of the guard's own "
        "events from an incident's start to the trip."
    )
    return "\n".join(out) + "\n"


def file_lines(reports: list[FileReport]) -> list[str]:
    """What ingest did with each file, a line each."""
    lines = []
    for r in reports:
        if r.status == "loaded":
            lines.append(
                f"{r.path}  [{r.format}]  read {r.rows_read:,}  loaded {r.rows_loaded:,}  "
                f"rejected {r.rows_rejected:,}  duplicate {r.rows_duplicate:,}  "
                f"skipped {r.rows_skipped:,}"
            )
        elif r.status == "unchanged":
            lines.append(f"{r.path}  [{r.format}]  unchanged (already ingested)")
        elif r.status == "unreadable":
            lines.append(f"{r.path}  skipped (cannot be read as a file)")
        else:
            lines.append(f"{r.path}  skipped (not a recognised format)")
    return lines
