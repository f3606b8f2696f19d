"""The guard replay as a view (``backtest``, and the guards of ``audit``): its table of
figures, the notes under it, and ``--recommend``'s answer."""

from __future__ import annotations

import re
from typing import Any

from analyzer.guards.recommend import Budget, Recommendation
from analyzer.guards.scoring import Result
from analyzer.model.formatting import money, wrap
from analyzer.views.text_table import TextColumn, TextTable, lay_out
from analyzer.views.view import How, Rows, View


def _g(x: float | None) -> str:
    """A guard's value for a table: ``–``, ``3``, ``3.29``, ``1,250``."""
    if x is None:
        return "–"
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.2f}" if abs(x) < 1000 else f"{x:,.0f}"


class BacktestView(Rows):
    """The guard replay (``backtest``): a table of its figures, or every result as JSON."""

    name = "backtest"
    rows: list[Result]

    def layout(self, width: int) -> str:
        return render_backtest(self.rows, width)


class RecommendView(View):
    """``backtest --recommend``: the policy and threshold that prevent the most waste within
    the budget (a TOML table to copy), or why there is none."""

    name = "recommend"

    def __init__(
        self, rec: Recommendation | None, budget: Budget, weighed: int, within: int
    ) -> None:
        self.rec, self.budget, self.weighed, self.within = rec, budget, weighed, within

    def text(self, how: How) -> str:
        if self.rec is not None:
            return self.rec.render(how.width)
        return "\n".join(wrap(self.reason(), how.width)) + "\n"

    def reason(self) -> str:
        """Why there is no recommendation, in one sentence (the terminal's, and ``reason`` in
        JSON)."""
        return (
            f"No guard would have saved money on this history: none of the {self.weighed:,} "
            f"policy and threshold pairs weighed ({self.within:,} of them within the budget, "
            f"{self.budget.describe()}) prevents waste worth at least a cent more than the "
            "work it would kill."
        )

    def json(self) -> dict[str, Any]:
        if self.rec is not None:
            return {"recommendation": self.rec.policy.name, **self.rec.to_json()}
        return {
            "recommendation": None,
            "reason": self.reason(),
            "policy": None,
            "budget": self.budget.describe(),
            "variants_weighed": self.weighed,
            "variants_within_budget": self.within,
        }


def render_backtest(results: list[Result], width: int = 100) -> str:
    """The guard replay as a table, one policy (or swept value) a line, with what a team needs
    to pick a threshold: what it stopped of its targets, the waste it prevented and missed,
    and apart from that the harm it did (never summed into one "saved" figure), the net, and
    how close healthy work came to tripping it (headroom). Fitted to ``width``."""
    if not results:
        return "No policies.\n"
    sweep = len({r.policy for r in results}) < len(results)
    if not sweep and not any(r.incidents_total for r in results):
        return _no_targets(results, width)
    single = len({r.policy for r in results}) == 1
    names = []
    for r in results:
        name = r.policy
        if sweep and any(x.policy == r.policy for x in results if x is not r):
            suffix = f"stop={r.params['stop']:g}"
            name = suffix if single else f"{r.policy} {suffix}"
        names.append(name)
    rows = list(zip(names, results, strict=True))
    table = TextTable("policy", _backtest_columns(), rows, key_min=12)
    laid = lay_out(table, width)
    out = [f"{results[0].policy}, its stop threshold swept"] if sweep and single else []
    out += laid.lines
    if laid.left_out:
        out += wrap(
            f"left out to fit {width} columns: {', '.join(laid.left_out)} (a wider "
            "terminal, or --json, shows them)",
            width,
        )
    out += _backtest_notes(results, width, sweep)
    return "\n".join(out) + "\n"


def _backtest_columns() -> list[TextColumn]:
    """The columns after the policy's name; on a narrow terminal latency gives way first,
    then headroom, then missed."""
    return [
        TextColumn("stopped", 7, lambda r: f"{r.incidents_stopped}/{r.incidents_total}"),
        TextColumn("prevented", 10, lambda r: money(r.waste_prevented_usd)),
        TextColumn("missed", 9, lambda r: money(r.waste_missed_usd), 3),
        TextColumn("false", 6, lambda r: f"{r.false_trips:,}"),
        TextColumn("false $", 9, lambda r: money(r.usd_false_trips)),
        TextColumn("harm", 9, lambda r: money(r.harm_usd)),
        TextColumn("net", 9, lambda r: money(r.net_usd)),
        TextColumn("headroom", 8, lambda r: _g(r.headroom), 2),
        TextColumn("latency", 7, lambda r: _g(r.median_latency_events), 1),
    ]


def _backtest_notes(results: list[Result], width: int, sweep: bool) -> list[str]:
    """The notes under the replay's table: nudges, blindness, per-session figures, too few
    targets, and what each column means."""
    out: list[str] = []
    by_policy = list({x.policy: x for x in results}.values())
    nudging = [r.policy for r in by_policy if r.nudges]
    if nudging:
        out += wrap(f"nudges (listed apart, never assumed to work): {', '.join(nudging)}", width)
    blind: dict[tuple[int, int], list[str]] = {}
    for r in by_policy:
        if r.blind_calls:
            blind.setdefault((r.blind_calls, r.calls_total), []).append(r.policy)
    for (n, total), policies in blind.items():
        out += wrap(
            f"blind on {n:,} of {total:,} calls (the data lacks their signal there: the reply's "
            f"kind, text or tools, what the agent answered, or the tools' arguments or results "
            f"the log leaves out; left out of their figures): "
            f"{', '.join(policies)}",
            width,
        )
    per_session: dict[str, list[str]] = {}
    for r in by_policy:
        if r.per_session:
            per_session.setdefault(r.per_session, []).append(r.policy)
    for note, policies in per_session.items():
        out += wrap(f"{note}: {', '.join(policies)}", width)
    judged = max((r.incidents_total for r in results), default=0)
    if sweep and judged < 5:
        out.append(f"judged on {judged} target incident(s): too few to read as proof")
    out += wrap(
        "stopped: of the policy's target incidents with wasted calls (medium and high "
        "severity; info pointers are not counted; incidents sharing wasted calls count once), "
        "how many a stop cut short. prevented / missed: their waste after the stop / left. "
        "false: stops that prevented nothing; false $: the work they killed. harm: false $ "
        "plus productive work that true stops killed and outputs a failing stop threw away. "
        "net = prevented - harm. headroom: the highest value the guard reached on healthy "
        "work. latency: median of the guard's own events from an incident's start to the trip.",
        width,
    )
    return out


def _no_targets(results: list[Result], width: int) -> str:
    """The guards where there is no incident to stop: one line of what they would still have
    done (stopped healthy work), not a table of zeros."""
    false = sorted((r for r in results if r.false_trips), key=lambda r: -r.false_trips)
    text = f"No incident with waste for the {len(results)} guards to stop"
    if not false:
        return "\n".join(wrap(text + ", and none would have stopped healthy work.", width)) + "\n"
    out = wrap(text + "; these would have stopped healthy work (false trips):", width)
    for r in false:
        lines = wrap(guard_words(r.policy, r.description), width, " " * 7)
        out += [f"{r.false_trips:>5,}  {lines[0][7:]}", *lines[1:]]
    return "\n".join(out) + "\n"


def guard_words(name: str, description: str) -> str:
    """A guard in plain words, its name after them (for those who would use it): what its
    description says it does, without whose fix it was or the asides in brackets. "a reply
    with no action tags completes the turn (penguin_no_action_completion)". A policy with no
    description is its name."""
    text = description.split(". ")[0]
    if ": " in text:  # "Netclaw's fix: ..." - whose guard it was, before what it does
        text = text.split(": ", 1)[1]
    text = re.sub(r"\s*\([^()]*\)", "", text).strip().rstrip(".")
    return f"{text} ({name})" if text else name
