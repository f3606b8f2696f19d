"""A watch over growing logs: ``llm-forensics watch``.

Every poll brings the store up to date with the watched places (new and grown files only, as a
refresh does: an unchanged file costs a ``stat``), and when the store's data changed (this
watch's load, or another command's refresh of the same default store) runs the detectors and
feeds the policies' guards. What is new is said once:

* an incident, keyed by its detector, stream and first call (``incident_id`` also hashes the
  last call, so a loop that grows would get a new id at every poll): said when first found,
  never again as new while it grows;
* a policy's trip, keyed by (policy, call, action);
* a level of a budget policy's cap (``--alert-at``: 50%, 80%, 100%) its value reaches from
  below, keyed by (policy, level, period: the session, turn, stream, day or month the cap
  counts in), as ``analyzer.api.alerts.crossed`` says.

What the first poll finds is the history already there: counted, never reported. The store is
opened for each poll and closed after it, so between polls other commands read (and write) it.

The guards live across polls (``analyzer.guards.guard.Guard``, one per policy): each poll feeds
them only the calls new since the last one, as long as the new calls of every stream come after
those already fed (calls appended to a growing log). A call that lands earlier in a stream (a
file read late, a clock out of order) rebuilds them from the whole history, and the trips
already said are not said again.

Each of them also goes once ever to the alert channels set (``--webhook``, ``--notify``,
``--exec``: ``analyzer.api.alerts``), through the record of alerts sent that every watch and
the Claude Code hook share: a restarted watch, or two at once, never sends one twice.

A watched place that disappears is said once and looked for at every poll; its return is said
too (the watch goes on, whatever is gone). ``--exec``'s program runs beside the polls
(``analyzer.api.exec_runner``). SIGTERM and SIGHUP end the watch as Ctrl-C does
(``ended_by_signals``), so that its throwaway store and the programs it started go with it.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from analyzer import pipeline
from analyzer.api import alerts, home
from analyzer.console import Console, safe_line, use
from analyzer.detect.detectors import Selection, detect, load_incidents, select
from analyzer.engine import cache
from analyzer.engine.store import Store, StoreInUse, open_new_or_existing
from analyzer.errors import InputError
from analyzer.guards.columns import columns_of
from analyzer.guards.guard import Call, Decision, Guard
from analyzer.guards.policy import Policy
from analyzer.guards.replay import Replay
from analyzer.ingest.base import IngestOptions
from analyzer.model.formatting import cut, json_text, money, printable
from analyzer.model.incident import Incident
from analyzer.model.timewindow import local

# The default store's copy for readers (``home.keep_copy``) is made at most this often while
# the watch writes the store (seconds), and once more when the watch ends.
COPY_EVERY = 60.0
# A name from a log (a session, an app) is cut to this many characters in a line.
NAME_WIDTH = 48

IncidentKey = tuple[str, str | None, str | None]
TripKey = tuple[str, str, str]


def incident_key(i: Incident) -> IncidentKey:
    """What stays the same while a loop grows: its detector, stream and first call (a finding
    of no call: its session)."""
    return (i.detector, i.stream_key, i.first_call_id or i.session_id)


def _when(ts: datetime | None, tz: str) -> str:
    return f"{local(ts, tz):%Y-%m-%d %H:%M:%S}" if ts is not None else "(no time)"


def _name(text: object) -> str:
    return cut(printable(text), NAME_WIDTH)


def on_stderr(line: str) -> None:
    """A line of the watch's own (a place gone, an --exec failure) on stderr."""
    sys.stderr.write(safe_line(f"watch: {line}") + "\n")
    sys.stderr.flush()


@dataclass(frozen=True)
class NewIncident:
    """An incident the watch has not said before."""

    incident: Incident

    def line(self, tz: str) -> str:
        i = self.incident
        where = " · ".join(
            x for x in (i.place(), f"session {_name(i.session_id)}" if i.session_id else "") if x
        )
        number = f" (show {i.number})" if i.number is not None else ""
        return (
            f"{_when(i.start_ts, tz)}  incident {i.severity} {i.detector}  {where}  "
            f"{i.n_calls:,} calls, {money(i.wasted_usd)} wasted so far{number}"
        )

    def to_json(self) -> dict[str, Any]:
        return {"event": "incident", **self.incident.to_json()}


@dataclass(frozen=True)
class Trip:
    """A policy's trip the watch has not said before, with its session's dollars so far."""

    decision: Decision
    ts: datetime | None
    session_id: str | None
    session_usd: Decimal

    def line(self, tz: str) -> str:
        d = self.decision
        session = f"session {_name(self.session_id)}" if self.session_id else "its stream"
        return (
            f"{_when(self.ts, tz)}  {d.action} {d.policy}  at call {_name(d.call_id)}: "
            f"{printable(d.reason)}  ({session}: {money(self.session_usd)} so far)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "trip",
            **self.decision.to_json(),
            "ts": self.ts.isoformat() if self.ts else None,
            "session_id": self.session_id,
            "session_usd": self.session_usd,
        }


@dataclass(frozen=True)
class CapReached:
    """A level of a budget policy's cap its value reached from below (the call's time)."""

    alert: alerts.Alert
    ts: datetime | None

    def line(self, tz: str) -> str:
        return f"{_when(self.ts, tz)}  {self.alert.line}"

    def to_json(self) -> dict[str, Any]:
        return {**self.alert.fields, "ts": self.ts.isoformat() if self.ts else None}


Alert = NewIncident | Trip | CapReached


def alert_key(alert: Alert) -> str:
    """What the record of alerts sent remembers of an alert (the hook keys a trip alike)."""
    if isinstance(alert, NewIncident):
        detector, stream, first = incident_key(alert.incident)
        return f"incident:{detector}:{stream}:{first}"
    if isinstance(alert, Trip):
        d = alert.decision
        return f"trip:{d.policy}:{d.call_id}:{d.action}"
    return alert.alert.key


def as_alert(alert: Alert, tz: str) -> alerts.Alert:
    """A watch's alert as the channels take it: its key, its line, its JSON."""
    return alerts.Alert(alert_key(alert), alert.line(tz), alert.to_json())


@dataclass
class Found:
    """What a poll found in the store: its incidents, and the trips of the policies' guards
    with, for each call, when it was and its session's dollars up to it."""

    incidents: list[Incident] = field(default_factory=list)
    trips: list[Trip] = field(default_factory=list)
    caps: list[CapReached] = field(default_factory=list)


def _session_dollars(events: list[dict[str, Any]]) -> dict[str, tuple[Decimal, Any, Any]]:
    """For each call: its session's dollars up to and including it, its time and session (the
    events in the replay's order)."""
    spent: dict[tuple[Any, Any], Decimal] = {}
    out: dict[str, tuple[Decimal, Any, Any]] = {}
    for e in events:
        unit = (e.get("stream_key"), e.get("session_id"))
        spent[unit] = spent.get(unit, Decimal(0)) + Decimal(e.get("cost_usd") or 0)
        out[str(e["call_id"])] = (spent[unit], e.get("ts"), e.get("session_id"))
    return out


class LiveGuards:
    """One live guard per policy, fed the calls as the polls find them.

    A call is fed once it is complete: when a later call of its stream is there, or when it
    has stayed the same over one poll (an agent writes a reply in parts: Claude Code's text,
    then its tool call, a line each; judged on the first part alone, a reply with a tool call
    would look like one without). A call already fed that changed (a fuller version of it read
    since) or a call that landed before one already fed starts the guards again from the
    whole history.

    A budget policy's guard is fed one call at a time, so that its value after each call is
    known: the levels of its cap (``levels``) each call makes it reach are in ``caps`` after
    each ``feed``."""

    def __init__(self, policies: list[Policy], levels: tuple[float, ...] = alerts.LEVELS) -> None:
        self.policies = policies
        self.levels = levels
        self.caps: list[CapReached] = []  # the levels reached by the calls of the last feed
        self.rebuilt = 0  # times the history had to be fed again
        self.pending = False  # calls not yet complete: the next poll looks at them again
        self._last: dict[Any, dict[str, Any]] = {}  # stream -> its last call at the last poll
        self._reset()

    def _reset(self) -> None:
        self.guards = [Guard(p) for p in self.policies]
        self.fed: dict[Any, list[dict[str, Any]]] = {}  # stream -> the calls fed, in order
        # (policy, stream, period) -> the cap's value after the last call fed
        self._values: dict[tuple[str, Any, str], float] = {}

    def feed(self, events: list[dict[str, Any]], complete: bool = False) -> list[Decision]:
        """The trips made by the calls of ``events`` (the whole history, in the replay's order)
        not fed before; with ``complete``, every call is taken as complete."""
        streams: dict[Any, list[dict[str, Any]]] = {}
        for e in events:
            streams.setdefault(e.get("stream_key"), []).append(e)
        settled = {
            key: rows if complete or self._last.get(key) == rows[-1] else rows[:-1]
            for key, rows in streams.items()
        }
        self._last = {key: rows[-1] for key, rows in streams.items()}
        self.pending = any(len(settled[k]) < len(rows) for k, rows in streams.items())
        if any(settled.get(key, [])[: len(fed)] != fed for key, fed in self.fed.items()):
            self.rebuilt += 1
            self._reset()
        new = [
            (key, e) for key, rows in settled.items() for e in rows[len(self.fed.get(key, [])) :]
        ]
        for key, e in new:
            self.fed.setdefault(key, []).append(e)
        calls = [Call.from_event(e) for _, e in new]
        self.caps = []
        return [d for g in self.guards for d in self._feed_guard(g, calls)]

    def _feed_guard(self, guard: Guard, calls: list[Call]) -> list[Decision]:
        """The guard's trips over ``calls``; a budget's levels reached go to ``caps``."""
        p = guard.policy
        if p.type != "budget" or not self.levels or "truncated" in columns_of([p]):
            return guard.feed_all(calls)
        dollars = p.setting("weight") == "cost_usd"
        trips = []
        for call in calls:
            d = guard.feed(call)  # (no call held for the next one: ``d`` is about ``call``)
            if d.action != "continue":
                trips.append(d)
            if d.value is None:
                continue
            period = alerts.period_key(
                p.scope, call.session_id, call.stream_key, call.turn_id, call.ts
            )
            if period is None:  # (a window's start is the guard's to know: not said)
                continue
            before = self._values.get((p.name, call.stream_key, period))
            self._values[(p.name, call.stream_key, period)] = d.value
            reached = alerts.crossed(
                p.name, float(p.stop), before, d.value, self.levels, period, dollars=dollars
            )
            self.caps += [CapReached(a, call.ts) for a in reached]
        return trips


@dataclass
class Watcher:
    """The watch's state across polls: what it has said, its guards, the store's version."""

    choice: home.StoreChoice
    paths: list[str]  # none: the agents' default places, looked up again at every poll
    policies: list[Policy] = field(default_factory=list)
    options: IngestOptions = field(default_factory=IngestOptions)
    console: Console = field(default_factory=lambda: Console(quiet=True))
    selection: Selection = field(default_factory=select)
    tell: Callable[[str], None] = on_stderr  # a place gone, or back
    said_incidents: set[IncidentKey] = field(default_factory=set)
    said_trips: set[TripKey] = field(default_factory=set)
    said_caps: set[str] = field(default_factory=set)
    levels: tuple[float, ...] = alerts.LEVELS  # the levels of a budget's cap said
    polls: int = 0
    busy: str | None = None  # who held the store at the last poll that could not open it
    _version: str | None = None
    _incidents: list[Incident] = field(default_factory=list)
    _events: list[dict[str, Any]] = field(default_factory=list)  # the calls, replayed
    _copied: float = 0.0
    _changed: bool = False
    _places: set[str] | None = None  # the places there at the last poll (None: none yet)
    _gone: set[str] = field(default_factory=set)  # those said to be gone, not back yet

    def __post_init__(self) -> None:
        self.guards = LiveGuards(self.policies, self.levels)

    def inputs(self) -> pipeline.Inputs:
        """What to read at this poll: the paths given, or the default places that exist now."""
        if self.paths:
            there = [p for p in self.paths if os.path.exists(p)]
            gone = [p for p in self.paths if p not in there]
            return pipeline.Inputs(there, {p: p for p in there}, gone)
        return pipeline.default_inputs(os.environ, Path.home())

    def _say_places(self, inputs: pipeline.Inputs) -> None:
        """Say once each place watched that is gone since the last poll, and each one back."""
        now = {inputs.labels.get(p, p) for p in inputs.paths}
        before, self._places = self._places, now
        if before is None:
            return
        for place in sorted(before - now):
            self.tell(f"{place} is gone: watching for it to come back")
        for place in sorted(self._gone & now):
            self.tell(f"{place} is back")
        self._gone = (self._gone | (before - now)) - now
        if before and not now and len(self._gone) > 1:
            self.tell("none of the places watched is there: waiting for them (Ctrl-C to stop)")

    def start(self) -> Found:
        """The first poll: the history already there (nothing of it is reported; the caller
        says how much there is). Waits for the store as a command that writes it does."""
        found = self._poll(home.WRITER_WAIT)
        found = found or Found()
        self.said_incidents |= {incident_key(i) for i in found.incidents}
        self.said_trips |= {_trip_key(t.decision) for t in found.trips}
        self.said_caps |= {c.alert.key for c in found.caps}
        return found

    def poll(self) -> list[Alert]:
        """One poll: what is new since the last one, each said once. A store another process
        holds is left to it for this poll (``busy`` says who)."""
        found = self._poll(home.READER_WAIT)
        if found is None:
            return []
        said: list[Alert] = []
        for i in sorted(found.incidents, key=_started_at):
            if incident_key(i) not in self.said_incidents:
                self.said_incidents.add(incident_key(i))
                said.append(NewIncident(i))
        for t in found.trips:
            if _trip_key(t.decision) not in self.said_trips:
                self.said_trips.add(_trip_key(t.decision))
                said.append(t)
        for c in found.caps:
            if c.alert.key not in self.said_caps:
                self.said_caps.add(c.alert.key)
                said.append(c)
        return said

    def _poll(self, patience: float) -> Found | None:
        """Read what is new, and when the store's data changed since the last poll, what the
        detectors and guards find in it (None: nothing changed, or the store was busy)."""
        self.polls += 1
        try:
            with self._opened(patience) as store:
                found = self._read(store)
        except StoreInUse as exc:
            if self.busy != exc.holder:
                self.console.warn(f"the store is in use by {exc.holder}: polls wait for it")
            self.busy = exc.holder
            return None
        self.busy = None
        if found is not None:
            self._changed = True
            self.keep_copy(COPY_EVERY)
        return found

    @contextmanager
    def _opened(self, patience: float) -> Iterator[Store]:
        home.made_ready(self.choice)

        def opened() -> Any:
            return open_new_or_existing(self.choice.path, console=self.console)

        with use(self.console), home.patiently(opened, patience, "") as store:
            yield store

    def _read(self, store: Store) -> Found | None:
        """Load what is new; when the data changed, detect and replay the calls again (else
        only look again at the calls that were not complete)."""
        inputs = self.inputs()
        self._say_places(inputs)
        if inputs.paths:
            try:
                pipeline.refresh(store, inputs, self.options, incidents=False)
            except InputError:
                if all(os.path.exists(p) for p in inputs.paths):
                    raise
                # (a place went while it was read: the next poll says so, and reads the rest)
        version = cache.version(store, cache.DATA)
        if version != self._version:
            detect(store, self.selection, reuse=True)
            self._incidents = load_incidents(store)
            if self.policies:
                with Replay(store, None, None) as replay:
                    self._events = replay.events()
        elif not self.guards.pending:
            return None
        first, self._version = self._version is None, version
        trips = self._trips(complete=first)
        return Found(self._incidents, trips, self.guards.caps if self.policies else [])

    def _trips(self, complete: bool) -> list[Trip]:
        if not self.policies:
            return []
        by_call = _session_dollars(self._events)
        trips = []
        for d in self.guards.feed(self._events, complete):
            usd, ts, session = by_call.get(d.call_id, (Decimal(0), None, None))
            trips.append(Trip(d, ts, None if session is None else str(session), usd))
        return trips

    def keep_copy(self, every: float = 0.0) -> None:
        """The default store's copy for readers, when the store changed and the last copy is
        ``every`` seconds old or more."""
        now = time.monotonic()
        if self._changed and self.choice.default and now - self._copied >= every:
            home.keep_copy(self.choice)
            self._copied, self._changed = now, False


def _started_at(i: Incident) -> tuple[bool, datetime]:
    """Incidents in order of their start (those of no time last)."""
    return (i.start_ts is None, i.start_ts or datetime.min)


def _trip_key(d: Decision) -> TripKey:
    return (d.policy, d.call_id, d.action)


def alert_json(alert: Alert) -> str:
    """What ``--exec`` reads on its standard input: the incident or trip as one JSON object."""
    return json_text(alert.to_json(), indent=None) + "\n"


def exec_argv(command: str) -> list[str]:
    """``--exec``'s command split as a shell would split it (no shell runs it): nothing from a
    log ever goes into it, only to its standard input."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("an empty command")
    return argv


@dataclass
class Ended:
    """Which signal ended the watch (None: Ctrl-C, or none did)."""

    signum: int | None = None

    @property
    def exit_code(self) -> int:
        """As shells say a process a signal ended: 128 + its number (Ctrl-C: 130)."""
        return 128 + (self.signum or signal.SIGINT)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else "Ctrl-C"


ENDING_SIGNALS = tuple(
    getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)
)


@contextmanager
def ended_by_signals() -> Iterator[Ended]:
    """SIGTERM and SIGHUP raised as Ctrl-C is (``KeyboardInterrupt``, where the main thread
    is: a DuckDB statement under way is stopped), so the watch ends as at Ctrl-C, its store
    closed and what it made removed; the ``Ended`` says which signal it was. Once one came,
    SIGTERM and SIGHUP are ignored while the watch ends (a second Ctrl-C is not). A signal
    ignored when the watch starts (``nohup``'s SIGHUP) stays ignored; outside the main thread
    signals cannot be caught, and nothing is done."""
    ended = Ended()
    if threading.current_thread() is not threading.main_thread():
        yield ended
        return

    def caught(signum: int, _frame: object) -> None:
        if signum != signal.SIGINT:
            ended.signum = signum
        for s in before:
            if s != signal.SIGINT:
                signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt

    before = {s: signal.getsignal(s) for s in ENDING_SIGNALS}
    before = {s: h for s, h in before.items() if h not in (None, signal.SIG_IGN)}
    for s in before:
        signal.signal(s, caught)
    try:
        yield ended
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def watch(
    watcher: Watcher,
    interval: float,
    say: Callable[[Alert], None],
    stop: threading.Event | None = None,
    polls: int | None = None,
) -> None:
    """Poll every ``interval`` seconds (from the start of one poll to the next), handing each
    new alert to ``say``, until ``stop`` is set or after ``polls`` polls (for tests); Ctrl-C
    comes through as ``KeyboardInterrupt`` (at once: the default store's copy is then left to
    the next refresh). Otherwise the default store's copy is brought up to date at the end."""
    stop = stop or threading.Event()
    done = 0
    while not stop.is_set():
        began = time.monotonic()
        for alert in watcher.poll():
            say(alert)
        done += 1
        if polls is not None and done >= polls:
            break
        stop.wait(max(0.0, interval - (time.monotonic() - began)))
    watcher.keep_copy()
