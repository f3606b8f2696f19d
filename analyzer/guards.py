"""Guard policies as configuration: the primitives, their TOML form, the built-in presets.

A guard is what an agent runs online: it sees its calls one at a time and may nudge or stop.
Each policy here is one primitive (reference/guards.md §4):

* ``counter`` - adds ``weight`` (1, or a column such as ``cost_usd``) for each call matching
  ``count``; a call matching ``reset`` sets it back to zero;
* ``budget`` - a counter that never resets, weighted by cost by default;
* ``run_length`` - how many calls in a row had the same ``key`` (a NULL key is no run);
* ``period`` - how many times a cycle of ``period`` calls (A-B-A-B...) repeated, by ``key``;
* ``window`` - how many of the last ``size`` calls (or the calls of the last ``seconds``)
  matched ``count``.

Every policy has a ``scope`` (``stream``, ``session`` or ``turn``: the unit it lives in - a run
of consecutive calls of one stream sharing the session or turn; each new unit starts it afresh,
a stop ends the unit), an optional ``watch`` predicate (the calls the
guard sees at all: the others neither count nor reset), a ``stop`` threshold and an optional
``nudge`` threshold below it (the ladder: nudge at N, stop at M). Predicates, keys and weights
are SQL expressions over one call of the replay (see ``analyzer.backtest.EVENT_COLUMNS``).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from analyzer.errors import ForensicsError

TYPES = ("counter", "budget", "run_length", "period", "window")
SCOPES = ("stream", "session", "turn")
PRESETS = Path(__file__).resolve().parent / "presets.toml"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_FIELDS = {
    "description", "type", "scope", "watch", "count", "reset", "weight", "key", "period",
    "size", "seconds", "stop", "nudge",
}  # fmt: skip
SWEEPABLE = ("stop", "nudge", "period", "size", "seconds")


@dataclass(frozen=True)
class Policy:
    name: str
    type: str
    scope: str
    stop: float
    description: str = ""
    watch: str | None = None
    count: str | None = None
    reset: str | None = None
    weight: str = "1"
    key: str | None = None
    period: int = 2
    size: int | None = None
    seconds: float | None = None
    nudge: float | None = None
    source: str = "built-in"
    extra: dict[str, Any] = field(default_factory=dict)

    def params(self) -> dict[str, Any]:
        """What a user can read and set (``--sweep NAME.PARAM=...``)."""
        out: dict[str, Any] = {"type": self.type, "scope": self.scope}
        for name in ("watch", "count", "reset", "key"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.type in ("counter", "budget"):
            out["weight"] = self.weight
        if self.type == "period":
            out["period"] = self.period
        if self.type == "window":
            out["size" if self.size is not None else "seconds"] = (
                self.size if self.size is not None else self.seconds
            )
        if self.nudge is not None:
            out["nudge"] = self.nudge
        out["stop"] = self.stop
        return out

    def with_param(self, name: str, value: float) -> Policy:
        if name not in SWEEPABLE or (name == "period" and self.type != "period"):
            raise ForensicsError(
                f"{self.name}: {name!r} cannot be swept (thresholds: stop, nudge"
                + (", period" if self.type == "period" else "")
                + (", size, seconds" if self.type == "window" else "")
                + ")"
            )
        if name in ("period", "size"):
            value = int(value)
        return replace(self, **{name: value})


def _policy(name: str, raw: dict[str, Any], source: str) -> Policy:
    where = f"{source}: policy {name}"
    if not _NAME.match(name):
        raise ForensicsError(f"{where}: a name is lower case letters, digits and underscores")
    unknown = set(raw) - _FIELDS
    if unknown:
        raise ForensicsError(f"{where}: unknown settings {', '.join(sorted(unknown))}")
    kind = raw.get("type")
    if kind not in TYPES:
        raise ForensicsError(f"{where}: type must be one of {', '.join(TYPES)}")
    scope = raw.get("scope", "session")
    if scope not in SCOPES:
        raise ForensicsError(f"{where}: scope must be one of {', '.join(SCOPES)}")
    if "stop" not in raw or not isinstance(raw["stop"], int | float) or raw["stop"] <= 0:
        raise ForensicsError(f"{where}: needs a positive 'stop' threshold")
    nudge = raw.get("nudge")
    if nudge is not None and (not isinstance(nudge, int | float) or not 0 < nudge < raw["stop"]):
        raise ForensicsError(f"{where}: 'nudge' must be a number below 'stop'")
    for text_field in ("watch", "count", "reset", "weight", "key", "description"):
        if text_field in raw and not isinstance(raw[text_field], str):
            raise ForensicsError(f"{where}: '{text_field}' must be a string (an SQL expression)")
    if kind == "counter" and not raw.get("count"):
        raise ForensicsError(f"{where}: a counter needs 'count' (what it counts)")
    if kind in ("run_length", "period") and not raw.get("key"):
        raise ForensicsError(f"{where}: a {kind} needs 'key' (what must repeat)")
    if kind == "window":
        if not raw.get("count"):
            raise ForensicsError(f"{where}: a window needs 'count'")
        if ("size" in raw) == ("seconds" in raw):
            raise ForensicsError(f"{where}: a window needs one of 'size' (calls) or 'seconds'")
    if kind == "period" and (not isinstance(raw.get("period", 2), int) or raw.get("period", 2) < 2):
        raise ForensicsError(f"{where}: 'period' is a whole number of calls, at least 2")
    return Policy(
        name=name,
        type=kind,
        scope=scope,
        stop=raw["stop"],
        description=raw.get("description", ""),
        watch=raw.get("watch"),
        count=raw.get("count", "true" if kind == "budget" else None),
        reset=raw.get("reset"),
        weight=raw.get("weight", "cost_usd" if kind == "budget" else "1"),
        key=raw.get("key"),
        period=int(raw.get("period", 2)),
        size=raw.get("size"),
        seconds=raw.get("seconds"),
        nudge=nudge,
        source=source,
    )


def load_policies(path: Path, source: str | None = None) -> list[Policy]:
    """The policies of a TOML file (``[policy.<name>]`` tables)."""
    source = source or str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ForensicsError(f"not valid TOML: {exc}", path=path) from exc
    except OSError as exc:
        raise ForensicsError(f"cannot read: {exc.strerror or exc}", path=path) from exc
    tables = data.get("policy")
    if not isinstance(tables, dict) or not tables:
        raise ForensicsError("no [policy.<name>] table in the file", path=path)
    return [_policy(name, raw, source) for name, raw in tables.items()]


def all_policies(extra_files: list[str] | None = None) -> list[Policy]:
    """The built-in presets, then the policies of ``extra_files`` (new names only)."""
    found: dict[str, Policy] = {p.name: p for p in load_policies(PRESETS, "built-in")}
    for f in extra_files or []:
        for p in load_policies(Path(f)):
            if p.name in found:
                raise ForensicsError(
                    f"policy {p.name} exists already ({found[p.name].source})", path=f
                )
            found[p.name] = p
    return list(found.values())
