"""What the live reader of a Claude Code transcript costs (``analyzer.guards.live_claude``):
a synthetic transcript (``bench.agent_logs``' Claude Code lines, one session) of each size read
whole, then grown by one call at a time as the hook reads it: the state unpickled, the new
lines read, the changed calls made, the state pickled again.

``python -m bench.live_claude [MB ...]`` (default: 10 100) prints, per size, the calls, the
whole read's seconds, the state's size, and the median and p99 of an appended call's cost.
"""

from __future__ import annotations

import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

from analyzer.guards.live_claude import LiveTranscript
from bench.agent_logs import _lines, _session

APPENDED = 200
FILLER = "x" * 2400


def measure(root: Path, mb: float) -> dict[str, float]:
    path = root / "projects" / "big-project" / f"session-{mb:g}.jsonl"
    _session(path, int(mb * 2**20), 0)
    t = time.perf_counter()
    live = LiveTranscript.start(path)
    with open(path, "rb") as fh:
        live.read_on(fh, path.stat().st_size)
    calls = live.calls()
    whole = time.perf_counter() - t
    state = pickle.dumps(live)
    next_i = len(calls)
    costs = []
    for k in range(APPENDED):
        with open(path, "a", encoding="utf-8") as out:
            out.write(_lines(0, next_i + k, FILLER))
        t = time.perf_counter()
        live = pickle.loads(state)
        with open(path, "rb") as fh:
            at = live.read_on(fh, path.stat().st_size)
        assert at is not None
        live.calls(at)
        state = pickle.dumps(live)
        costs.append(time.perf_counter() - t)
    costs.sort()
    return {
        "mb": mb,
        "calls": len(live),
        "whole_s": whole,
        "state_mb": len(state) / 2**20,
        "median_ms": statistics.median(costs) * 1000,
        "p99_ms": costs[int(0.99 * len(costs)) - 1] * 1000,
    }


def main(sizes: list[float]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for mb in sizes:
            r = measure(Path(tmp), mb)
            print(
                f"{r['mb']:g} MB: {r['calls']:,.0f} calls, read whole in {r['whole_s']:.2f} s; "
                f"state {r['state_mb']:.2f} MB; one call appended: median "
                f"{r['median_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms"
            )


if __name__ == "__main__":
    main([float(a) for a in sys.argv[1:]] or [10.0, 100.0])
