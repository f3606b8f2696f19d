"""Usage views: tokens, calls and dollars per day, week, month, session, project or model (the
tables a ccusage user knows), over the calls the store holds, every call once.

Tokens follow ccusage's columns: ``input`` is the fresh prompt (neither read from nor written to
the cache), ``cache write`` and ``cache read`` the cached parts, ``output`` the reply (reasoning
included; ``reasoning`` says how much of it). Dollars are kept apart by cost basis (billed,
reported by the agent's log, apportioned from a run's stated cost, estimated from list prices,
or estimated at an estimate of output the log records only as a streaming placeholder), and
calls with no cost (no known price, no tokens in the log, or a bill's row stating no charge) are
counted as unpriced, never as free.

These are the figures of every view: ``audit``, the report and the usage views read the same
aggregate (``usage`` per group, ``totals`` for the whole store), so a count or a sum is the
same wherever it is shown.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from analyzer.engine.store import Store
from analyzer.errors import ForensicsError
from analyzer.model.formatting import money
from analyzer.model.projects import short_names
from analyzer.views.lineage import Parent, parents
from analyzer.views.verdicts import Verdict, verdicts

PERIODS = ("daily", "weekly", "monthly")  # the views of calls by time
VIEWS = (*PERIODS, "session", "project", "model")  # the views of calls (``usage``)
ORDERS = ("cost", "recent", "time")  # most dollars first, latest first, oldest first
BASES = ("billed", "reported", "apportioned", "estimated", "estimated_output")
TOKENS = ("input", "cache_write", "cache_read", "output", "reasoning", "total_tokens")

_LOCAL = "timezone($tz, timezone('UTC', ts))"  # a stored (naive UTC) time, in the zone shown
_KEYS = {
    "daily": f"strftime({_LOCAL}, '%Y-%m-%d')",
    "weekly": f"strftime(date_trunc('week', {_LOCAL}), '%Y-%m-%d')",  # ISO: from Monday
    "monthly": f"strftime({_LOCAL}, '%Y-%m')",
    "session": "coalesce(session_id, stream_key)",
    # A session with its sub-agents' calls in it (a sub-agent's calls name their agent and the
    # session that started it): ccusage's session, and what a person counts as one run.
    "folded": "CASE WHEN agent_id IS NOT NULL AND parent_session_id IS NOT NULL "
    "THEN parent_session_id ELSE coalesce(session_id, stream_key) END",
    "project": "coalesce(project, app, '(none)')",
    "model": "coalesce(model, '(no model)') || CASE WHEN variant = 'fast' THEN ' (fast)' "
    "ELSE '' END",
}
_UNKNOWN_TIME = "(no time)"
_MACHINE = "coalesce(machine, '(unknown)')"
# What a breakdown splits each row by: its models (--breakdown), its machines (a store holding
# several), or both.
_PARTS = {
    (True, False): _KEYS["model"],
    (False, True): _MACHINE,
    (True, True): f"{_MACHINE} || ' · ' || {_KEYS['model']}",
}
# A breakdown by one of the calls' labels (``--by NAME``: ``calls.labels``, read by its JSON
# Pointer, the parameter ``by``; ``by_name`` names it), with the models too (``--breakdown``).
_LABEL = "$by_name || '=' || coalesce(json_extract_string(labels, $by), '(none)')"
_LABEL_PARTS = {False: _LABEL, True: f"{_LABEL} || ' · ' || {_KEYS['model']}"}


@dataclass
class UsageRow:
    """One line of a usage view (or of its breakdown by model)."""

    key: str
    calls: int = 0
    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0
    reasoning: int = 0
    usd: dict[str, Decimal] = field(default_factory=dict)  # by cost basis
    unpriced_calls: int = 0  # calls with no cost, whatever the reason
    # Calls whose output count is a streaming placeholder (Claude Code before 2.1.97): their
    # logged output, the output estimated from what they wrote, their dollars at the logged
    # counts (as ccusage counts them), and how many estimates are lower bounds.
    placeholder_calls: int = 0
    placeholder_output: int = 0
    placeholder_estimate: int = 0
    placeholder_logged_usd: Decimal = Decimal(0)
    placeholder_usd: Decimal = Decimal(0)  # the same calls at the estimate (in ``usd``)
    placeholder_floors: int = 0
    calls_by_basis: dict[str, int] = field(default_factory=dict)  # 'unpriced': no cost
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    models: list[str] = field(default_factory=list)
    machines: list[str] = field(default_factory=list)  # whose logs hold its calls
    gone_calls: int = 0  # its calls read from files no longer on disk (the store kept them)
    project: str | None = None  # the session view's project
    project_short: str | None = None  # ... as told apart from the others shown (short_names)
    sub_agents: int = 0  # the session view's: sub-agent sessions whose calls it counts
    run: Verdict | None = None  # the session view's: how the run ended, where its log says
    parent: Parent | None = None  # the session view's: forked from, or a sub-agent of

    def placeholder_json(self) -> dict[str, Any]:
        """What placeholder output counts do to this row's figures."""
        return {
            "calls": self.placeholder_calls,
            "output_tokens_logged": self.placeholder_output,
            "output_tokens_estimated": self.placeholder_estimate,
            "usd_at_logged_output": self.placeholder_logged_usd,
            "usd_at_estimated_output": self.placeholder_usd,
            "lower_bound_calls": self.placeholder_floors,
        }

    @property
    def total_tokens(self) -> int:
        return self.input + self.cache_write + self.cache_read + self.output

    @property
    def total_usd(self) -> Decimal:
        return sum(self.usd.values(), Decimal(0))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "calls": self.calls}
        out.update({t: getattr(self, t) for t in TOKENS})
        out["usd"] = self.total_usd  # exact: written as a number with all its digits
        out.update({f"usd_{b}": Decimal(self.usd.get(b, 0)) for b in BASES})
        out["unpriced_calls"] = self.unpriced_calls
        out["calls_by_cost_basis"] = self.calls_by_basis
        out["placeholder_output"] = self.placeholder_json()
        out["first"] = self.first_ts.isoformat() if self.first_ts else None
        out["last"] = self.last_ts.isoformat() if self.last_ts else None
        out["models"] = self.models
        out["machines"] = self.machines
        out["calls_from_deleted_files"] = self.gone_calls
        if self.project is not None:
            out["project"] = self.project
        if self.run is not None:
            out["run"] = self.run.to_json()
        if self.parent is not None:
            out["parent"] = self.parent.to_json()
        return out


@dataclass
class Usage:
    """A usage view: its rows, their totals, and (with a breakdown) each row's models."""

    view: str
    tz: str
    rows: list[UsageRow]
    total: UsageRow
    breakdown: dict[str, list[UsageRow]] = field(default_factory=dict)
    # A period view's calls without a time: the files they come from (their logs keep none).
    untimed_files: list[str] = field(default_factory=list)
    by_model: bool = False  # the breakdown splits rows by model
    by_machine: bool = False  # ... by machine (the store holds several)
    by_label: str | None = None  # ... by the value of this label of the calls (``--by``)
    # Each row's models (what ``modelBreakdowns`` of the JSON lists), when asked for.
    models: dict[str, list[UsageRow]] = field(default_factory=dict)
    sub_agents: bool = True  # a session view shows sub-agents as rows of their own

    def bases(self) -> list[str]:
        """The cost bases present (in a fixed order)."""
        return [b for b in BASES if b in self.total.usd]

    def row_json(self, r: UsageRow) -> dict[str, Any]:
        """A row as JSON: ccusage's fields (``period``, the four token counts, ``totalCost``,
        ``modelsUsed``, ``modelBreakdowns``, ``metadata``), then ours."""
        out: dict[str, Any] = {"period": r.key} if self.view in (*PERIODS, "session") else {}
        out.update(ccusage_tokens(r))
        out["modelsUsed"] = r.models
        if r.key in self.models:
            out["modelBreakdowns"] = [
                {"modelName": m.key, **ccusage_tokens(m, total=False), "cost": m.total_usd}
                for m in self.models[r.key]
            ]
        if self.view == "session":
            out["metadata"] = {"lastActivity": ccusage_time(r.last_ts)}
            out["lastActivity"] = ccusage_time(r.last_ts)
        out.update(r.to_json())
        if r.project_short is not None:
            out["project_short"] = r.project_short
        if self.view == "session" and not self.sub_agents:
            out["sub_agents"] = r.sub_agents
        if r.key in self.breakdown:
            out["breakdown"] = [b.to_json() for b in self.breakdown[r.key]]
        return out

    def part_json(self, part: UsageRow) -> dict[str, Any]:
        """A row's model (or machine) as JSON: ccusage's token fields, then ours."""
        return {**ccusage_tokens(part), "modelsUsed": part.models, **part.to_json()}

    def to_json(self) -> dict[str, Any]:
        """ccusage 20's shape (the rows under the view's name, ``daily`` and the others, and
        ``totals``), every field of ours beside ccusage's."""
        out: dict[str, Any] = {"view": self.view, "tz": self.tz}
        if self.by_label is not None:
            out["by"] = self.by_label  # each row's breakdown is by this label's value
        out[self.view] = [self.row_json(r) for r in self.rows]
        out["totals"] = {**ccusage_tokens(self.total), **self.total.to_json()}
        return out


def ccusage_tokens(r: UsageRow, total: bool = True) -> dict[str, Any]:
    """A row's token counts (and dollars) under ccusage's names."""
    out: dict[str, Any] = {
        "inputTokens": r.input,
        "outputTokens": r.output,
        "cacheCreationTokens": r.cache_write,
        "cacheReadTokens": r.cache_read,
    }
    if total:
        out["totalTokens"] = r.total_tokens
        out["totalCost"] = r.total_usd
    return out


def ccusage_time(ts: datetime | None) -> str | None:
    """A stored (naive UTC) time as ccusage writes one: ``2026-02-11T22:54:29.802Z``."""
    if ts is None:
        return None
    return f"{ts:%Y-%m-%dT%H:%M:%S}.{ts.microsecond // 1000:03d}Z"


def _select(store: Store, key: str, params: dict[str, str], part: str = "NULL") -> list[Any]:
    """The rows of ``sql/views/usage.sql`` grouped by ``key`` (and by ``part``, an
    expression of :data:`_PARTS`, for a breakdown)."""
    return store.engine.rows("views/usage.sql", params, key=key, part=part, model=_KEYS["model"])


def _row(r: tuple[Any, ...], key: str) -> UsageRow:
    (
        _,
        _,
        calls,
        inp,
        cw,
        cr,
        out,
        reasoning,
        *usd_by_basis,
        unpriced,
        by_basis,
        ph_calls,
        ph_output,
        ph_est,
        ph_logged,
        ph_usd,
        ph_floors,
        first,
        last,
        models,
        project,
        machines,
    ) = r
    usd = {b: Decimal(v) for b, v in zip(BASES, usd_by_basis, strict=True) if v is not None}
    return UsageRow(
        key=key,
        calls=int(calls),
        input=int(inp),
        cache_write=int(cw),
        cache_read=int(cr),
        output=int(out),
        reasoning=int(reasoning),
        usd=usd,
        unpriced_calls=int(unpriced),
        calls_by_basis={str(b): int(n) for b, n in sorted(by_basis.items())},
        placeholder_calls=int(ph_calls),
        placeholder_output=int(ph_output),
        placeholder_estimate=int(ph_est),
        placeholder_logged_usd=Decimal(ph_logged),
        placeholder_usd=Decimal(ph_usd),
        placeholder_floors=int(ph_floors),
        first_ts=first,
        last_ts=last,
        models=[str(m) for m in models or []],
        machines=[str(m) for m in machines or []],
        project=None if project is None else str(project),
    )


def _add(into: UsageRow, r: UsageRow) -> None:
    for name in (
        "calls",
        "input",
        "cache_write",
        "cache_read",
        "output",
        "reasoning",
        "unpriced_calls",
        "placeholder_calls",
        "placeholder_output",
        "placeholder_estimate",
        "placeholder_logged_usd",
        "placeholder_usd",
        "placeholder_floors",
        "gone_calls",
    ):
        setattr(into, name, getattr(into, name) + getattr(r, name))
    for b, v in r.usd.items():
        into.usd[b] = into.usd.get(b, Decimal(0)) + v
    for b, n in r.calls_by_basis.items():
        into.calls_by_basis[b] = into.calls_by_basis.get(b, 0) + n
    if r.first_ts is not None and (into.first_ts is None or r.first_ts < into.first_ts):
        into.first_ts = r.first_ts
    if r.last_ts is not None and (into.last_ts is None or r.last_ts > into.last_ts):
        into.last_ts = r.last_ts
    into.models = sorted(set(into.models) | set(r.models))
    into.machines = sorted(set(into.machines) | set(r.machines))


def totals(store: Store) -> UsageRow:
    """The whole store's figures (every call once): what ``audit`` and the report count."""
    found = _select(store, "'all'", {})
    row = _row(found[0], "Total") if found else UsageRow(key="Total")
    row.project = None
    return row


def default_order(view: str) -> str:
    """How a view's rows are ordered unless asked: a period in time order, a session (as
    ccusage lists them), a project or a model most dollars first."""
    return "time" if view in PERIODS else "cost"


def usage(
    store: Store,
    view: str,
    tz: str = "UTC",
    breakdown: bool = False,
    *,
    order: str | None = None,
    sub_agents: bool = False,
    models: bool = False,
    by: str | None = None,
) -> Usage:
    """The ``view`` (one of :data:`VIEWS`), times bucketed in ``tz``; with ``breakdown``,
    each row's models too, and when the store holds several machines' calls, each row's
    machines; with ``models``, each row's models for the JSON (``modelBreakdowns``). Rows in
    ``order`` (one of :data:`ORDERS`; default: :func:`default_order`). A session counts its
    sub-agents' calls unless ``sub_agents`` (then they are rows of their own). Each row says
    how many of its calls come from files no longer on disk. With ``by``, the name of a
    label of the calls (``calls.labels``: ``team.id``, ``user.email``), each row is broken
    down by that label's value instead of by machine (``team.id=(none)``: calls without it),
    and by model too with ``breakdown``."""
    if view not in VIEWS:
        raise ValueError(f"unknown usage view {view!r}")
    order = order or default_order(view)
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}")
    grouped = "folded" if view == "session" and not sub_agents else view
    # (Stored times are UTC: shown in UTC, they need no conversion, which costs a third of
    # the view's time on a big store.)
    key = _KEYS[grouped].replace(_LOCAL, "ts") if tz == "UTC" else _KEYS[grouped]
    params = {"tz": tz}
    rows = [_row(r, str(r[0])) for r in _select(store, key, params)]
    untimed: list[str] = []
    if view in PERIODS:
        rows.sort(key=lambda r: (r.key == _UNKNOWN_TIME, r.key))
        if rows and rows[-1].key == _UNKNOWN_TIME:
            untimed = [str(p) for (p,) in store.engine.rows("views/untimed_files.sql")]
    elif view == "session":
        _with_runs(store, rows, folded=not sub_agents)
    else:
        rows.sort(key=lambda r: (-r.total_usd, -r.total_tokens, r.key))
    _order(rows, view, order)
    _count_gone(store, key, params, rows)
    if view not in ("session", "project"):
        for r in rows:
            r.project = None
    if view == "project":
        for r in rows:
            r.project = r.key
    short = short_names(r.project for r in rows if r.project is not None)
    for r in rows:
        r.project_short = None if r.project is None else short[r.project]
    total = UsageRow(key="Total")
    for r in rows:
        _add(total, r)
    total.project = None
    shown = Usage(view, tz, rows, total, {}, untimed, breakdown, len(total.machines) > 1)
    shown.sub_agents = sub_agents
    if by is not None:
        _check_label(store, by)
        shown.by_machine, shown.by_label = False, by
        labelled = {**params, "by": label_pointer(by), "by_name": by}
        shown.breakdown = _parts(store, key, labelled, _LABEL_PARTS[shown.by_model])
    elif shown.by_model or shown.by_machine:
        shown.breakdown = _parts(store, key, params, _PARTS[shown.by_model, shown.by_machine])
    if models:
        by_model = shown.breakdown if shown.by_model and not shown.by_machine else None
        shown.models = by_model or _parts(store, key, params, _KEYS["model"])
    return shown


def label_names(store: Store) -> list[str]:
    """The names of the labels the store's calls have (``calls.labels``), sorted."""
    return [str(name) for (name,) in store.engine.rows("views/label_names.sql")]


def _check_label(store: Store, name: str) -> None:
    """Refuse a label no call has (a typo would show every call under ``(none)``)."""
    names = label_names(store)
    if name in names:
        return
    there = (
        f"the calls' labels are: {', '.join(names)}"
        if names
        else "no call in this store has labels (they come from OpenTelemetry records and "
        "trace-platform exports)"
    )
    raise ForensicsError(f"--by: no call has the label {name!r}: {there}")


def label_pointer(name: str) -> str:
    """The JSON Pointer of a label in ``calls.labels`` (a name may hold dots and slashes).

    >>> label_pointer("team.id"), label_pointer("a/b~c")
    ('/team.id', '/a~1b~0c')
    """
    return "/" + name.replace("~", "~0").replace("/", "~1")


def _order(rows: list[UsageRow], view: str, order: str) -> None:
    """``rows`` in ``order``: most dollars first, latest activity first, or the view's time
    order (a period's; a session's by its last call)."""
    if order == "cost":
        rows.sort(key=lambda r: (-r.total_usd, -r.total_tokens, r.key))
    elif order == "recent":
        rows.sort(key=lambda r: r.last_ts or datetime.min, reverse=True)
    elif view not in PERIODS and view != "session":  # a project or a model: by last call
        rows.sort(key=lambda r: (r.last_ts is None, r.last_ts or datetime.min, r.key))


def _with_runs(store: Store, rows: list[UsageRow], folded: bool = False) -> None:
    """The session view's rows with how each run ended and what it was forked from (and, with
    its sub-agents ``folded`` in, how many), in time order (sessions without times, a log with
    none, in their runs' order)."""
    keys = [r.key for r in rows]
    runs = verdicts(store, keys)
    links = parents(store, keys)
    subs: dict[str, int] = {}
    if folded:
        for link in parents(store).values():
            if link.relation == "subagent_of":
                subs[link.session_id] = subs.get(link.session_id, 0) + 1
    for r in rows:
        r.run = runs.get(r.key)
        r.parent = links.get(r.key)
        r.sub_agents = subs.get(r.key, 0)
    rows.sort(
        key=lambda r: (
            r.last_ts is None,
            r.last_ts or datetime.min,
            (r.run.stream_key, r.run.seq or 0) if r.run else ("", 0),
            r.key,
        )
    )


def _parts(store: Store, key: str, params: dict[str, str], part: str) -> dict[str, list[UsageRow]]:
    """Each row's breakdown by ``part``, most dollars first."""
    parts: dict[str, list[UsageRow]] = {}
    for found in _select(store, key, params, part):
        row = _row(found, str(found[1]))
        row.project = None
        parts.setdefault(str(found[0]), []).append(row)
    for items in parts.values():
        items.sort(key=lambda r: (-r.total_usd, -r.total_tokens, r.key))
    return parts


def _count_gone(store: Store, key: str, params: dict[str, str], rows: list[UsageRow]) -> None:
    """How many of each row's calls were read from files no longer on disk (an agent
    deletes its old logs; the store keeps their calls)."""
    gone = gone_sources(store)
    if not gone:
        return
    counted = dict(store.engine.rows("views/gone_calls.sql", {**params, "gone": gone}, key=key))
    for r in rows:
        r.gone_calls = int(counted.get(r.key, 0))


def gone_sources(store: Store) -> list[int]:
    """The files read into the store that are no longer where they were read (by the path
    their stat was taken at), by source id."""
    found = store.engine.rows("views/stat_paths.sql")
    return sorted(int(sid) for sid, path in found if path and not os.path.exists(path))


def placeholder_text(r: UsageRow) -> str:
    """What placeholder output counts do to a total, in one sentence."""
    floors = (
        f"; {r.placeholder_floors:,} of them a lower bound (thinking redacted in the log)"
        if r.placeholder_floors
        else ""
    )
    return (
        f"{r.placeholder_calls:,} calls log only a streaming placeholder for their output "
        f"({r.placeholder_output:,} tokens; about {r.placeholder_estimate:,} estimated from what "
        f"they wrote): priced at the estimate, {money(r.placeholder_usd)} against "
        f"{money(r.placeholder_logged_usd)} at the logged counts "
        f"(+{money(r.placeholder_usd - r.placeholder_logged_usd)}){floors}"
    )
