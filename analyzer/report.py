"""The incident report: one self-contained page (HTML), or the same content as Markdown or JSON.

Everything the page shows is computed here, into small typed objects; the templates in
``reports/`` only lay them out (no SQL in templates). The headline totals come from the same
``Summary`` that ``audit --json`` prints, so the two always agree.

Everything from logs and exports is untrusted: it is escaped wherever it lands (Jinja
autoescape for HTML text and attributes, matplotlib's XML escaping for SVG labels, backslash
escapes for Markdown), and strings that look like API keys are masked before they get here.
The page makes no request: CSS and charts are inline, there are no scripts and no web fonts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from analyzer import __version__, charts
from analyzer.backtest import GuardRun
from analyzer.formatting import SEVERITIES, iso_seconds, mask_keys
from analyzer.incident import Incident
from analyzer.link import is_bill
from analyzer.store import Store
from analyzer.summary import Summary, build_summary

DEFAULT_TOP_INCIDENTS = 20
MAX_CALLS_SHOWN = 60  # per incident section: the first and last 30 calls
MAX_REJECTS_SHOWN = 20


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return mask_keys(value)
    return value


# -- the context ---------------------------------------------------------------------------


@dataclass
class Headline:
    period_start: str | None
    period_end: str | None
    days: float
    calls: int
    total_usd: float
    wasted_usd: float
    wasted_share: float
    incidents: int
    incidents_by_severity: dict[str, int]
    calls_by_cost_basis: dict[str, int]
    usd_by_cost_basis: dict[str, float]
    unpriced_calls: int
    calls_without_time: int = 0
    unpriced_models: dict[str, int] = field(default_factory=dict)


@dataclass
class Breakdown:
    name: str
    calls: int
    usd: float
    wasted_usd: float
    incidents: int


@dataclass
class IncidentRow:
    rank: int
    incident_id: str
    detector: str
    severity: str
    start_ts: str | None
    end_ts: str | None
    stream_key: str | None
    session_id: str | None
    n_calls: int
    wasted_usd: float
    cost_basis: str | None
    summary: str
    first_call_id: str | None
    last_call_id: str | None
    first_provider_id: str | None = None
    last_provider_id: str | None = None


@dataclass
class CallRow:
    ts: str | None
    call_id: str
    provider_id: str | None  # the id to look up in the provider's dashboard (generation id)
    prompt_tokens: int | None
    output_tokens: int | None
    finish_reason: str | None
    response_kind: str | None
    cost_usd: float | None


@dataclass
class IncidentSection:
    incident: IncidentRow
    calls: list[CallRow]
    calls_omitted: int
    evidence: list[tuple[str, str]]
    chart_svg: str = ""


@dataclass
class SourceRow:
    path: str
    format: str
    bytes: int
    rows_read: int
    rows_loaded: int
    rows_rejected: int
    rows_duplicate: int
    rows_skipped: int


@dataclass
class RejectRow:
    path: str
    line: int | None
    reason: str
    excerpt: str | None


@dataclass
class GuardRow:
    policy: str
    description: str
    kind: str
    stop: float
    incidents_stopped: int
    incidents_total: int
    waste_prevented_usd: float
    waste_missed_usd: float
    false_trips: int
    harm_usd: float
    net_usd: float
    median_latency_events: float | None
    nudges: int
    blind: str  # "blind on N of M calls", or ""


@dataclass
class IncidentGuards:
    rank: int
    detector: str
    wasted_usd: float
    stopped_by: list[tuple[str, int, float]]  # (policy, latency in calls, waste prevented)


@dataclass
class Guards:
    rows: list[GuardRow]
    incidents: list[IncidentGuards]
    sweep: dict[str, list[tuple[float, float, int, float]]]  # stop, prevented, false, harm $


@dataclass
class Report:
    title: str
    version: str
    headline: Headline
    days: list[tuple[str, float, float]]  # (date, spend, wasted)
    by_detector: list[Breakdown]
    by_model: list[Breakdown]
    by_app: list[Breakdown]
    by_key: list[Breakdown]
    incidents: list[IncidentRow]
    sections: list[IncidentSection]
    sources: list[SourceRow]
    rejects: list[RejectRow]
    rejects_total: int
    reconciliation: dict[str, int] | None
    guards: Guards | None = None  # the backtest's results; without them the section is absent
    charts: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("charts")
        for s in data["sections"]:
            s.pop("chart_svg")
            s["evidence"] = dict(s["evidence"])
        if data["guards"] is None:
            data.pop("guards")
        return data


def _f(x: Decimal | float | None) -> float:
    return float(x or 0)


def _breakdown(store: Store, column: str, top: int) -> list[Breakdown]:
    """Spend by ``column``, with the waste of the incidents whose first call has that value."""
    rows = store.con.execute(
        f"""WITH spend AS (
                SELECT coalesce({column}, '(none)') AS name, count(*) AS calls,
                       coalesce(sum(cost_usd), 0) AS usd
                FROM live_calls GROUP BY 1),
            waste AS (
                SELECT coalesce(c.{column}, '(none)') AS name, sum(i.wasted_usd) AS wasted,
                       count(*) AS n
                FROM incidents i LEFT JOIN calls c ON c.call_id = i.first_call_id
                GROUP BY 1)
            SELECT s.name, s.calls, s.usd, coalesce(w.wasted, 0), coalesce(w.n, 0)
            FROM spend s LEFT JOIN waste w USING (name)
            ORDER BY 4 DESC, 3 DESC, 1 LIMIT ?""",
        [top],
    ).fetchall()
    return [Breakdown(_clean(str(n)), int(c), _f(u), _f(w), int(k)) for n, c, u, w, k in rows]


def incidents_calls(store: Store, incs: list[Incident]) -> dict[str, list[tuple[Any, ...]]]:
    """The calls of each incident: its stream from the first to the last call (both included);
    when they lie in different streams (a parent and its sub-agents), every call of the
    session and its sub-agents in the incident's time span. One query for all incidents."""
    if not incs:
        return {}
    con = store.con
    keys = ("incident_id", "first_call_id", "last_call_id", "session_id", "start_ts", "end_ts")
    rows = con.execute(
        f"""WITH i AS (SELECT unnest($incs, recursive := true)),
           e AS (
               SELECT i.*, f.stream_key AS fs, f.seq AS fq, l.stream_key AS ls, l.seq AS lq
               FROM i LEFT JOIN calls f ON f.call_id = i.first_call_id
                      LEFT JOIN calls l ON l.call_id = i.last_call_id),
           span AS (SELECT * FROM e WHERE fs IS DISTINCT FROM ls),
           hits AS (
               SELECT e.incident_id, c.rowid AS rid FROM e JOIN calls c
                 ON c.stream_key = e.fs AND e.fs = e.ls AND c.seq BETWEEN e.fq AND e.lq
               UNION
               SELECT s.incident_id, c.rowid FROM span s JOIN calls c
                 ON c.session_id = s.session_id AND c.ts BETWEEN s.start_ts AND s.end_ts
               UNION
               SELECT s.incident_id, c.rowid FROM span s JOIN calls c
                 ON c.parent_session_id = s.session_id AND c.ts BETWEEN s.start_ts AND s.end_ts)
           SELECT h.incident_id, c.ts, c.call_id,
                  CASE WHEN {is_bill("c.format")} THEN c.native_id END, c.response_id,
                  c.input_tokens, c.output_tokens, c.finish_reason, c.response_kind, c.cost_usd,
                  c.billing_call_id
           FROM hits h JOIN calls c ON c.rowid = h.rid
           WHERE c.superseded_by IS NULL
           ORDER BY h.incident_id, c.ts, c.seq, c.call_id""",
        {"incs": [{k: getattr(inc, k) for k in keys} for inc in incs]},
    ).fetchall()
    # The provider's id: the linked billing row's generation id, else the call's own.
    linked = sorted({r[10] for r in rows if r[10] is not None})
    billed = dict(
        con.execute(
            "SELECT call_id, native_id FROM calls WHERE call_id IN (SELECT unnest($ids))",
            {"ids": linked},
        ).fetchall()
        if linked
        else []
    )
    out: dict[str, list[tuple[Any, ...]]] = {inc.incident_id: [] for inc in incs}
    for iid, ts, cid, own, resp, pt, ot, fr, rk, cost, bid in rows:
        pid = next((x for x in (billed.get(bid), own, resp) if x is not None), None)
        out[iid].append((ts, cid, pid, pt, ot, fr, rk, cost))
    return out


def _call_rows(rows: list[tuple[Any, ...]]) -> tuple[list[CallRow], int]:
    """An incident's calls as shown: all, or the first and last when there are too many."""
    calls = [
        CallRow(
            iso_seconds(ts),
            _clean(cid),
            _clean(pid),
            pt,
            ot,
            fr,
            rk,
            None if cost is None else float(cost),
        )
        for ts, cid, pid, pt, ot, fr, rk, cost in rows
    ]
    if len(calls) <= MAX_CALLS_SHOWN:
        return calls, 0
    half = MAX_CALLS_SHOWN // 2
    return calls[:half] + calls[-half:], len(calls) - MAX_CALLS_SHOWN


def _evidence(data: dict[str, Any] | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in (data or {}).items():
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        out.append((_clean(str(key)), _clean(text)))
    return out


def _guards(run: GuardRun, incidents: list[IncidentRow]) -> Guards:
    rows = [
        GuardRow(
            policy=r.policy,
            description=_clean(r.description),
            kind=f"{r.params['type']}, per {r.params['scope']}",
            stop=float(r.params["stop"]),
            incidents_stopped=r.incidents_stopped,
            incidents_total=r.incidents_total,
            waste_prevented_usd=r.waste_prevented_usd,
            waste_missed_usd=r.waste_missed_usd,
            false_trips=r.false_trips,
            harm_usd=r.harm_usd,
            net_usd=r.net_usd,
            median_latency_events=r.median_latency_events,
            nudges=len(r.nudges),
            blind=f"blind on {r.blind_calls:,} of {r.calls_total:,} calls" if r.blind_calls else "",
        )
        for r in run.results
    ]
    per_incident = []
    for inc in incidents:
        hits = [
            (r.policy, s["latency_events"], s["waste_prevented_usd"])
            for r in run.results
            for s in r.stopped
            if s["incident_id"] == inc.incident_id
        ]
        if inc.severity in ("medium", "high"):
            per_incident.append(
                IncidentGuards(inc.rank, inc.detector, inc.wasted_usd,
                               sorted(hits, key=lambda h: (-h[2], h[1], h[0])))
            )  # fmt: skip
    sweep = {
        name: [(float(r.params["stop"]), r.waste_prevented_usd, r.false_trips, r.harm_usd)
               for r in results]
        for name, results in run.sweeps.items()
    }  # fmt: skip
    return Guards(rows, per_incident, sweep)


def build_report(
    store: Store, top_incidents: int = DEFAULT_TOP_INCIDENTS, top: int = 10,
    summary: Summary | None = None, charts_on: bool = True, guards: GuardRun | None = None,
) -> Report:  # fmt: skip
    """Everything the report shows, from the store."""
    summary = summary or build_summary(store, top=top)
    unpriced = summary.calls_by_basis.get("unpriced", 0)
    severities = {s: 0 for s in reversed(SEVERITIES)}
    for inc in summary.incidents:
        severities[inc.severity] = severities.get(inc.severity, 0) + 1
    days = (
        (summary.period_end - summary.period_start).total_seconds() / 86400
        if summary.period_start and summary.period_end
        else 0.0
    )
    total = float(summary.total_usd)
    wasted = float(summary.wasted_usd)
    headline = Headline(
        period_start=iso_seconds(summary.period_start),
        period_end=iso_seconds(summary.period_end),
        days=round(days, 1),
        calls=summary.calls,
        total_usd=total,
        wasted_usd=wasted,
        wasted_share=(wasted / total) if total else 0.0,
        incidents=len(summary.incidents),
        incidents_by_severity=severities,
        calls_by_cost_basis=summary.calls_by_basis,
        usd_by_cost_basis={k: float(v) for k, v in summary.usd_by_basis.items()},
        unpriced_calls=unpriced,
        calls_without_time=summary.calls_without_time,
        unpriced_models=summary.unpriced_models,
    )
    daily = store.con.execute(
        """WITH spend AS (SELECT ts::DATE AS d, sum(cost_usd) AS usd FROM live_calls
                          WHERE ts IS NOT NULL GROUP BY 1),
                waste AS (SELECT start_ts::DATE AS d, sum(wasted_usd) AS usd FROM incidents
                          WHERE start_ts IS NOT NULL GROUP BY 1)
           SELECT d, coalesce(s.usd, 0), coalesce(w.usd, 0)
           FROM spend s FULL JOIN waste w USING (d) ORDER BY d"""
    ).fetchall()
    day_rows = [(d.isoformat(), _f(s), _f(w)) for d, s, w in daily]
    by_detector = [
        Breakdown(_clean(str(n)), 0, 0.0, _f(w), int(k))
        for n, w, k in store.con.execute(
            """SELECT detector, sum(wasted_usd), count(*) FROM incidents
               GROUP BY 1 ORDER BY 2 DESC, 3 DESC, 1"""
        ).fetchall()
    ]
    incidents = [
        IncidentRow(
            rank=i.number if i.number is not None else r,  # its id: `show N` takes it
            incident_id=_clean(i.incident_id),
            detector=_clean(i.detector),
            severity=i.severity,
            start_ts=iso_seconds(i.start_ts),
            end_ts=iso_seconds(i.end_ts),
            stream_key=_clean(i.stream_key),
            session_id=_clean(i.session_id),
            n_calls=i.n_calls,
            wasted_usd=float(i.wasted_usd),
            cost_basis=i.cost_basis,
            summary=_clean(i.summary),
            first_call_id=_clean(i.first_call_id),
            last_call_id=_clean(i.last_call_id),
        )
        for r, i in enumerate(summary.incidents, 1)
    ]
    sections = []
    shown = summary.incidents[:top_incidents]
    calls_of = incidents_calls(store, shown)
    for row, inc in zip(incidents[:top_incidents], shown, strict=True):
        calls, omitted = _call_rows(calls_of[inc.incident_id])
        ids = {c.call_id: c.provider_id for c in calls}
        row.first_provider_id = ids.get(row.first_call_id or "")
        row.last_provider_id = ids.get(row.last_call_id or "")
        sections.append(IncidentSection(row, calls, omitted, _evidence(inc.evidence)))
    sources = [
        SourceRow(
            _clean(s["path"]),
            s["format"],
            int(s["bytes"]),
            int(s["rows_read"]),
            int(s["rows_loaded"]),
            int(s["rows_rejected"]),
            int(s["rows_duplicate"]),
            int(s["rows_skipped"]),
        )
        for s in summary.sources
    ]
    rejects = [
        RejectRow(_clean(p), line, _clean(reason), _clean(ex) if ex else None)
        for p, line, reason, ex in store.con.execute(
            """SELECT s.path, r.line, r.reason, r.excerpt FROM rejects r
               JOIN sources s USING (source_id) ORDER BY s.source_id, r.line LIMIT ?""",
            [MAX_REJECTS_SHOWN],
        ).fetchall()
    ]
    report = Report(
        title="LLM spend and runaway-loop incident report",
        version=__version__,
        headline=headline,
        days=day_rows,
        by_detector=by_detector,
        by_model=_breakdown(store, "model", top),
        by_app=_breakdown(store, "app", top),
        by_key=_breakdown(store, "api_key", top),
        incidents=incidents,
        sections=sections,
        sources=sources,
        rejects=rejects,
        rejects_total=summary.rejects,
        reconciliation=summary.reconciliation,
    )
    if guards is not None:
        report.guards = _guards(guards, incidents)
    if charts_on:
        _draw(store, report)
    return report


def _draw(store: Store, report: Report) -> None:
    if report.days:
        report.charts["daily"] = charts.daily_spend(
            [date.fromisoformat(d) for d, _, _ in report.days],
            [s for _, s, _ in report.days],
            [w for _, _, w in report.days],
        )
    wasted = [b for b in report.by_detector if b.wasted_usd > 0]
    if wasted:
        report.charts["by_detector"] = charts.waste_by(
            [b.name for b in wasted], [b.wasted_usd for b in wasted], "Wasted USD by detector"
        )
    by_model = [b for b in report.by_model if b.wasted_usd > 0]
    if by_model:
        report.charts["by_model"] = charts.waste_by(
            [b.name for b in by_model], [b.wasted_usd for b in by_model], "Wasted USD by model"
        )
    if report.guards is not None:
        own = {g.policy: g.stop for g in report.guards.rows}
        series = []
        for name, points in sorted(report.guards.sweep.items()):
            if not any(prevented > 0 for _, prevented, _, _ in points):
                continue  # a guard that stops nothing at any threshold adds nothing to see
            stops = [p[0] for p in points]
            series.append(
                (name, [p[3] for p in points], [p[1] for p in points],
                 stops.index(own[name]) if own.get(name) in stops else None)
            )  # fmt: skip
        if series:
            report.charts["guard_sweep"] = charts.guard_sweep(series)
    for section in report.sections:
        if section.calls:
            section.chart_svg = charts.incident_tokens(
                [c.prompt_tokens for c in section.calls], [c.output_tokens for c in section.calls]
            )
