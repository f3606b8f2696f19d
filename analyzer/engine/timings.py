"""What each SQL unit costs in one run, for the benchmark's breakdown of a command by stage
(``bench/stages.py``).

With ``$LLM_FORENSICS_TIMINGS`` naming a file, the engine times every statement it runs and,
when the process ends, writes there the wall time of the process since this module was
imported and, per SQL unit (``ingest/bills/openrouter/store.sql``; a one-line statement by its
first words), the seconds its statements took and how many ran, as JSON. Unset (always, but
for the benchmark), nothing is timed: the engine asks one boolean per statement.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import time
from pathlib import Path

ENV = "LLM_FORENSICS_TIMINGS"
_START = time.perf_counter()
_TARGET = os.environ.get(ENV, "").strip()
ON = bool(_TARGET)
_totals: dict[str, list[float]] = {}
_SPACE = re.compile(r"\s+")


def label(sql: str) -> str:
    """What a statement is counted under: its unit (or a detector's ``queries/<name>.sql``),
    or its first words."""
    return sql if sql.endswith(".sql") else _SPACE.sub(" ", sql.strip())[:60]


def record(sql: str, seconds: float) -> None:
    """``seconds`` more spent running ``sql`` (a unit, or a statement's text)."""
    entry = _totals.setdefault(label(sql), [0.0, 0])
    entry[0] += seconds
    entry[1] += 1


def said() -> dict[str, object]:
    """The run's timings so far: its wall time, and each unit's seconds and count."""
    units = {k: {"seconds": round(v[0], 4), "runs": int(v[1])} for k, v in _totals.items()}
    return {"wall_seconds": round(time.perf_counter() - _START, 4), "units": units}


def _write() -> None:
    Path(_TARGET).write_text(json.dumps(said(), indent=1, sort_keys=True) + "\n")


if ON:
    atexit.register(_write)
