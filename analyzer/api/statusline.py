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
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from analyzer.errors import ForensicsError

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
