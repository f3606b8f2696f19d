"""How each run ended, in the agent's own words (the ``runs`` table), for every view that shows
a session: ``show``, ``usage session``, the audit summary and the report."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from analyzer.engine.store import Store
from analyzer.model.formatting import money
from analyzer.model.records import json_record

# How an outcome reads in a sentence.
_WORDS = {
    "completed": "completed",
    "step_limit": "hit its step limit",
    "cost_limit": "hit its cost limit",
    "context_limit": "ran out of context",
    "format_error": "gave up on malformed replies",
    "stuck": "stopped by the agent's stuck detector",
    "error": "failed",
    "interrupted": "was interrupted",
    "other": "ended",
}


@dataclass
class Verdict:
    """What a run's log says of how it ended, and what it states it used."""

    session_id: str
    stream_key: str
    seq: int | None  # the run's order in its stream
    agent: str | None
    exit_status: str | None
    outcome: str | None
    is_error: bool | None
    result_excerpt: str | None
    reported_calls: int | None
    reported_input_tokens: int | None
    reported_output_tokens: int | None
    reported_cost_usd: Decimal | None
    cost_apportioned: bool | None
    duration_ms: float | None
    step_limit: int | None
    cost_limit_usd: Decimal | None
    calls: int = 0  # its calls in the store

    def describe(self) -> str:
        """One line: ``failed: "5-hour limit reached"; 1 call by its own count; stated cost
        $0.00``."""
        if self.outcome is None:
            text = "no verdict in the log (the run was cut off, or its end not written)"
        else:
            text = _WORDS.get(self.outcome, self.outcome)
            if self.exit_status and self.exit_status not in (self.outcome, "success"):
                text += f" ({self.exit_status})"
        if self.result_excerpt and self.outcome not in (None, "completed"):
            text += f': "{_one_line(self.result_excerpt)}"'
        facts = []
        if self.reported_calls is not None:
            limit = f" of {self.step_limit:,} allowed" if self.step_limit else ""
            n = self.reported_calls
            facts.append(f"{n:,} {'call' if n == 1 else 'calls'} by its own count{limit}")
        if self.reported_cost_usd is not None:
            cap = f" (limit {money(self.cost_limit_usd)})" if self.cost_limit_usd else ""
            shared = ", divided over its calls" if self.cost_apportioned else ""
            facts.append(f"stated cost {money(self.reported_cost_usd)}{cap}{shared}")
        return text + ("; " + "; ".join(facts) if facts else "")

    def to_json(self) -> dict[str, Any]:
        return json_record(self)  # every field, in order; dollars exact


def _one_line(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def verdicts(store: Store, sessions: list[str] | None = None) -> dict[str, Verdict]:
    """Each run's verdict by its session (only ``sessions``, when given)."""
    only = "WHERE r.session_id IN (SELECT unnest($s))" if sessions is not None else ""
    rows = store.engine.rows("views/verdicts.sql", {"s": sessions}, only=only)
    return {r[0]: Verdict(*r) for r in rows}


def outcomes(store: Store) -> dict[str, int]:
    """Runs per outcome (``none`` for runs whose log says no verdict), most first."""
    return {str(o): int(n) for o, n in store.engine.rows("views/outcomes.sql")}
