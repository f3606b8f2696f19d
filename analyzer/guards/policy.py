"""Guard policies as configuration: their TOML form (read and written), checking it, the
built-in presets; every form a policy is written in (``params``, ``table``, ``to_json``,
``toml_table``) is here.

A guard is what an agent runs online: it sees its calls one at a time and may nudge or stop.
Each policy is one primitive (``analyzer.guards.primitives``: counter, budget, run_length, period,
window; the guard policies of real agents, as sourced in the project's reference notes) with
its own settings.

Every policy has a ``scope`` (``stream``, ``session`` or ``turn``: the unit it lives in - a run
of consecutive calls of one stream sharing the session or turn; each new unit starts it afresh,
a stop ends the unit; or, for a budget, ``day``, ``window`` or ``month``: a period of time
spanning every stream, whose stop ends the rest of the period), an optional ``watch``
predicate (the calls the guard sees at all: the others neither count nor reset), a ``stop``
threshold and an optional ``nudge`` threshold below it (the ladder: nudge at N, stop at M).
Predicates, keys and weights are SQL expressions over one call of the replay; a policy's
expressions are checked against those columns when it is loaded, so a typo is named with the
file and the policy, not met later as a database error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyzer.errors import ForensicsError
from analyzer.guards.expr import compile_expr
from analyzer.guards.primitives import EVENT_COLUMNS, PERIODS, PRIMITIVES, Primitive

if TYPE_CHECKING:
    from analyzer.engine.engine import Engine

SCOPES = ("stream", "session", "turn", *PERIODS)
PRESETS = Path(__file__).resolve().parent / "presets.toml"
_NAME = r"^[a-z][a-z0-9_]*$"  # a policy's name (``re.match``: compiled when first checked)
_COMMON = (
    "description",
    "type",
    "scope",
    "reach",
    "watch",
    "stop",
    "nudge",
    "final_attempt",
    "on_trip",
    "targets",
    "compare",
)
COMPARE = (">=", ">")
ON_TRIP = ("end", "fail")


@dataclass(frozen=True)
class Policy:
    name: str
    type: str
    scope: str
    stop: float
    description: str = ""
    watch: str | None = None
    nudge: float | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # the primitive's own settings
    source: str = "built-in"
    # What a stop ends (turn, session, stream); by default the counter's own scope.
    reach: str | None = None
    # "fail": the tripping call's own output is lost (the user sees an error); "end": the loop
    # ends after it, its output delivered.
    on_trip: str = "end"
    # One last attempt before failing (a nudge one below the stop, kept there when swept).
    final_attempt: bool = False
    # The detectors whose incidents this guard is meant to stop (None: every detector).
    targets: tuple[str, ...] | None = None
    # A trip where the value reaches the threshold (">=") or passes it (">": `count > Max`).
    compare: str = ">="

    @property
    def reaches(self) -> str:
        return self.reach or self.scope

    @property
    def nudge_level(self) -> float | None:
        """Where the guard nudges: its ``nudge``, or for a final attempt, one below the stop."""
        if self.final_attempt:
            return self.stop - 1 if self.stop > 1 else None
        return self.nudge

    def crosses(self, value: str, level: float) -> str:
        """SQL: whether ``value`` has reached ``level`` (or passed it, with ``compare = ">"``)."""
        return f"{value} {self.compare} {level!r}"

    @property
    def primitive(self) -> Primitive:
        return PRIMITIVES[self.type]

    def setting(self, name: str) -> Any:
        """One of the primitive's settings, or its default."""
        if name in self.settings:
            return self.settings[name]
        return self.primitive.defaults.get(name)

    def __getattr__(self, name: str) -> Any:
        # A primitive's settings read as attributes (``p.count``, ``p.period``).
        if name.startswith("_") or name == "settings":
            raise AttributeError(name)
        if name in self.primitive.defaults:
            return self.setting(name)
        raise AttributeError(name)

    def params(self) -> dict[str, Any]:
        """What a user can read and set (``--sweep NAME.PARAM=...``)."""
        out: dict[str, Any] = {"type": self.type, "scope": self.scope}
        if self.reach is not None and self.reach != self.scope:
            out["reach"] = self.reach
        if self.watch is not None:
            out["watch"] = self.watch
        out.update(self.primitive.listed(self))
        if self.nudge_level is not None:
            out["nudge"] = self.nudge_level
        out.update(self._how_it_stops())
        return out

    def _how_it_stops(self) -> dict[str, Any]:
        """The settings every written form of a policy ends with: its stop, and the final
        attempt, comparison and what a trip does where they are not the defaults."""
        out: dict[str, Any] = {"stop": self.stop}
        if self.final_attempt:
            out["final_attempt"] = True
        if self.compare != ">=":
            out["compare"] = self.compare
        if self.on_trip != "end":
            out["on_trip"] = self.on_trip
        return out

    def table(self) -> dict[str, Any]:
        """The policy's settings as its ``[policy.<name>]`` TOML table writes them (what
        ``parse_policy`` reads back), its description left to the writer (``toml_table``).
        Unlike ``params``, what was written: the primitive's settings as set, the nudge as
        set (not a final attempt's), the reach even where it is the scope, the targets."""
        out: dict[str, Any] = {"type": self.type, "scope": self.scope}
        if self.reach is not None:
            out["reach"] = self.reach
        if self.watch is not None:
            out["watch"] = self.watch
        out.update(self.settings)
        if self.nudge is not None and not self.final_attempt:
            out["nudge"] = self.nudge
        out.update(self._how_it_stops())
        if self.targets is not None:
            out["targets"] = list(self.targets)
        return out

    def to_json(self) -> dict[str, Any]:
        """The policy as ``policies --json`` lists it: its name, description, source and
        ``params``."""
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "params": self.params(),
        }

    def with_param(self, name: str, value: float) -> Policy:
        sweepable = ("stop", "nudge", *self.primitive.sweepable)
        if name not in sweepable:
            raise ForensicsError(
                f"{self.name}: {name!r} cannot be swept (thresholds: {', '.join(sweepable)})"
            )
        if name == "stop":
            return replace(self, stop=value)
        if name == "nudge":
            return replace(self, nudge=value)
        if name in ("period", "size"):
            value = int(value)
        return replace(self, settings={**self.settings, name: value})


def parse_policy(name: str, raw: dict[str, Any], source: str) -> Policy:
    """A policy from its TOML table; anything wrong is one message naming source and policy."""
    where = f"{source}: policy {name}"
    if not re.match(_NAME, name):
        raise ForensicsError(f"{where}: a name is lower case letters, digits and underscores")
    kind = raw.get("type")
    if kind not in PRIMITIVES:
        raise ForensicsError(f"{where}: type must be one of {', '.join(PRIMITIVES)}")
    prim = PRIMITIVES[kind]
    unknown = set(raw) - set(_COMMON) - set(prim.defaults)
    if unknown:
        raise ForensicsError(f"{where}: unknown settings {', '.join(sorted(unknown))}")
    scope = raw.get("scope", "session")
    if scope not in SCOPES:
        raise ForensicsError(f"{where}: scope must be one of {', '.join(SCOPES)}")
    stop = raw.get("stop")
    if not isinstance(stop, int | float) or isinstance(stop, bool) or stop <= 0:
        raise ForensicsError(f"{where}: needs a positive 'stop' threshold")
    nudge = raw.get("nudge")
    if nudge is not None and (not isinstance(nudge, int | float) or not 0 < nudge < stop):
        raise ForensicsError(f"{where}: 'nudge' must be a number below 'stop'")
    if scope in PERIODS and kind != "budget":
        raise ForensicsError(f"{where}: only a budget lives in a {scope} (scope)")
    reach = raw.get("reach")
    if reach is not None and reach not in SCOPES:
        raise ForensicsError(f"{where}: reach must be one of {', '.join(SCOPES)}")
    if (scope in PERIODS or reach in PERIODS) and reach not in (None, scope):
        # A period is no stream's unit: its stop ends the rest of the period, in every stream.
        raise ForensicsError(
            f"{where}: reach {reach}: a period's stop ends its own period (day, window, month)"
        )
    on_trip = raw.get("on_trip", "end")
    if on_trip not in ON_TRIP:
        raise ForensicsError(f"{where}: on_trip must be one of {', '.join(ON_TRIP)}")
    final_attempt = raw.get("final_attempt", False)
    if not isinstance(final_attempt, bool) or (final_attempt and nudge is not None):
        raise ForensicsError(
            f"{where}: 'final_attempt' is true or false, and takes the place of 'nudge'"
        )
    compare = raw.get("compare", ">=")
    if compare not in COMPARE:
        raise ForensicsError(f"{where}: compare must be one of {', '.join(COMPARE)}")
    targets = raw.get("targets")
    if targets is not None and (
        not isinstance(targets, list) or not all(isinstance(t, str) for t in targets)
    ):
        raise ForensicsError(f"{where}: 'targets' is a list of detector names")
    for text_field in ("watch", "description", *prim.expressions):
        if text_field in raw and not isinstance(raw[text_field], str):
            raise ForensicsError(f"{where}: '{text_field}' must be a string (an SQL expression)")
    prim.check(raw, where)
    policy = Policy(
        name=name,
        type=kind,
        scope=scope,
        stop=stop,
        description=raw.get("description", ""),
        watch=raw.get("watch"),
        nudge=nudge,
        settings={k: v for k, v in raw.items() if k in prim.defaults},
        source=source,
        reach=reach,
        on_trip=on_trip,
        final_attempt=final_attempt,
        targets=tuple(targets) if targets is not None else None,
        compare=compare,
    )
    check_expressions(policy, where)
    return policy


@cache
def _binder() -> Engine:
    """A connection holding an empty replay table, to bind policy expressions against."""
    import duckdb  # (here: a policy whose expressions compile in Python needs no DuckDB)

    from analyzer.engine.engine import Engine
    from analyzer.engine.store import OFFLINE

    engine = Engine(duckdb.connect(config=OFFLINE))
    cols = ", ".join(f"{c} {t}" for c, t in EVENT_COLUMNS.items())
    engine.run(f"CREATE TABLE lf_events ({cols})")
    return engine


def check_expressions(p: Policy, where: str) -> None:
    """Bind each of the policy's SQL expressions over an empty replay row: a column that does
    not exist is named with the columns that do. An expression that compiles in Python
    (``analyzer.guards.expr``) binds: DuckDB is asked only of the others."""
    for setting in ("watch", *p.primitive.expressions):
        expr = p.watch if setting == "watch" else p.setting(setting)
        if not expr or compile_expr(f"({expr})") is not None:
            continue
        import duckdb

        engine = _binder()
        try:
            engine.run(f"SELECT ({expr}) FROM lf_events LIMIT 0")
        except duckdb.BinderException as exc:
            m = re.search(r'Referenced column "?([^"\s]+)"? not found', str(exc))
            if m:
                raise ForensicsError(
                    f'{where}: unknown column "{m.group(1)}" in {setting} '
                    f"(columns: {', '.join(EVENT_COLUMNS)})"
                ) from None
            raise ForensicsError(f"{where}: {setting}: {str(exc).splitlines()[0]}") from None
        except duckdb.Error as exc:
            raise ForensicsError(
                f"{where}: {setting} is not an SQL expression over one call: "
                f"{str(exc).splitlines()[0]}"
            ) from None


def load_policies(path: Path, source: str | None = None) -> list[Policy]:
    """The policies of a TOML file (``[policy.<name>]`` tables)."""
    source = source or str(path)
    import tomllib  # (here: a policy the hook kept is not read again, nor tomllib imported)

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ForensicsError(f"not valid TOML: {exc}", path=path) from exc
    except OSError as exc:
        raise ForensicsError(f"cannot read: {exc.strerror or exc}", path=path) from exc
    tables = data.get("policy")
    if not isinstance(tables, dict) or not tables:
        raise ForensicsError("no [policy.<name>] table in the file", path=path)
    return [parse_policy(name, raw, source) for name, raw in tables.items()]


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


def toml_value(value: Any) -> str:
    """A value as TOML writes it (a whole float as an integer)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


def toml_table(p: Policy, name: str, description: str, note: str | None = None) -> str:
    """``p`` as a ``[policy.<name>]`` table that ``--policies FILE`` reads back (``table``),
    with its ``description`` first, after a comment line ``note`` when given."""
    fields = {"description": description, **p.table()}
    lines = [] if note is None else [f"# {note}"]
    lines.append(f"[policy.{name}]")
    lines += [f"{k} = {toml_value(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"
