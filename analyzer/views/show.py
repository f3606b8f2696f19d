"""One incident, told on a terminal (``llm-forensics show ID``): what happened in plain words,
its calls (time, model, tokens, dollars, finish, tool and what went in and came back), the
evidence, and the guards that would have stopped it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, ClassVar

from analyzer.console import severity, strong
from analyzer.detect.detectors import Detector, load_incidents
from analyzer.engine.store import Store
from analyzer.errors import ForensicsError
from analyzer.guards.backtest import GuardRun, Stop, Stopping
from analyzer.model.formatting import cut, money, printable, tokens, wrap
from analyzer.model.incident import Incident, labels_said
from analyzer.model.records import JsonForm, json_record, str_or_none
from analyzer.model.timewindow import local
from analyzer.views.incident_calls import incidents_calls
from analyzer.views.lineage import Parent, parents
from analyzer.views.verdicts import Verdict, verdicts
from analyzer.views.view import How, View

MAX_CALLS = 40  # an incident of more calls shows its first and last 20


@dataclass
class ShownCall:
    # In JSON its dollars are exact text.
    JSON_FORM: ClassVar[JsonForm] = JsonForm(convert={"cost_usd": str_or_none})

    ts: datetime | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: Decimal | None
    finish: str | None
    kind: str | None
    tool: str | None
    said: str | None  # the tool's arguments, or the reply's text
    got: str | None  # what the tool returned
    wasted: bool
    saved: bool | None  # the agent kept the reply in its conversation


@dataclass
class Shown(View):
    """One incident as ``show`` tells it (its text), or as JSON: the incident, its calls,
    the guards that stop it and its parent session."""

    name = "show"
    incident: Incident
    calls: list[ShownCall]
    calls_left_out: int
    detector: Detector | None
    guards: Stopping = field(default_factory=Stopping)  # the replay's (``GuardRun.stops``)
    run: Verdict | None = None  # how the incident's run ended, where its log says
    parent: Parent | None = None  # the session its session was forked from, or a sub-agent of

    @property
    def stopped_by(self) -> list[Stop]:
        return self.guards.stopped_by

    def text(self, how: How) -> str:
        return render(self, how.tz, how.width)

    def json(self) -> dict[str, Any]:
        return {
            **self.incident.to_json(),
            "calls": [json_record(c) for c in self.calls],
            "stopped_by": [s.to_json() for s in self.stopped_by],
            "parent": self.parent.to_json() if self.parent else None,
        }


def find(store: Store, ident: str) -> Incident:
    """The incident a user named: by its number (``7`` or ``#7``) or its id (or a unique
    prefix of it)."""
    incidents = load_incidents(store)
    text = ident.strip().lstrip("#")
    if text.isdigit():
        hit = [i for i in incidents if i.number == int(text)]
    else:
        hit = [i for i in incidents if i.incident_id == text]
        hit = hit or [i for i in incidents if i.incident_id.startswith(text)]
    if len(hit) == 1:
        return hit[0]
    if not incidents:
        raise ForensicsError("no incidents in the store (run `llm-forensics detect` or `audit`)")
    if len(hit) > 1:
        raise ForensicsError(f"{ident!r} names {len(hit)} incidents; give more of the id")
    numbers = sorted(i.number for i in incidents if i.number is not None)
    span = f" (numbers {numbers[0]} to {numbers[-1]})" if numbers else ""
    raise ForensicsError(f"no incident {ident!r}{span}: `llm-forensics incidents` lists them")


def gather(
    store: Store, inc: Incident, detectors: list[Detector], guards: GuardRun | None
) -> Shown:
    """Everything ``show`` prints about ``inc``."""
    ids = [row[1] for row in incidents_calls(store, [inc])[inc.incident_id]]
    left_out = 0
    if len(ids) > MAX_CALLS:
        left_out = len(ids) - MAX_CALLS
        ids = ids[: MAX_CALLS // 2] + ids[-MAX_CALLS // 2 :]
    rows = store.engine.rows("views/shown_calls.sql", {"ids": ids, "iid": inc.incident_id})
    calls = [ShownCall(*r) for r in rows]
    runs = verdicts(store, [inc.session_id]) if inc.session_id else {}
    links = parents(store, [inc.session_id]) if inc.session_id else {}
    return Shown(
        incident=inc,
        calls=calls,
        calls_left_out=left_out,
        detector=next((d for d in detectors if d.name == inc.detector), None),
        guards=guards.stops(inc.incident_id) if guards else Stopping(),
        run=runs.get(inc.session_id or ""),
        parent=links.get(inc.session_id or ""),
    )


def _plain(det: Detector | None) -> str:
    """The first two sentences of the detector's explanation (why this is waste)."""
    if det is None:
        return ""
    text = re.sub(r"\s+", " ", det.reasoning).strip()
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)
    return " ".join(sentences[:2])


def _span(inc: Incident, tz: str) -> str:
    if inc.start_ts is None:
        return "no time in the log"
    start = local(inc.start_ts, tz)
    text = f"{start:%Y-%m-%d %H:%M:%S}"
    if inc.end_ts is not None and inc.end_ts != inc.start_ts:
        end = local(inc.end_ts, tz)
        secs = (inc.end_ts - inc.start_ts).total_seconds()
        text += f" to {end:%H:%M:%S}" if end.date() == start.date() else f" to {end:%F %T}"
        text += f" {tz} ({secs:,.0f} s)"
    else:
        text += f" {tz}"
    return text


def render(s: Shown, tz: str = "UTC", width: int = 100) -> str:
    inc = s.incident
    out = [
        f"Incident #{inc.number}  {severity(inc.severity, inc.severity)}  {inc.detector}  "
        + strong(f"{money(inc.wasted_usd)} wasted")
        + (f" ({inc.cost_basis})" if inc.cost_basis and inc.wasted_usd else "")
    ]
    out += wrap(printable(inc.summary), width, "  ")
    out.append("")
    out.append("What happened")
    if s.detector is not None:
        out += wrap(f"{s.detector.title}. {_plain(s.detector)}", width, "  ")
    out.append(f"  when     {_span(inc, tz)}")
    for name, value in (
        ("app", inc.app),
        ("project", inc.project),
        ("API key", inc.api_key),
        ("model", inc.model),
        ("machine", inc.machine),
        ("labels", labels_said(inc.labels)),
    ):
        if value:
            out.append(f"  {name:<8} {cut(printable(value), width - 11)}")
    if inc.session_id:
        out.append(f"  session  {cut(printable(inc.session_id), width - 11)}")
    if s.parent is not None:
        out.append(f"  parent   {cut(printable(s.parent.describe()), width - 11)}")
    if s.run is not None:
        lines = wrap(printable(s.run.describe()), width, " " * 11)
        out += ["  run      " + lines[0].lstrip(), *lines[1:]]
    out.append(f"  id       {inc.incident_id}")
    out.append("")
    out += _calls(s, tz, width)
    if inc.evidence:
        out.append("")
        out.append("Evidence")
        for key, value in inc.evidence.items():
            if isinstance(value, str) and value.isdigit():
                text = _json(int(value))
            else:
                text = value if isinstance(value, str) else _json(value)
            out += wrap(f"{printable(key)}: {printable(text)}", width, "  ")
    out.append("")
    out += _guards(s, width)
    return "\n".join(out) + "\n"


def _json(value: Any) -> str:
    import json

    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.10g}"
    return json.dumps(value, default=str)


def _calls(s: Shown, tz: str, width: int) -> list[str]:
    n = len(s.calls) + s.calls_left_out
    out = [f"Calls ({n:,}; * = counted as waste)"]
    if not s.calls:
        return [*out, "  (none of its calls is in view)"]
    # One model for every call (the usual case) is said once, above, and leaves the room to
    # what each call did.
    models = {c.model for c in s.calls}
    mw = 0 if len(models) == 1 else max(5, min(30, max(len(c.model or "–") for c in s.calls)))
    col = f"{'model':<{mw}} " if mw else ""
    head = f"  {'time':<8} {col}{'in':>9} {'out':>7} {'$':>7} {'finish':<10} "
    out.append(cut(head + "tool / what it said -> what came back", width))
    room = max(10, width - len(head))
    for i, c in enumerate(s.calls):
        if s.calls_left_out and i == len(s.calls) // 2:
            out.append(f"  ... {s.calls_left_out:,} calls left out ...")
        when = f"{local(c.ts, tz):%H:%M:%S}" if c.ts else "–"
        model = f"{cut(printable(c.model or '–'), mw):<{mw}} " if mw else ""
        finish = cut(c.finish or c.kind or "–", 10)
        cost = (
            "–"
            if c.cost_usd is None
            else f"{c.cost_usd:.4f}"
            if c.cost_usd < 1
            else money(c.cost_usd)
        )
        what = ""
        if c.tool:
            # The tool, its arguments and what came back, the arguments cut to leave the result
            # room (the result is what tells a loop: the same answer again).
            back = "" if c.got is None else " -> " + (_oneline(c.got) or "(empty)")
            back = cut(back, max(12, room // 2)) if back else ""
            what = printable(c.tool)
            if c.said:
                what += " " + cut(_oneline(c.said), max(4, room - len(what) - 1 - len(back)))
            what += back
        elif c.said:
            what = _oneline(c.said)
        elif c.kind in ("empty", "thinking_only", "whitespace"):
            what = f"({c.kind.replace('_', '-')})"
        elif c.saved is False:
            what = "(reply not saved in the log)"
        mark = "*" if c.wasted else " "
        out.append(
            f"{mark} {when:<8} {model}{tokens(c.input_tokens):>9} "
            f"{tokens(c.output_tokens):>7} {cost:>7} {finish:<10} {cut(what, room)}"
        )
    return out


def _oneline(text: str) -> str:
    return re.sub(r"\s+", " ", printable(text.replace("\n", " "))).strip()


def _none_stops(inc: Incident) -> str:
    """Why no guard stops the incident, promising nothing a command would not then say: an
    incident that wasted nothing has nothing to prevent; else no guard at its own threshold
    stops it in time, and a sweep (not ``--recommend``, which weighs every incident at once
    and may name a guard that misses this one) replays a guard at other thresholds."""
    if inc.wasted_usd <= 0:
        return "none: it wasted nothing, so there is nothing for a guard to prevent"
    return (
        "none of the guards replayed at their own thresholds stops it in time; "
        "`llm-forensics backtest --sweep POLICY.stop=LO..HI` replays one at other thresholds "
        "(`llm-forensics policies` lists them)"
    )


def _guards(s: Shown, width: int) -> list[str]:
    out = ["Guards that would have stopped it"]
    if not s.stopped_by:
        out += wrap(_none_stops(s.incident), width, "  ")
    for g in s.stopped_by:
        text = (
            f"{g.policy}: after {g.latency_events:,} of its events "
            f"({g.latency_seconds:,.0f} s, {money(g.latency_usd)} wasted first), "
            f"prevents {money(g.waste_prevented_usd)}"
        )
        out += wrap(text, width, "  ")
    if s.guards.tripped_only:
        out += wrap(
            "tripped too late to prevent anything: " + ", ".join(s.guards.tripped_only),
            width,
            "  ",
        )
    return out
