"""What a live guard's decision costs (issue 36: "at most a few milliseconds for a session of
1,000 calls"): every preset fed a generated session of 1,000 calls one at a time, each
``Guard.feed`` timed. Prints one JSON object: the median, 99th percentile and largest time of
a decision over all presets' calls, the median of the last 100 calls (a session already
1,000 long), the first decision of a guard (it opens its DuckDB connection), and the slowest
preset.

    python bench/guard_cost.py [--calls 1000]

The session: turns of 40 calls, mostly tool calls over 25 distinct tools with a prompt that
grows, some text and thinking-only replies, and a loop at its end (the same tool call with
the same prompt, 30 times) so that the presets trip and say why.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import datetime, timedelta

from analyzer.api import Call, Guard
from analyzer.guards.policy import all_policies


def session(n: int) -> list[Call]:
    t0 = datetime(2026, 11, 1, 9, 0)
    calls = []
    for i in range(n):
        looping = i >= n - 30
        kind = "tool_call" if looping or i % 7 else ("text" if i % 2 else "thinking_only")
        calls.append(
            Call(
                call_id=f"c{i}",
                session_id="s",
                turn_id=f"t{i // 40}",
                ts=t0 + timedelta(seconds=3 * i),
                model="m",
                response_kind=kind,
                finish_reason="tool_calls" if kind == "tool_call" else "stop",
                input_tokens=90_000 if looping else 2_000 + 40 * i,
                output_tokens=3 if looping else 50 + i % 300,
                cost_usd=0.002 + i * 1e-5,
                visible_chars=0 if kind != "text" else 200,
                content_chars=0 if kind != "text" else 200,
                tool_key=("bash:same" if looping else f"tool{i % 25}:{i}")
                if kind == "tool_call"
                else None,
            )
        )
    return calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=1000)
    n = ap.parse_args().calls
    calls = session(n)
    every: list[float] = []
    last: list[float] = []
    first: list[float] = []
    by_policy: dict[str, float] = {}
    trips = 0
    for p in all_policies():
        guard = Guard(p)
        spent = []
        for call in calls:
            started = time.perf_counter()
            guard.feed(call)
            spent.append(1000 * (time.perf_counter() - started))
        guard.finish()
        trips += len(guard.trips)
        first.append(spent[0])
        every += spent[1:]
        last += spent[-100:]
        by_policy[p.name] = statistics.median(spent[1:])
    every.sort()
    slowest = max(by_policy, key=lambda k: by_policy[k])
    print(
        json.dumps(
            {
                "calls": n,
                "presets": len(by_policy),
                "trips": trips,
                "median_ms": round(statistics.median(every), 3),
                "p99_ms": round(every[int(0.99 * (len(every) - 1))], 3),
                "max_ms": round(every[-1], 3),
                "median_last_100_ms": round(statistics.median(last), 3),
                "first_decision_ms": round(statistics.median(first), 3),
                "slowest_preset": slowest,
                "slowest_preset_median_ms": round(by_policy[slowest], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
