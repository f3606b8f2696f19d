"""Terminal views of the store: usage tables, the incident list and the rejects, each fitted to
the terminal's width (cut or wrapped, never wider), numbers with thousands separators, names
from logs made printable. Colour is added with click's styles and dropped off a terminal."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from analyzer.console import severity, strong
from analyzer.engine.store import Store
from analyzer.model.formatting import cut, money, printable, wrap
from analyzer.model.incident import Incident
from analyzer.model.projects import tail
from analyzer.model.timewindow import local
from analyzer.views.table import Column, Table, csv_text
from analyzer.views.text_table import TextColumn, TextTable, lay_out
from analyzer.views.usage import BASES, TOKENS, Usage, UsageRow, placeholder_text
from analyzer.views.view import How, Rows, View

_UUID = re.compile(r"\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")

# -- usage ----------------------------------------------------------------------------------

_HEADS = {
    "daily": "date",
    "weekly": "week of",
    "monthly": "month",
    "session": "session",
    "project": "project",
    "model": "model",
}


class UsageView(View):
    """A usage view (``usage daily`` and the others): its table on a terminal with the lines
    the command puts ``before`` and ``after`` it (the window, a note on bills), the same
    figures as JSON and as CSV."""

    name = "usage"

    def __init__(self, u: Usage, before: list[str] | None = None, after: list[str] | None = None):
        self.usage = u
        self.before = before or []
        self.after = after or []

    def text(self, how: How) -> str:
        body = render_usage(self.usage, how.width)
        return (
            "".join(f"{line}\n" for line in self.before)
            + body
            + "".join(f"{line}\n" for line in self.after)
        )

    def json(self) -> dict[str, Any]:
        return self.usage.to_json()

    def table(self) -> Table:
        return usage_table(self.usage)


def render_usage(u: Usage, width: int = 100) -> str:
    """A usage view as a table with a totals row, each row's models in a column or, with a
    breakdown, below it. On a narrow terminal the models are named short (``opus-4-6``), then
    the least needed columns give way (never calls or dollars), then the key column is cut."""
    rows, said = _usage_rows(u)
    parts = {id(part) for found in u.breakdown.values() for part in found}
    for short in (False, True):
        # (a breakdown by model names them on lines of their own: no column of them too)
        models = None if u.by_model else _models_column(u, parts, short)
        columns = _usage_columns(u, models)
        table = TextTable(_HEADS[u.view], columns, rows, ("Total", u.total), said, squeeze=30)
        laid = lay_out(table, width)
        if not laid.left_out:
            break
    lines, dropped = laid.lines, laid.left_out
    for n in filter(None, _usage_notes(u, width, dropped, bool(said))):
        lines += wrap(n, width)
    return "\n".join(lines) + "\n"


_MODEL_DATE = re.compile(r"-\d{8}$")


def short_model(name: str) -> str:
    """A model's name as ccusage shortens it for a narrow table: no ``claude-``, no date.

    >>> short_model("claude-sonnet-4-5-20250929"), short_model("gpt-5-codex")
    ('sonnet-4-5', 'gpt-5-codex')
    """
    return _MODEL_DATE.sub("", name.removeprefix("claude-"))


def _models_column(u: Usage, parts: set[int], short: bool) -> TextColumn:
    """The column of each row's models (a breakdown's line and the totals: blank), named
    whole or ``short``."""

    def named(r: UsageRow) -> str:
        if r is u.total or id(r) in parts:
            return ""
        return ", ".join(printable(short_model(m) if short else m) for m in r.models)

    w = max([len(named(r)) for r in u.rows] + [len("models")])
    w = min(w, 20 if short else 40)
    return TextColumn("models", w, lambda r: cut(named(r), w), 5)  # after the cache columns


def _usage_columns(u: Usage, models: TextColumn | None = None) -> list[TextColumn]:
    """The columns a usage view shows (the lowest ``keep`` gives way first)."""
    bases = u.bases()
    cols = [
        TextColumn("calls", 7, lambda r: f"{r.calls:,}"),
        TextColumn("input", 11, lambda r: f"{r.input:,}", 6),
        TextColumn("cache write", 11, lambda r: f"{r.cache_write:,}", 4),
        TextColumn("cache read", 13, lambda r: f"{r.cache_read:,}", 4),
        TextColumn("output", 11, lambda r: f"{r.output:,}", 7),
        TextColumn("reasoning", 11, lambda r: f"{r.reasoning:,}", 2),
        TextColumn("total", 13, lambda r: f"{r.total_tokens:,}", 3),
        TextColumn("$", 10, lambda r: money(r.total_usd)),
    ]
    if models is not None:  # after the calls, as ccusage shows them (never trailing blanks)
        cols.insert(1, models)
    if not u.total.reasoning:  # no output was reasoning (or none was logged as such)
        cols = [c for c in cols if c.heading != "reasoning"]
    if len(bases) > 1:
        cols += [TextColumn(f"$ {b}", max(11, len(b) + 2), _basis(b), 1) for b in bases]
    if u.total.unpriced_calls:
        cols.append(TextColumn("unpriced", 8, lambda r: f"{r.unpriced_calls:,}", 8))
    if u.view == "session":
        cols.append(TextColumn("last activity", 16, lambda r: _last(u, r), 6))
    if any(r.run is not None for r in u.rows):
        cols.append(TextColumn("ended", 13, lambda r: _ended(r), 8))
    return cols


def _usage_rows(u: Usage) -> tuple[list[tuple[str, UsageRow]], dict[int, str]]:
    """The lines of a usage table (a key as shown, and its row; a breakdown's models below
    their row), and the parent of a session in words, by the index of its line."""
    rows: list[tuple[str, UsageRow]] = []
    said: dict[int, str] = {}  # a session's parent, in words, on a line of its own below it
    for r in u.rows:
        key = printable(r.key)
        if u.view == "project" and r.project_short is not None:
            key = tail(printable(r.project_short), 30)
        if u.view == "session":
            key = _UUID.sub(lambda m: m.group(1) + "…", key)
            if r.project:
                key = f"{key}  {tail(printable(r.project_short or r.project), 24)}"
            if r.parent is not None:
                said[len(rows)] = "  ↳ " + printable(r.parent.describe())
        rows.append((key, r))
        rows += [("  └ " + printable(part.key), part) for part in u.breakdown.get(r.key, [])]
    return rows, said


def _usage_notes(u: Usage, width: int, dropped: list[str], parents: bool) -> list[str]:
    """The notes under a usage table (empty ones are not printed)."""
    notes = [f"days in {u.tz}" if u.view in ("daily", "weekly", "monthly") else ""]
    if u.untimed_files:
        named = ", ".join(u.untimed_files[:3]) + (
            f" and {len(u.untimed_files) - 3:,} more" if len(u.untimed_files) > 3 else ""
        )
        notes.append(f"(no time): calls whose log has no times, never given one ({named})")
    gone = [r for r in u.rows if r.gone_calls]
    if gone:
        shown = ", ".join(f"{printable(r.key)} ({r.gone_calls:,})" for r in gone[:5])
        more = f" and {len(gone) - 5:,} more" if len(gone) > 5 else ""
        notes.append(
            f"from files no longer on disk: {u.total.gone_calls:,} calls, in {shown}{more} "
            "(deleted since they were read, by the agent or by hand; the store kept them)"
        )
    if dropped:
        notes.append(
            f"left out to fit {width} columns: {', '.join(dropped)} (--json or --csv "
            "has every column)"
        )
    if u.total.unpriced_calls:
        notes.append(
            "unpriced: calls with no cost (no known price, no tokens in the log, or a "
            "bill's row stating no charge), counted as $0"
        )
    if u.total.placeholder_calls:
        notes.append("estimated_output: " + placeholder_text(u.total))
    if u.view == "session":
        notes.append(
            "session ids shortened (--json or --csv has them whole), then the project (as "
            "told apart from the others); last activity: the session's latest call"
        )
        if not u.sub_agents and any(r.sub_agents for r in u.rows):
            n = sum(r.sub_agents for r in u.rows)
            notes.append(
                f"{n:,} sub-agent{'s' if n != 1 else ''}' calls counted in the session that "
                "started them (--sub-agents: a row each)"
            )
    elif u.view == "project":
        notes.append("projects named short, as told apart (--json has `project` whole)")
    if parents:
        notes.append(
            "↳ the session a fork was made from (the history it copied is counted "
            "there, once), or the one that started a sub-agent, whole"
        )
    if any(r.run is not None for r in u.rows):
        notes.append(
            "ended: how the run ended, in its own log's words (--json has its exit "
            "status, result and stated totals); - where the log says nothing"
        )
    unstated = [r.run for r in u.rows if r.run and r.run.estimated_usd]
    if unstated:
        one = len(unstated) == 1
        usd = sum((v.estimated_usd or Decimal(0) for v in unstated), Decimal(0))
        cut = " (cut off: no verdict)" if all(v.outcome is None for v in unstated) else ""
        notes.append(
            f"{len(unstated):,} {'run' if one else 'runs'} with no cost stated{cut}: "
            f"{'its' if one else 'their'} calls at list prices, {money(usd)}, not a figure "
            "of the agent's own"
        )
    notes.append(
        "input: fresh prompt tokens (cache reads and writes apart); output includes reasoning"
    )
    return notes


def _last(u: Usage, r: UsageRow) -> str:
    """A session's last call (a breakdown's line: of that model), in the view's zone."""
    if r is u.total or r.last_ts is None:
        return ""
    return f"{local(r.last_ts, u.tz):%Y-%m-%d %H:%M}"


def _ended(r: UsageRow) -> str:
    """A session's outcome for the usage table (Total: blank)."""
    if r.run is None:
        return "" if r.key == "Total" else "-"
    return r.run.outcome or "no verdict"


def _basis(b: str) -> Callable[[UsageRow], str]:
    return lambda r: money(r.usd[b]) if b in r.usd else "–"


def usage_table(u: Usage) -> Table:
    """A usage view as a table (what ``--csv`` writes): one row per key, its models below it
    (the JSON's ``modelBreakdowns``, a row each, ``model`` named; with ``--breakdown`` on a
    store of several machines, a row per machine and model; with ``--by``, a row per value
    of the label, ``label`` named), then the totals row. Today's
    columns first (every cost basis in its own), then every other field of the JSON's rows,
    nested ones named ``outer.inner`` and lists joined by ``;``."""
    ended = u.view == "session"  # how each run ended (its outcome), where its log says
    columns = [
        Column(u.view),
        Column("model"),
        Column("machine"),
        *([Column("label")] if u.by_label else []),
        Column("calls", "int", "calls"),
        *(Column(t, "int", "tokens") for t in TOKENS),
        Column("usd", "usd", "USD"),
        *(Column(f"usd_{b}", "usd", "USD") for b in BASES),
        Column("unpriced_calls", "int", "calls"),
        Column("first", "time", "UTC"),
        Column("last", "time", "UTC"),
    ]
    if ended:
        columns += [Column(n) for n in ("ended", "exit_status")]
        columns += [Column(n) for n in ("parent_session_id", "parent_relation")]

    def row(key: str, part: UsageRow | None, r: UsageRow) -> list[Any]:
        run = [r.run.outcome, r.run.exit_status] if r.run else ["", ""]
        run += [r.parent.session_id, r.parent.relation] if r.parent else ["", ""]
        split = u.by_machine or u.by_label  # a part is a machine's or a label value's
        model = part.models[0] if part and (u.by_model or not split) and part.models else ""
        machine = part.machines[0] if part and u.by_machine and part.machines else ""
        label = [(part.key.split(" · ")[0] if part else "")] if u.by_label else []
        return [
            key,
            model,
            machine,
            *label,
            r.calls,
            *(getattr(r, t) for t in TOKENS),
            r.total_usd,
            *(r.usd.get(b, Decimal(0)) for b in BASES),
            r.unpriced_calls,
            r.first_ts,
            r.last_ts,
        ] + (run if ended else [])

    lines: list[tuple[list[Any], dict[str, Any]]] = []
    for r in u.rows:
        lines.append((row(r.key, None, r), flat_json(u.row_json(r))))
        parts = u.breakdown.get(r.key) if u.by_machine or u.by_label else u.models.get(r.key)
        if parts is None or u.view == "model":  # (a model's one model is itself)
            parts = u.breakdown.get(r.key, [])
        lines += [(row(r.key, p, p), flat_json(u.part_json(p))) for p in parts]
    lines.append((row("Total", None, u.total), flat_json(u.to_json()["totals"])))
    named = {c.name for c in columns}
    more: dict[str, Column] = {}
    for _, flat in lines:
        for name, value in flat.items():
            if name not in named and name not in more:
                more[name] = Column(name, _column_type(value))
    table = Table(columns + list(more.values()))
    for cells, flat in lines:
        table.rows.append(cells + [flat.get(name) for name in more])
    return table


def flat_json(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A JSON row as CSV cells: a nested object's fields as ``outer.inner``, a list of
    values joined by ``;`` (the rows' ``breakdown`` and ``modelBreakdowns``: rows of their
    own, left out here)."""
    out: dict[str, Any] = {}
    for name, value in record.items():
        if name in ("breakdown", "modelBreakdowns"):
            continue
        if isinstance(value, dict):
            out.update(flat_json(value, f"{prefix}{name}."))
        elif isinstance(value, list):
            out[prefix + name] = ";".join(str(v) for v in value)
        else:
            out[prefix + name] = value
    return out


def _column_type(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "text"
    if isinstance(value, int):
        return "int"
    return "usd" if isinstance(value, Decimal) else "text"


def usage_csv(u: Usage) -> str:
    """A usage view as CSV (``usage_table``)."""
    return csv_text(usage_table(u))


# -- incidents ------------------------------------------------------------------------------


def waste_line(wasted: Decimal, spend: Decimal, incidents: list[Incident]) -> str:
    """What the incidents wasted, in words that do not contradict their count: the dollars
    first when there are any (and how many of the incidents wasted them), else that none of
    them wasted money, and what kind of findings they are. The audit's ``Wasted`` line."""
    n = len(incidents)
    if not n:
        return "nothing: no incident found"
    wasting = sum(1 for i in incidents if i.wasted_usd > 0)
    if wasted > 0:
        share = float(wasted / spend) if spend else 0.0
        of = f"{wasting:,} of {n:,}" if wasting < n else f"{n:,}"
        return f"{strong(money(wasted))} ({share:.1%}) in {of} incident{'s' if n > 1 else ''}"
    kinds: dict[str, int] = {}
    for i in incidents:
        kinds[i.detector] = kinds.get(i.detector, 0) + 1
    named = ", ".join(f"{k:,} {d}" for d, k in sorted(kinds.items(), key=lambda x: -x[1]))
    one = n == 1
    return (
        f"none found: {n:,} incident{'' if one else 's'} ({named}), no call in "
        f"{'it' if one else 'them'} counted as waste (findings to look at, not money lost)"
    )


def incident_head(i: Incident, tz: str) -> str:
    """The first line of an incident in a list: number, severity, waste, time, detector."""
    when = f"{local(i.start_ts, tz):%Y-%m-%d %H:%M}" if i.start_ts else "(no time)".ljust(16)
    number = f"#{i.number}" if i.number is not None else "#?"
    return (
        f"{number:>4} {severity(f'{i.severity:<6}', i.severity)} "
        f"{_wasted(i.wasted_usd)}  {when}  {i.detector}"
    )


def _wasted(usd: Decimal) -> str:
    """An incident's waste in the list: bold when it wasted money, plain $0.00 when not."""
    text = f"{money(usd):>9}"
    return strong(text) if usd > 0 else text


def render_incident_list(
    incidents: list[Incident],
    tz: str = "UTC",
    width: int = 100,
    limit: int | None = 25,
    total: Decimal | None = None,
) -> str:
    """Incidents, most wasted dollars first: a line of who/when/what, then the summary
    wrapped below it, after whose calls it is (``Incident.place``). ``total``: what they
    wasted, each call once (``detectors.wasted_once``); else their dollars added up."""
    if not incidents:
        return "No incidents.\n"
    if total is None:
        total = sum((i.wasted_usd for i in incidents), Decimal(0))
    how = f"times in {tz}; `llm-forensics show N` for one"
    if total > 0:
        head = f"Incidents ({len(incidents)}, {strong(money(total))} wasted), most wasted first"
        out = [f"{head} ({how})"]
    else:  # findings all the same (an outlier, an empty stream), none of them priced as waste
        out = [f"Incidents ({len(incidents)}; none of them wasted money; {how})"]
    shown = incidents if limit is None else incidents[:limit]
    for i in shown:
        out.append(incident_head(i, tz))
        label = f"[{place}] " if (place := i.place()) else ""
        out += wrap(label + printable(i.summary), width, " " * 5)
    if len(incidents) > len(shown):
        out.append(
            f"  ... and {len(incidents) - len(shown)} more (`llm-forensics incidents` "
            "lists them all)"
        )
    return "\n".join(out) + "\n"


class IncidentsView(View):
    """The incidents, most wasted first: a list on a terminal, a table in CSV and Parquet."""

    name = "incidents"

    def __init__(
        self, incidents: list[Incident], limit: int | None = None, total: Decimal | None = None
    ) -> None:
        self.incidents = incidents
        self.limit = limit  # how many the terminal list shows
        self.total = total  # what they wasted, each call once (else added up)

    def text(self, how: How) -> str:
        return render_incident_list(
            self.incidents, how.tz, how.width, limit=self.limit, total=self.total
        )

    def json(self) -> list[dict[str, Any]]:
        return [i.to_json() for i in self.incidents]

    def table(self) -> Table:
        return incident_table(self.incidents)


def incidents_csv(incidents: list[Incident]) -> str:
    """The incident table as CSV (what ``-o incidents.csv`` writes)."""
    return csv_text(incident_table(incidents))


INCIDENT_COLUMNS = [
    Column("number", "int"),
    Column("incident_id"),
    Column("detector"),
    Column("severity"),
    Column("wasted_usd", "usd", "USD"),
    Column("wasted_tokens", "int", "tokens"),
    Column("n_calls", "int", "calls"),
    Column("start_ts", "time", "UTC"),
    Column("end_ts", "time", "UTC"),
    Column("app"),
    Column("api_key"),
    Column("model"),
    Column("project"),
    Column("machine"),
    Column("session_id"),
    Column("stream_key"),
    Column("cost_basis"),
    Column("summary"),
]


def incident_table(incidents: list[Incident]) -> Table:
    """One flat row per incident (the CSV and Parquet columns)."""
    return Table(
        list(INCIDENT_COLUMNS),
        [[getattr(i, c.name) for c in INCIDENT_COLUMNS] for i in incidents],
        heading_if_empty=False,  # no incident: an empty file
    )


# -- rejects --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reject:
    """An input record that could not be loaded: its file, line, why, and an excerpt."""

    file: str
    line: int | None
    reason: str
    excerpt: str | None


class RejectsView(Rows):
    """The rejected records (``rejects``): file:line: reason and excerpt, or JSON."""

    name = "rejects"
    rows: list[Reject]

    def layout(self, width: int) -> str:
        return render_rejects(self.rows, width)


def render_rejects(rows: list[Reject], width: int = 100) -> str:
    """``file:line: reason`` and the excerpt indented below, a reject each."""
    if not rows:
        return "No rejected records.\n"
    out = []
    for r in rows:
        where_ = f"{printable(r.file)}:{r.line}" if r.line is not None else printable(r.file)
        out += wrap(f"{where_}: {printable(r.reason)}", width)
        if r.excerpt:
            out.append("    " + cut(printable(r.excerpt).replace("\n", " "), width - 4))
    return "\n".join(out) + "\n"


def rejects(store: Store, file: str | None = None) -> list[Reject]:
    """The rejected records (of the files whose path contains ``file``), in file and line
    order."""
    only = "WHERE s.path LIKE '%' || $f || '%'" if file else ""
    return [
        Reject(str(p), None if line is None else int(line), str(reason), excerpt)
        for p, line, reason, excerpt in store.engine.rows(
            "views/rejects.sql", {"f": file}, only=only
        )
    ]
