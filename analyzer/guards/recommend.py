"""``backtest --recommend``: the policy and stop threshold that prevent the most waste within a
false-trip budget, written as the TOML table a user puts in their own policy file.

Every policy is replayed over its swept stop thresholds (the backtest's own sweep, plus its
threshold as written). ``best`` is the one rule that ranks them, here and on the report's page
(which weighs the backtest's variants with the default budget):

* a variant is admissible when its false trips (stops that prevented nothing) stay within the
  budget, in number (``--max-false-trips``, 0 by default) or in the dollars of work they would
  have killed (``--max-false-usd``), and it saves money: it prevents waste net of its harm
  (``net`` at least a cent, as shown: a net of $0.00 is no saving to offer);
* among those, the most ``net`` wins (waste prevented less harm: a guard at a threshold so low
  that its true stops also kill productive work pays for it); then the most waste prevented,
  fewer false trips, and the higher (more patient) threshold; of variants equal in all of
  that, the policy listed first.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any, TypeVar

from analyzer.engine.resources import command_path
from analyzer.engine.store import Store
from analyzer.guards.backtest import default_sweep
from analyzer.guards.blindness import named_columns
from analyzer.guards.guard import Call
from analyzer.guards.policy import Policy, all_policies, load_policies, toml_table, toml_value
from analyzer.guards.replay import Replay
from analyzer.guards.scoring import Result
from analyzer.model.formatting import money, wrap


@dataclass(frozen=True)
class Budget:
    """How much harm a recommendation may do: false trips in number or in dollars."""

    max_false_trips: int | None = None
    max_false_usd: Decimal | None = None

    def allows(self, r: Result) -> bool:
        if self.max_false_usd is not None:
            return r.usd_false_trips <= self.max_false_usd
        return r.false_trips <= (self.max_false_trips or 0)

    def describe(self) -> str:
        if self.max_false_usd is not None:
            return f"false trips killing at most ${self.max_false_usd:,.2f} of work"
        n = self.max_false_trips or 0
        return "no false trip" if n == 0 else f"at most {n:,} false trip(s)"


@dataclass
class Recommendation:
    policy: Policy  # at the recommended threshold
    result: Result
    budget: Budget
    variants: int  # how many (policy, threshold) pairs were weighed
    within: int  # of which within the budget

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy.name,
            "stop": self.policy.stop,
            "budget": self.budget.describe(),
            "variants_weighed": self.variants,
            "variants_within_budget": self.within,
            "result": self.result.to_json(),
            "toml": recommended_toml(self.policy, self.result),
            "claude_code_settings": hook_settings(*running(self.policy)),
            "python": python_lines(self.policy),
        }

    def render(self, width: int) -> str:
        """The recommendation as the terminal shows it: what it prevents and harms, wrapped to
        ``width``, then the TOML table to copy (its lines are not wrapped: they are to paste)."""
        r = self.result
        lines = [f"Recommended: {self.policy.name} at stop = {self.policy.stop:g}"]
        lines += wrap(outcome(r), width, "  ")
        lines += wrap(
            f"budget: {self.budget.describe()}; best of {self.within:,} within it "
            f"({self.variants:,} weighed)",
            width,
            "  ",
        )
        name, file = running(self.policy)
        if file is None:
            lines += ["", f"# {name} is a preset: it runs as it is (the TOML, to tune it):"]
        else:
            lines += ["", f"# Put this in a policy file ({file}; --policies FILE reads it):"]
        lines.append(recommended_toml(self.policy, r).rstrip("\n"))
        lines += [
            "",
            "# Run it in Claude Code: in .claude/settings.json (or ~/.claude/settings.json)",
        ]
        lines.append(json.dumps(hook_settings(name, file)))
        lines += ["", "# Run it in your own agent (Python), after each model call:"]
        lines += python_lines(self.policy)
        return "\n".join(lines) + "\n"


def outcome(r: Result) -> str:
    """What a policy did over the history, in the words of ``backtest --recommend``: the waste
    it prevents of its targets', the incidents it stops, its false trips, harm and net."""
    return (
        f"prevents {money(r.waste_prevented_usd)} of {money(r.waste_total_usd)} of its "
        f"targets' waste ({r.incidents_stopped} of {r.incidents_total} incidents); "
        f"{r.false_trips} false trip(s) killing {money(r.usd_false_trips)}; harm "
        f"{money(r.harm_usd)}; net {money(r.net_usd)}"
    )


CENT = Decimal("0.01")
V = TypeVar("V")  # what names a variant: a policy's name, or the policy and its swept setting


def rank(r: Result, value: float) -> tuple[Decimal, Decimal, int, float]:
    """A variant's place (the higher the better): net, waste prevented, fewer false trips, the
    higher threshold ``value``. Dollars are exact (``Decimal``, as the store keeps them)."""
    return (r.net_usd, r.waste_prevented_usd, -r.false_trips, value)


def saves_money(r: Result) -> bool:
    """Whether ``r`` saves money: its net (waste prevented less harm) is at least a cent, as
    it is shown (a net of $0.004 is shown $0.00: not a saving to offer)."""
    return Decimal(r.net_usd).quantize(CENT, rounding=ROUND_HALF_EVEN) > 0


def best(
    variants: Iterable[tuple[V, float, Result]], budget: Budget
) -> tuple[V, float, Result] | None:
    """The best of ``variants`` (what names each, its threshold, its result) within ``budget``
    that prevents waste net of its harm, by ``rank`` (the first of equals); None when none
    does. The one rule of ``backtest --recommend`` and the report's recommendation."""
    top: tuple[tuple[Decimal, Decimal, int, float], tuple[V, float, Result]] | None = None
    for variant in variants:
        _, value, r = variant
        if not budget.allows(r) or r.waste_prevented_usd <= 0 or not saves_money(r):
            continue
        place = rank(r, value)
        if top is None or place > top[0]:
            top = (place, variant)
    return None if top is None else top[1]


def recommend(
    store: Store,
    policies: list[Policy],
    budget: Budget,
    sweeps: dict[str, tuple[str, list[float]]] | None = None,
) -> tuple[Recommendation | None, int, int]:
    """The best variant within ``budget`` (None when no variant within it prevents waste),
    with the number of variants weighed and of those within the budget."""
    with Replay(store, policies=policies) as replay:
        return _recommend(replay, policies, budget, sweeps or {})


def _recommend(
    replay: Replay,
    policies: list[Policy],
    budget: Budget,
    sweeps: dict[str, tuple[str, list[float]]],
) -> tuple[Recommendation | None, int, int]:
    weighed = within = 0

    def variants() -> Iterator[tuple[tuple[Policy, str], float, Result]]:
        """Every policy's variants, one policy replayed at a time (a policy's results are let
        go before the next one's: each lists the incidents it stopped)."""
        nonlocal weighed, within
        for p in policies:
            param, values = sweeps.get(p.name, ("stop", default_sweep(p)))
            if param == "stop" and float(p.stop) not in values:
                values = sorted({*values, float(p.stop)})
            swept = replay.run(p, (param, values), detail=set())  # figures only: no trips
            for value, r in zip(values, swept, strict=True):
                weighed += 1
                within += budget.allows(r)
                yield (p, param), value, r

    chosen = best(variants(), budget)
    if chosen is None:
        return None, weighed, within
    (p, param), value, _ = chosen
    policy = p.with_param(param, value)
    # The winner replayed alone, its trips listed (the same replay as its swept variant's).
    [result] = replay.run(policy)
    return Recommendation(policy, result, budget, weighed, within), weighed, within


def recommended_toml(p: Policy, r: Result | None = None) -> str:
    """``p`` as the ``[policy.<name>]`` table to paste into a policy file (``toml_table``),
    under a new name (a file may not reuse a built-in one), with what it prevents."""
    stop = toml_value(float(p.stop))
    description = f"{p.name} at stop = {stop} (recommended by llm-forensics backtest)" + (
        f". {p.description}" if p.description else ""
    )
    note = None
    if r is not None:
        note = (
            f"prevents ${r.waste_prevented_usd:,.2f} of ${r.waste_total_usd:,.2f} "
            f"({r.incidents_stopped} of {r.incidents_total} target incidents), "
            f"{r.false_trips} false trip(s) (${r.usd_false_trips:,.2f}), net ${r.net_usd:,.2f}"
        )
    return toml_table(p, f"{p.name}_at_{stop.replace('.', '_')}", description, note)


# Where a recommended policy that is not a preset as it stands is kept to be run: the file
# named in the hook's command (Claude Code runs it in the project, $CLAUDE_PROJECT_DIR).
GUARDS_FILE = "guards.toml"


def running(p: Policy) -> tuple[str, str | None]:
    """The name a guard loads ``p`` by, and the policy file it is in (None: a preset as it
    stands, no file needed): a preset or a policy of one's own file at its own threshold
    runs under its own name; any other threshold as ``recommended_toml`` names it, from
    ``GUARDS_FILE``."""
    if p.source == "built-in":
        for preset in all_policies():
            if preset.name == p.name and preset.table() == p.table():
                return p.name, None
    elif Path(p.source).is_file():
        for own in load_policies(Path(p.source)):
            if own.name == p.name and own.table() == p.table():
                return p.name, p.source
    stop = toml_value(float(p.stop))
    return f"{p.name}_at_{stop.replace('.', '_')}", GUARDS_FILE


def hook_settings(name: str, file: str | None) -> dict[str, Any]:
    """The lines of Claude Code's settings.json that run the guard after every tool call
    (``llm-forensics guard claude-hook``, by the installed command's absolute path: Claude Code
    runs it with the PATH it was started with; its answer follows Claude Code's hooks
    reference)."""
    command = f"{shlex.quote(command_path())} guard claude-hook --policy {name}"
    if file is not None:
        where = file if Path(file).is_absolute() else f'"$CLAUDE_PROJECT_DIR"/{file}'
        command += f" --policies {where}"
    hook = {"type": "command", "command": command}
    return {"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [hook]}]}}


# What a live call must say for a policy reading a derived column (the guard derives it).
_MADE_OF = {
    "stalled": ("response_kind",),
    "tool_call": ("response_kind", "tool_key"),
    "tools_before": ("response_kind", "tool_key"),
    "prompt_delta": ("input_tokens",),
    "truncated": ("response_kind", "finish_reason", "input_tokens", "output_tokens"),
}


def python_lines(p: Policy) -> list[str]:
    """The three lines of Python that run ``p`` in an agent's loop, the call giving what the
    policy reads."""
    name, file = running(p)
    load = f"Guard.load({name!r})" if file is None else f"Guard.load({name!r}, {file!r})"
    reads: set[str] = set()
    said_in = (p.watch, *(p.setting(x) for x in p.primitive.expressions))
    for column in named_columns(" ".join(str(e) for e in said_in if e)):
        reads.update(_MADE_OF.get(column, (column,)))
    reads &= {f.name for f in fields(Call)} - {"call_id", "session_id", "turn_id", "ts"}
    ids = "session_id=..., turn_id=..." if "turn" in (p.scope, p.reaches) else "session_id=..."
    said = ", ".join([ids, *(f"{c}=..." for c in sorted(reads))])
    return [
        "from analyzer.api import Call, Guard",
        f"guard = {load}",
        f"if guard.feed(Call(call_id, {said})).stops: break",
    ]
