"""Which charts the page draws, chosen by what the data has: spend over time (by day, or by
week or month over a long period), waste by detector and model, each incident's tokens (or,
for calls that carry none, their HTTP statuses and stream events), and the guards' trade-off
between waste prevented and false trips."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

from analyzer.report import charts
from analyzer.report.model import IncidentSection, Report

DAYS_AS_DAYS = 92  # a longer period is drawn by week (bars a day wide would be hairs)
DAYS_AS_WEEKS = 2 * 366  # and a longer one still by month


def draw(report: Report) -> None:
    """Draw the report's charts into it (``report.charts`` and each section's)."""
    if report.days:
        unit, days, spend, wasted = _periods(report.days)
        report.charts["daily"] = charts.daily_spend(days, spend, wasted, unit)
        report.charts["daily_unit"] = unit
    titles = {i.detector: i.title for i in report.incidents if i.title}
    wasted_by = [b for b in report.by_detector if b.wasted_usd > 0]
    if wasted_by:
        report.charts["by_detector"] = charts.waste_by(
            [titles.get(b.name, b.name) for b in wasted_by],
            [b.wasted_usd for b in wasted_by],
            "Wasted USD by detector",
        )
    by_model = [b for b in report.by_model if b.wasted_usd > 0]
    if by_model:
        report.charts["by_model"] = charts.waste_by(
            [b.name for b in by_model],
            [b.wasted_usd for b in by_model],
            "Wasted USD by model",
        )
    g = report.guards
    if g is not None and any(p[1] > 0 for pts in g.sweep.values() for p in pts):
        points = [(name, p[0], p[2], p[1]) for name, pts in sorted(g.sweep.items()) for p in pts]
        chosen = g.recommended
        if chosen is None:  # no threshold without a false trip: show the one preventing most
            best = max(points, key=lambda p: (p[3], -p[2]))
            chosen = (best[0], best[1])
        sweep = [(p[0], p[1], p[3]) for p in g.sweep.get(chosen[0], [])]
        report.charts["guard_sweep"] = charts.guard_tradeoff(points, g.recommended, sweep)
    for section in report.sections:
        _incident_chart(section)


def _incident_chart(section: IncidentSection) -> None:
    calls = section.calls
    if not calls:
        return
    if any(c.prompt_tokens or c.output_tokens for c in calls):
        section.chart_svg = charts.incident_tokens(
            [c.prompt_tokens for c in calls], [c.output_tokens for c in calls]
        )
        section.chart_label = "Prompt and output tokens per call"
    elif any(c.http_status is not None or c.event_count is not None for c in calls):
        section.chart_svg = charts.call_timeline(
            [c.http_status for c in calls],
            [c.event_count for c in calls],
            [c.content_chars for c in calls],
        )
        section.chart_label = "Each call's HTTP status and stream events"


def _periods(
    rows: list[tuple[str, Decimal, Decimal]],
) -> tuple[str, list[date], list[float], list[float]]:
    """Spend and waste per day, or summed per week (from Monday) or month when the period is
    long (summed exactly; floats only for drawing)."""
    days = [date.fromisoformat(d) for d, _, _ in rows]
    span = (days[-1] - days[0]).days + 1
    if span <= DAYS_AS_DAYS:
        return "day", days, [float(s) for _, s, _ in rows], [float(w) for _, _, w in rows]
    unit = "week" if span <= DAYS_AS_WEEKS else "month"
    sums: dict[date, list[Decimal]] = {}
    for d, (_, s, w) in zip(days, rows, strict=True):
        key = d - timedelta(days=d.weekday()) if unit == "week" else d.replace(day=1)
        acc = sums.setdefault(key, [Decimal(0), Decimal(0)])
        acc[0] += s
        acc[1] += w
    keys = sorted(sums)
    return unit, keys, [float(sums[k][0]) for k in keys], [float(sums[k][1]) for k in keys]
