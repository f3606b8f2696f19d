"""``backtest --recommend``: the policy and stop threshold that prevent the most waste within a
false-trip budget, written as the TOML table a user puts in their own policy file.

Every policy is replayed over its swept stop thresholds (the backtest's own sweep, plus its
threshold as written). A variant is admissible when its false trips (stops that prevented
nothing) stay within the budget, in number (``--max-false-trips``, 0 by default) or in the
dollars of work they would have killed (``--max-false-usd``). Among those that prevent any
waste, the one that prevents the most net of the harm it does (``net``: a guard at a threshold
so low that its true stops also kill productive work pays for it) wins; then the most waste
prevented, fewer false trips, and the higher (more patient) threshold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from analyzer.backtest import default_sweep
from analyzer.formatting import money, wrap
from analyzer.guards import Policy
from analyzer.replay import Replay
from analyzer.scoring import Result
from analyzer.store import Store


@dataclass(frozen=True)
class Budget:
    """How much harm a recommendation may do: false trips in number or in dollars."""

    max_false_trips: int | None = None
    max_false_usd: float | None = None

    def allows(self, r: Result) -> bool:
        if self.max_false_usd is not None:
            return r.usd_false_trips <= self.max_false_usd + 1e-9
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
            "toml": toml_table(self.policy, self.result),
        }

    def render(self, width: int) -> str:
        """The recommendation as the terminal shows it: what it prevents and harms, wrapped to
        ``width``, then the TOML table to copy (its lines are not wrapped: they are to paste)."""
        r = self.result
        lines = [f"Recommended: {self.policy.name} at stop = {self.policy.stop:g}"]
        lines += wrap(
            f"prevents {money(r.waste_prevented_usd)} of {money(r.waste_total_usd)} of its "
            f"targets' waste ({r.incidents_stopped} of {r.incidents_total} incidents); "
            f"{r.false_trips} false trip(s) killing {money(r.usd_false_trips)}; harm "
            f"{money(r.harm_usd)}; net {money(r.net_usd)}",
            width,
            "  ",
        )
        lines += wrap(
            f"budget: {self.budget.describe()}; best of {self.within:,} within it "
            f"({self.variants:,} weighed)",
            width,
            "  ",
        )
        lines += ["", "# Put this in a policy file and pass it with --policies FILE:"]
        return "\n".join(lines) + "\n" + toml_table(self.policy, r)


def recommend(
    store: Store,
    policies: list[Policy],
    budget: Budget,
    sweeps: dict[str, tuple[str, list[float]]] | None = None,
) -> tuple[Recommendation | None, int, int]:
    """The best variant within ``budget`` (None when no variant within it prevents waste),
    with the number of variants weighed and of those within the budget."""
    replay = Replay(store, policies=policies)
    best: tuple[tuple[float, float, int, float], Policy, Result] | None = None  # (rank, ...)
    weighed = within = 0
    for p in policies:
        param, values = (sweeps or {}).get(p.name, ("stop", default_sweep(p)))
        if param == "stop" and float(p.stop) not in values:
            values = sorted({*values, float(p.stop)})
        swept = replay.run(p, (param, values), detail=set())  # figures only: no trips listed
        for value, r in zip(values, swept, strict=True):
            weighed += 1
            if not budget.allows(r):
                continue
            within += 1
            if r.waste_prevented_usd <= 0 or r.net_usd <= 0:
                continue
            rank = (round(r.net_usd, 6), round(r.waste_prevented_usd, 6), -r.false_trips, value)
            if best is None or rank > best[0]:
                best = (rank, p.with_param(param, value), r)
    if best is None:
        return None, weighed, within
    _, policy, _ = best
    # The winner replayed alone, its trips listed (the same replay as its swept variant's).
    [result] = replay.run(policy)
    return Recommendation(policy, result, budget, weighed, within), weighed, within


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


def toml_table(p: Policy, r: Result | None = None) -> str:
    """``p`` as a ``[policy.<name>]`` table that ``--policies FILE`` reads back (under a new
    name: a file may not reuse a built-in one)."""
    stop = _toml(float(p.stop))
    name = f"{p.name}_at_{stop.replace('.', '_')}"
    fields: dict[str, Any] = {
        "description": f"{p.name} at stop = {stop} (recommended by llm-forensics backtest)"
        + (f". {p.description}" if p.description else ""),
        "type": p.type,
        "scope": p.scope,
    }
    if p.reach is not None:
        fields["reach"] = p.reach
    if p.watch is not None:
        fields["watch"] = p.watch
    fields.update(p.settings)
    if p.nudge is not None and not p.final_attempt:
        fields["nudge"] = p.nudge
    fields["stop"] = p.stop
    if p.final_attempt:
        fields["final_attempt"] = True
    if p.compare != ">=":
        fields["compare"] = p.compare
    if p.on_trip != "end":
        fields["on_trip"] = p.on_trip
    if p.targets is not None:
        fields["targets"] = list(p.targets)
    lines = []
    if r is not None:
        lines.append(
            f"# prevents ${r.waste_prevented_usd:,.2f} of ${r.waste_total_usd:,.2f} "
            f"({r.incidents_stopped} of {r.incidents_total} target incidents), "
            f"{r.false_trips} false trip(s) (${r.usd_false_trips:,.2f}), net ${r.net_usd:,.2f}"
        )
    lines.append(f"[policy.{name}]")
    lines += [f"{k} = {_toml(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"
