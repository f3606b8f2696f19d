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

from datetime import datetime
from decimal import Decimal
from typing import Any

from analyzer import __version__
from analyzer.detect.detectors import detectors_run, discover
from analyzer.detect.reconcile import BillRow, Unit, bill_totals, bills
from analyzer.engine.store import Store
from analyzer.guards.backtest import GuardRun
from analyzer.guards.recommend import Budget, best
from analyzer.guards.scoring import Result
from analyzer.model.formatting import SEVERITIES, iso_seconds, label, mask_keys, shown
from analyzer.model.incident import Incident
from analyzer.model.projects import short_names
from analyzer.report.figures import draw
from analyzer.report.model import (
    Breakdown,
    BucketBill,
    BucketBills,
    BucketUnit,
    CallRow,
    GuardRow,
    Guards,
    Headline,
    IncidentGuards,
    IncidentRow,
    IncidentSection,
    ProjectSpend,
    RejectRow,
    RunRow,
    Runs,
    SessionSpend,
    SourceRow,
    Spend,
)
from analyzer.report.model import (
    Report as Report,  # re-exported: pages takes it from here
)
from analyzer.views.audit import Summary, build_summary
from analyzer.views.bill_views import (
    bucket_label,
    explained_line,
    model_label,
    provider_name,
    remainder_lines,
)
from analyzer.views.incident_calls import incidents_calls
from analyzer.views.usage import placeholder_text
from analyzer.views.verdicts import verdicts

DEFAULT_TOP_INCIDENTS = 20
MAX_CALLS_SHOWN = 60  # per incident section: the first and last 30 calls
MAX_REJECTS_SHOWN = 20
MAX_RUNS_SHOWN = 20  # runs that did not complete, listed on the page
MAX_BUCKETS_SHOWN = 100  # bills per bucket and their units, listed (the totals are of all)
TOP_PROJECTS = 10  # projects by spend, listed (the rest summed in one line)
TOP_SESSIONS = 15  # sessions by spend, listed (the rest summed in one line)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return mask_keys(value)
    return value


def _d(x: Decimal | None) -> Decimal:
    return Decimal(x or 0)


def _breakdown(store: Store, column: str, top: int) -> list[Breakdown]:
    """Spend by ``column`` (``model``, ``app``, ``api_key``), with the waste of the incidents
    attributed to each value (the one each incident names: ``sql/attribute.sql``)."""
    rows = store.engine.rows("report/breakdown.sql", {"top": top}, column=column)
    return [Breakdown(_clean(str(n)), int(c), _d(u), _d(w), int(k)) for n, c, u, w, k in rows]


def _labels(store: Store, top: int) -> list[Breakdown]:
    """Spend by label and value (``calls.labels``; a call counts under each of its labels),
    with the waste of the incidents whose labels name it."""
    rows = store.engine.rows("report/breakdown_labels.sql", {"top": top})
    return [Breakdown(_clean(str(n)), int(c), _d(u), _d(w), int(k)) for n, c, u, w, k in rows]


def _share(usd: Decimal, total: Decimal) -> float:
    return float(usd / total) if total else 0.0


def duration(first: datetime | None, last: datetime | None) -> str:
    """From a session's first call to its last, in words: ``45 s``, ``12 min``, ``3 h 05 min``,
    ``2 d 4 h``; "" without both times."""
    if first is None or last is None:
        return ""
    seconds = int((last - first).total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def _spend(store: Store, total: Decimal) -> Spend | None:
    """Spend by project and by session (``sql/report/projects.sql``, ``sessions.sql``: the
    figures of ``usage project`` and ``usage session``), the top of each and the rest summed;
    project names as a person tells them apart, over every name the page shows."""
    projects = store.engine.rows("report/projects.sql", {"top": TOP_PROJECTS})
    sessions = store.engine.rows("report/sessions.sql", {"top": TOP_SESSIONS})
    if not projects:
        return None
    names = [str(r[0]) for r in projects if r[0] is not None]
    names += [str(r[2]) for r in sessions if r[2] is not None]
    short = short_names(names)
    return Spend(
        projects=[
            ProjectSpend(
                name=None if name is None else _clean(str(name)),
                short=_clean(short[str(name)]) if name is not None else "",
                count=int(count),
                calls=int(calls),
                tokens=int(tokens),
                usd=_d(usd),
                wasted_usd=_d(wasted),
                incidents=int(n),
                share=_share(_d(usd), total),
            )
            for name, count, calls, tokens, usd, wasted, n in projects
        ],
        projects_total=sum(int(r[1]) for r in projects),
        sessions=[
            SessionSpend(
                session_id=None if key is None else _clean(str(key)),
                project=None if project is None else _clean(str(project)),
                project_short=_clean(short[str(project)]) if project is not None else "",
                count=int(count),
                first_ts=iso_seconds(first),
                last_ts=iso_seconds(last),
                duration=duration(first, last) if key is not None else "",
                calls=int(calls),
                tokens=int(tokens),
                usd=_d(usd),
                wasted_usd=_d(wasted),
                incidents=int(n),
                models=[_clean(str(m)) for m in models or []],
                share=_share(_d(usd), total),
            )
            for key, count, project, first, last, calls, tokens, usd, wasted, n, models in sessions
        ],
        sessions_total=sum(int(r[1]) for r in sessions),
        total_usd=total,
    )


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
            cost,
            basis,
            status,
            events,
            chars,
        )
        for ts, cid, pid, pt, ot, fr, rk, cost, basis, status, events, chars in rows
    ]
    if len(calls) <= MAX_CALLS_SHOWN:
        return calls, 0
    half = MAX_CALLS_SHOWN // 2
    return calls[:half] + calls[-half:], len(calls) - MAX_CALLS_SHOWN


def _evidence(data: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The evidence as labelled rows in words: ``prompt tokens: 56,065``."""
    return [(_clean(label(str(k))), _clean(shown(v))) for k, v in (data or {}).items()]


def _bases(calls: list[CallRow], own: str | None) -> str:
    """The cost bases of an incident's calls, said when they are not all the incident's."""
    found = sorted({c.cost_basis or "unpriced" for c in calls})
    return "" if found == [own] else ", ".join(found)


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
            per_session=r.per_session or "",
        )
        for r in run.results
    ]
    per_incident = [
        IncidentGuards(
            inc.rank,
            inc.detector,
            inc.wasted_usd,
            [
                (s.policy, s.latency_events, s.waste_prevented_usd)
                for s in run.stops(inc.incident_id).stopped_by
            ],
        )
        for inc in incidents
        if inc.severity in ("medium", "high")
    ]
    variants = run.variants()
    sweep: dict[str, list[tuple[float, float, int, float]]] = {}
    for name, stop, r in variants:
        sweep.setdefault(name, []).append(
            (stop, float(r.waste_prevented_usd), r.false_trips, float(r.harm_usd))
        )
    # The recommendation: the rule of ``backtest --recommend``, with its default budget.
    chosen = best(variants, Budget())
    if chosen is not None:
        return Guards(rows, per_incident, sweep, chosen[:2], chosen[2].net_usd)
    return Guards(rows, per_incident, sweep, no_saving=_no_saving([r for _, _, r in variants]))


def no_saving_reason(prevented: list[tuple[Decimal, int, Decimal]]) -> str:
    """Why no guard saves money, from each replayed threshold's (waste prevented, false trips,
    net): none reaches the waste, or every one that does trips on healthy work too or costs
    more than it saves ("" when one saves money without a false trip)."""
    reaching = [(p, f, n) for p, f, n in prevented if p > 0]
    if not reaching:
        return "no guard, at any threshold replayed, stops a wasted call before it is made"
    if any(f == 0 and n > 0 for _, f, n in reaching):
        return ""
    if all(f > 0 for _, f, _n in reaching):
        return "every guard that stops the waste also trips on healthy work (false trips)"
    return (
        "every guard that stops the waste either trips on healthy work too (false trips) or "
        "kills more healthy work than the waste it prevents"
    )


def _no_saving(results: list[Result]) -> str:
    return no_saving_reason([(r.waste_prevented_usd, r.false_trips, r.net_usd) for r in results])


def _runs(store: Store, by_outcome: dict[str, int]) -> Runs | None:
    """How the runs ended: counts by outcome, and the runs that did not complete."""
    if not by_outcome:
        return None
    rows = [
        RunRow(
            session_id=_clean(v.session_id),
            agent=v.agent,
            outcome=v.outcome,
            exit_status=_clean(v.exit_status),
            calls=v.calls,
            stated_usd=v.reported_cost_usd,
            said=_clean(v.describe()),
        )
        for v in verdicts(store).values()
        if v.outcome != "completed"
    ]
    return Runs(sum(by_outcome.values()), by_outcome, rows[:MAX_RUNS_SHOWN], len(rows))


def _bucket_names(x: BillRow | Unit) -> tuple[str, str, str]:
    """A bucketed bill's bucket, provider and model as the page names them."""
    return (
        bucket_label(x.start, x.end),
        _clean(provider_name(x.provider)),
        _clean(model_label(x.model)),
    )


def _bucket_bills(store: Store, summary: Summary) -> BucketBills | None:
    """The providers' bills per bucket (``usage bills``'s rows) and their reconciliation with
    the logs (the units and totals of the audit summary, which ``usage reconcile`` shows)."""
    t = summary.bucket_bills
    if t is None:
        return None
    rows = bills(store)
    found = summary.bucket_units
    said = remainder_lines(found)
    return BucketBills(
        bills=[BucketBill(*_bucket_names(r), r) for r in rows[:MAX_BUCKETS_SHOWN]],
        bills_total=len(rows),
        bill_totals=bill_totals(rows),
        units=[BucketUnit(*_bucket_names(u), u) for u in found[:MAX_BUCKETS_SHOWN]],
        units_total=len(found),
        totals=t,
        explained=explained_line(t),
        remainder=[_clean(x) for x in said[:MAX_BUCKETS_SHOWN]],
        remainder_total=len(said),
    )


def build_report(
    store: Store,
    top_incidents: int = DEFAULT_TOP_INCIDENTS,
    top: int = 10,
    summary: Summary | None = None,
    charts_on: bool = True,
    guards: GuardRun | None = None,
) -> Report:
    """Everything the report shows, from the store."""
    summary = summary or build_summary(store, top=top)
    titles = {d.name: d.title for d in discover()}
    headline = _headline(store, summary, titles)
    daily = store.engine.rows("report/daily.sql")
    day_rows = [(d.isoformat(), _d(s), _d(w)) for d, s, w in daily]
    by_detector = [
        Breakdown(_clean(str(n)), 0, Decimal(0), _d(w), int(k))
        for n, w, k in store.engine.rows("report/by_detector.sql")
    ]
    incidents = _incident_rows(store, summary.incidents, titles)
    report = Report(
        title="LLM spend and runaway-loop incident report",
        version=__version__,
        headline=headline,
        days=day_rows,
        by_detector=by_detector,
        by_model=_breakdown(store, "model", top),
        by_app=_breakdown(store, "app", top),
        by_key=_breakdown(store, "api_key", top),
        by_label=_labels(store, top),
        incidents=incidents,
        sections=_sections(store, summary.incidents, incidents, top_incidents),
        sources=_sources(summary),
        rejects=[
            RejectRow(_clean(p), line, _clean(reason), _clean(ex) if ex else None)
            for p, line, reason, ex in store.engine.rows(
                "report/rejects.sql", {"top": MAX_REJECTS_SHOWN}
            )
        ],
        rejects_total=summary.rejects,
        reconciliation=summary.reconciliation,
    )
    if guards is not None:
        report.guards = _guards(guards, incidents)
    report.runs = _runs(store, summary.runs_by_outcome)
    report.spend = _spend(store, headline.total_usd)
    report.bucket_bills = _bucket_bills(store, summary)
    if charts_on:
        draw(report)
    return report


def _headline(store: Store, summary: Summary, titles: dict[str, str]) -> Headline:
    """The page's headline figures: those of ``audit``'s summary, and the detectors run."""
    severities = {s: 0 for s in reversed(SEVERITIES)}
    for inc in summary.incidents:
        severities[inc.severity] = severities.get(inc.severity, 0) + 1
    days = (
        (summary.period_end - summary.period_start).total_seconds() / 86400
        if summary.period_start and summary.period_end
        else 0.0
    )
    total, wasted = summary.total_usd, summary.wasted_usd
    headline = Headline(
        period_start=iso_seconds(summary.period_start),
        period_end=iso_seconds(summary.period_end),
        days=round(days, 1),
        calls=summary.calls,
        total_usd=total,
        wasted_usd=wasted,
        wasted_share=float(wasted / total) if total else 0.0,
        incidents=len(summary.incidents),
        incidents_by_severity=severities,
        calls_by_cost_basis=summary.calls_by_basis,
        usd_by_cost_basis=dict(summary.usd_by_basis),
        unpriced_calls=summary.calls_by_basis.get("unpriced", 0),
        calls_without_time=summary.calls_without_time,
        unpriced_models=summary.unpriced_models,
        sessions=int(store.scalar("SELECT count(DISTINCT session_id) FROM live_calls")),
    )
    if summary.figures and summary.figures.placeholder_calls:
        headline.placeholder_note = placeholder_text(summary.figures)
        headline.placeholder_output = summary.figures.placeholder_json()
    headline.checked = [(n, titles.get(n, n)) for n in detectors_run(store)]
    return headline


def _incident_rows(
    store: Store, found: list[Incident], titles: dict[str, str]
) -> list[IncidentRow]:
    """A row of the incident table each, with how its run ended where its log says."""
    ran = verdicts(store, [i.session_id for i in found if i.session_id])
    return [
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
            wasted_usd=i.wasted_usd,
            cost_basis=i.cost_basis,
            summary=_clean(i.summary),
            first_call_id=_clean(i.first_call_id),
            last_call_id=_clean(i.last_call_id),
            title=titles.get(i.detector, ""),
            where=_clean(i.place()),
            run=_clean(ran[i.session_id].describe()) if i.session_id in ran else "",
        )
        for r, i in enumerate(found, 1)
    ]


def _sections(
    store: Store, found: list[Incident], rows: list[IncidentRow], top_incidents: int
) -> list[IncidentSection]:
    """The first ``top_incidents`` incidents' sections: their calls and evidence (their rows
    learn the provider's ids of their first and last calls)."""
    sections = []
    shown = found[:top_incidents]
    calls_of = incidents_calls(store, shown)
    for row, inc in zip(rows[:top_incidents], shown, strict=True):
        calls, omitted = _call_rows(calls_of[inc.incident_id])
        ids = {c.call_id: c.provider_id for c in calls}
        row.first_provider_id = ids.get(row.first_call_id or "")
        row.last_provider_id = ids.get(row.last_call_id or "")
        sections.append(
            IncidentSection(
                row, calls, omitted, _evidence(inc.evidence), bases=_bases(calls, inc.cost_basis)
            )
        )
    return sections


def _sources(summary: Summary) -> list[SourceRow]:
    return [
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
