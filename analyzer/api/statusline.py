"""Claude Code's status line: ``llm-forensics statusline`` as its ``statusLine`` command.

Claude Code runs the status line's command after each new message (at most every 300 ms), its
session's JSON on standard input (``session_id``, ``transcript_path``, ``model``,
``workspace``, ``cost``...), and shows the first line it prints. This prints, in one short
line: the session's spend, today's, the nearest spend cap and how full it is, and a guard that
is tripping, e.g.::

    $4.12 session | $18.40 today | daily_cost_cap 92% of $20.00 | STOP opencode_doom_loop

* The session's spend is its transcript's calls priced as the usage views price them (read on
  from where the last status line stopped: ``analyzer.api.hook_state``); today's adds what the
  default store knew was spent today outside this transcript (the spend ledger written when
  the store is refreshed, ``analyzer.guards.spend``), in the local time zone.
* The caps are the budget policies the hook runs on this transcript (their states) and those
  named with ``--policy``: the one nearest its stop is shown.
* A guard is tripping when a hook on this transcript answered a stop, or a nudge, at its last
  call (``analyzer.api.hook_state``).

It never fails Claude Code's screen by its own error: anything wrong is a short line saying
so (``llm-forensics: <what>``), exit 0.
"""

from __future__ import annotations

import json
import os
import pickle
from array import array
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from analyzer.api.kept import STATE_VERSION, digest_of, locked, said_files, write_atomically
from analyzer.engine.default_store import default_store
from analyzer.errors import ForensicsError
from analyzer.guards.live_claude import LiveTranscript
from analyzer.guards.spend import baseline, ledger_path, read_ledger
from analyzer.model.clock import now

INPUT_LIMIT = 2**20  # the status line's JSON is small; more is not judged


@dataclass(frozen=True)
class Cap:
    """A spend cap as the status line shows it: its policy, its scope, the spend and the cap."""

    policy: str
    scope: str
    spent: Decimal
    cap: Decimal

    @property
    def share(self) -> float:
        return float(self.spent / self.cap) if self.cap > 0 else 0.0


@dataclass(frozen=True)
class Status:
    """What the line says."""

    session: Decimal | None
    today: Decimal | None
    cap: Cap | None = None
    tripping: tuple[str, str] | None = None  # (action, policy)

    def line(self) -> str:
        parts = []
        if self.session is not None:
            parts.append(f"{_dollars(self.session)} session")
        if self.today is not None:
            parts.append(f"{_dollars(self.today)} today")
        if self.cap is not None:
            share = round(100 * self.cap.share)
            parts.append(f"{self.cap.policy} {share}% of {_dollars(self.cap.cap)}")
        if self.tripping is not None:
            action, policy = self.tripping
            parts.append(f"{action.upper()} {policy}")
        return " | ".join(parts) or "llm-forensics: no calls yet"


def _dollars(x: Decimal) -> str:
    return f"${x:,.2f}"


def read_session(stream: IO[bytes] | None) -> dict[str, Any]:
    """The status line's JSON from ``stream`` (at most ``INPUT_LIMIT`` bytes)."""
    if stream is None:
        raise ForensicsError("no standard input")
    data = stream.read(INPUT_LIMIT + 1)
    if len(data) > INPUT_LIMIT:
        raise ForensicsError("the status line's input is over 1 MiB")
    try:
        payload = json.loads(data.decode("utf-8", errors="replace"))
    except ValueError:
        raise ForensicsError("the status line's input is not JSON") from None
    if not isinstance(payload, dict):
        raise ForensicsError("the status line's input is not a JSON object")
    return payload


def transcript_of(payload: dict[str, Any]) -> Path | None:
    named = payload.get("transcript_path")
    return Path(named).expanduser() if isinstance(named, str) and named else None


@dataclass
class SessionSpend:
    """What the status line keeps of a transcript between its runs: the transcript read so
    far and each call's dollars (in units of 1e-10, the store's digits) and day (UTC; an index
    into ``days``), compact, so that a run reads only the new lines."""

    version: str
    transcript: str
    identity: tuple[int, int]
    live: LiveTranscript
    units: array[int] = field(default_factory=lambda: array("q"))
    day_of: array[int] = field(default_factory=lambda: array("l"))
    days: list[str] = field(default_factory=list)

    def keep(self, start: int) -> None:
        """Each call's dollars and day, from index ``start`` on (what came before is kept)."""
        del self.units[start:], self.day_of[start:]
        for usd, ts in self.live.costs(start):
            day = ts[:10] if ts is not None else ""
            if day not in self.days:
                self.days.append(day)
            self.units.append(int(Decimal(usd or 0).scaleb(10)))
            self.day_of.append(self.days.index(day))

    def spent(self) -> tuple[Decimal, dict[str, Decimal]]:
        """The dollars so far, and by day."""
        by_day = [0] * len(self.days)
        for units, day in zip(self.units, self.day_of, strict=True):
            by_day[day] += units
        dollars = {day: Decimal(by_day[i]).scaleb(-10) for i, day in enumerate(self.days)}
        return Decimal(sum(self.units)).scaleb(-10), dollars


def session_spend(transcript: Path, folder: Path) -> tuple[Decimal, dict[str, Decimal]]:
    """The transcript's dollars so far, and by day (UTC, as the usage views and the caps count
    days), read on from where the last run stopped (its state in ``folder``)."""
    path = transcript.resolve()
    where = folder / f"{digest_of(str(path))}-statusline.spent"
    with locked(where):
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            kept = _load(where)
            if kept is None or kept.transcript != str(path) or kept.identity != _id(st):
                kept = SessionSpend(STATE_VERSION, str(path), _id(st), LiveTranscript.start(path))
            changed = kept.live.read_on(fh, st.st_size)
            if changed is None:
                kept = SessionSpend(STATE_VERSION, str(path), _id(st), LiveTranscript.start(path))
                changed = kept.live.read_on(fh, st.st_size) or 0
            kept.keep(min(changed, len(kept.units)))
        write_atomically(where, pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL))
    return kept.spent()


def _id(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _load(path: Path) -> SessionSpend | None:
    try:
        kept = pickle.loads(path.read_bytes())
    except Exception:  # none yet, cut short, of another version: read again
        return None
    return kept if isinstance(kept, SessionSpend) and kept.version == STATE_VERSION else None


def hooks_said(folder: Path, transcript: Path) -> list[dict[str, Any]]:
    """What each hook on ``transcript`` said at its last call (``hook_state.write_said``)."""
    out = []
    for path in said_files(folder, transcript.resolve()):
        try:
            said = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(said, dict) and isinstance(said.get("policy"), str):
            out.append(said)
    return out


def status(payload: dict[str, Any], folder: Path, ledger: dict[str, Any] | None) -> Status:
    """The line's figures for the session ``payload`` names."""
    transcript = transcript_of(payload)
    if transcript is None or not transcript.is_file():
        cost = payload.get("cost")
        usd = cost.get("total_cost_usd") if isinstance(cost, dict) else None
        stated = Decimal(str(usd)) if isinstance(usd, int | float) else None
        return Status(stated, None)
    session, by_day = session_spend(transcript, folder)
    today = now().date().isoformat()
    spent_today = baseline(ledger, "day", today, transcript.resolve()) + by_day.get(today, 0)
    caps, tripping = [], None
    for said in hooks_said(folder, transcript):
        if said.get("type") == "budget" and isinstance(said.get("value"), int | float):
            stop = Decimal(str(said["stop"]))
            caps.append(Cap(said["policy"], said["scope"], Decimal(str(said["value"])), stop))
        action = said.get("action")
        if action in ("stop", "nudge") and (tripping is None or action == "stop"):
            tripping = (action, said["policy"])
    nearest = max(caps, key=lambda c: c.share) if caps else None
    return Status(session, spent_today, nearest, tripping)


def run_statusline(stdin: IO[bytes] | None, folder: Path | None = None) -> str:
    """The whole status line: its JSON in, its line out; never an exception."""
    from analyzer.api.kept import state_folder

    try:
        payload = read_session(stdin)
        where = folder or state_folder()
        ledger = read_ledger(ledger_path(default_store(dict(os.environ), Path.home())))
        return status(payload, where, ledger).line()
    except ForensicsError as exc:
        return f"llm-forensics: {exc}"
    except Exception as exc:  # the status line never fails Claude Code's screen
        line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"llm-forensics: {line}"
