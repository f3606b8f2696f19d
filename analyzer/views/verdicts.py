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
    # A run whose log states no cost divided over its calls (cut off before its result line;
    # a 0 the agent wrote for a model it could not price): its calls' dollars, its
    # sub-agents' too, at list prices (None: none priced so, or its cost is stated).
    estimated_usd: Decimal | None = None

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
        if self.estimated_usd:
            usd = money(self.estimated_usd)
            facts.append(
                f"no cost in its log: its calls at list prices, {usd}"
                if self.reported_cost_usd is None
                else f"its calls at list prices, {usd}, above the cost stated (read as no price)"
            )
        return text + ("; " + "; ".join(facts) if facts else "")

    def to_json(self) -> dict[str, Any]:
        return json_record(self)  # every field, in order; dollars exact


@dataclass
class Unstated:
    """Runs whose log states no cost of their own in files that state their other runs'
    (``views/unstated_runs.sql``): the dollars of their calls, at list prices, are above what
    those files state, and this says so."""

    runs: int
    cut_off: int  # of them, with no verdict: cut off before their result line
    calls: int  # theirs and their sub-agents', priced at list prices
    usd: Decimal
    files: int
    stated_usd: Decimal  # what those files state for their other runs

    def text(self) -> str:
        """One sentence: ``$4.80 of the spend is 1 run cut off with no cost stated (61 calls at
        list prices), beyond the $23.96 stated in the same file for the other runs``."""
        n = self.runs
        runs = f"{n:,} {'run' if n == 1 else 'runs'}"
        if self.cut_off == n:
            why = "cut off with no cost stated"
        else:
            why = f"with no cost stated ({self.cut_off:,} cut off, the others stating none or $0)"
        files = "file" if self.files == 1 else f"{self.files:,} files"
        return (
            f"{money(self.usd)} of the spend is {runs} {why} ({self.calls:,} calls at list "
            f"prices), beyond the {money(self.stated_usd)} stated in the same {files} for "
            "the other runs"
        )


def unstated(store: Store) -> Unstated | None:
    """The runs priced at list prices beside runs whose cost their file states (None: none)."""
    runs, cut_off, calls, usd, files, stated = store.engine.rows("views/unstated_runs.sql")[0]
    if not runs or usd is None:
        return None
    return Unstated(
        int(runs), int(cut_off), int(calls), Decimal(usd), int(files), Decimal(stated or 0)
    )


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
