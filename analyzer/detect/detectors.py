"""Detectors: one SQL file each, discovered, bound and run; their rows become incidents.

A detector is ``queries/<name>.sql`` (or a file in a folder given with ``--queries``): a ``--``
comment header, then one query over the canonical tables returning incident rows.

    -- name: constant_input_low_output
    -- title: Same context re-sent, near-empty answers
    -- severity: high
    -- params: min_run=3, max_output_tokens=8, max_gap_seconds=300
    --
    -- A paragraph of forensic reasoning: why this pattern is waste.

The query refers to each parameter as ``$name`` and to nothing else: the declared parameters and
the placeholders used must be the same set. It returns these columns (any order):
``stream_key, session_id, start_ts, end_ts, n_calls, first_call_id, last_call_id, wasted_usd,
wasted_tokens, cost_basis, summary, evidence`` and optionally ``severity`` (else the header's)
and ``wasted_calls`` (the list of call ids the waste is made of; without it, every call of the
stream from the first to the last call is taken). Adding a detector is adding a file; no Python
changes.

A header line ``-- general: true`` makes a detector a general one (``no_progress``: a loop by what
it changes, whatever its shape): its incident is dropped where a named detector's medium or high
incident of the same stream already spans most of its calls (``sql/detect/deferred.sql``, on
whichever engine ran the detectors), so one loop is told once, by the detector that says most.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from analyzer.engine import cache, timings
from analyzer.engine.engine import Params, unit_text
from analyzer.engine.resources import resource_dir
from analyzer.engine.store import Store
from analyzer.errors import ForensicsError
from analyzer.model.formatting import SEVERITIES, severity_order_sql
from analyzer.model.incident import COLUMNS, Incident
from analyzer.model.incident import OUTPUT_COLUMNS as OUTPUT_COLUMNS  # (detectors' columns)

_HEADER = re.compile(r"^--\s?(\w+):\s*(.*)$")
_PLACEHOLDER = re.compile(r"\$([A-Za-z_]\w*)")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
Table = tuple[list[str], list[tuple[Any, ...]]]  # a query's column names and rows


@dataclass
class Detector:
    name: str
    title: str
    severity: str
    params: dict[str, Any]
    reasoning: str
    sql: str
    path: Path
    placeholders: set[str] = field(default_factory=set)
    general: bool = False  # defers to the named detectors where they found the same loop

    def bind(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """The parameters to run with: defaults, then ``overrides`` (which must be declared)."""
        values = dict(self.params)
        for key, value in (overrides or {}).items():
            if key not in self.params:
                raise ForensicsError(
                    f"detector {self.name} has no parameter {key!r} "
                    f"(it has: {', '.join(self.params) or 'none'})"
                )
            values[key] = _coerce(value, self.params[key])
        return values


def _literal(text: str) -> Any:
    text = text.strip()
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text.strip("'\"")


def _coerce(value: Any, default: Any) -> Any:
    if not isinstance(value, str):
        return value
    if isinstance(default, bool):
        if value.lower() not in ("true", "false"):
            raise ForensicsError(f"{value!r} is not true or false")
        return value.lower() == "true"
    if isinstance(default, int | float):
        for cast in (int, float) if isinstance(default, int) else (float,):
            try:
                return cast(value)
            except ValueError:
                pass
        raise ForensicsError(f"{value!r} is not a number")
    return value


def parse(path: Path) -> Detector:
    """Read a detector file; a malformed header is an error naming the file and line."""
    text = path.read_text(encoding="utf-8")
    header: dict[str, str] = {}
    reasoning: list[str] = []
    body_start = 0
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("--"):
            body_start = i
            break
        m = _HEADER.match(line)
        if m and m.group(1) in ("name", "title", "severity", "params", "general") and not reasoning:
            header[m.group(1)] = m.group(2).strip()
        else:
            reasoning.append(line[2:].strip())
    else:
        body_start = len(lines)
    for key in ("name", "title", "severity"):
        if not header.get(key):
            raise ForensicsError(f"detector header has no '-- {key}:' line", path=path, line=1)
    if header["name"] != path.stem or not _NAME.match(header["name"]):
        raise ForensicsError(
            f"detector name {header['name']!r} must be the file name ({path.stem!r}), "
            "lower case with underscores",
            path=path,
            line=1,
        )
    if header["severity"] not in SEVERITIES:
        raise ForensicsError(f"severity must be one of {', '.join(SEVERITIES)}", path=path)
    general = header.get("general", "false").lower()
    if general not in ("true", "false"):
        raise ForensicsError("'-- general:' must be true or false", path=path)
    params: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in header.get("params", "").split(","))):
        if "=" not in item:
            raise ForensicsError(f"parameter {item!r} has no default (name=value)", path=path)
        key, value = item.split("=", 1)
        params[key.strip()] = _literal(value)
    sql = "\n".join(lines[body_start:]).strip().rstrip(";")
    body = re.sub(r"--[^\n]*", "", sql)  # placeholders in comments do not count
    return Detector(
        name=header["name"],
        title=header["title"],
        severity=header["severity"],
        params=params,
        reasoning=" ".join(r for r in reasoning if r).strip(),
        sql=sql,
        path=path,
        placeholders=set(_PLACEHOLDER.findall(body)),
        general=general == "true",
    )


def discover(extra_dirs: list[str] | None = None) -> list[Detector]:
    """The built-in detectors, then those in ``extra_dirs`` (a user's own, which may not reuse
    a built-in name)."""
    found: dict[str, Detector] = {}
    dirs = [resource_dir("queries"), *(Path(d) for d in extra_dirs or [])]
    for folder in dirs:
        if not folder.is_dir():
            raise ForensicsError("not a folder of detectors", path=folder)
        for path in sorted(folder.glob("*.sql")):
            det = parse(path)
            if det.name in found:
                raise ForensicsError(
                    f"a detector named {det.name} exists already ({found[det.name].path})",
                    path=path,
                )
            undeclared = det.placeholders - set(det.params)
            if undeclared:
                raise ForensicsError(
                    f"uses undeclared parameters: {', '.join(sorted(undeclared))}", path=path
                )
            found[det.name] = det
    return list(found.values())


class ParamError(ForensicsError):
    """A ``--param`` or ``--only`` that names no detector or parameter: a usage error."""


def parse_param_overrides(items: list[str]) -> dict[str, dict[str, str]]:
    """``NAME.KEY=VALUE`` options, by detector.

    >>> parse_param_overrides(["constant_input_low_output.min_run=5"])
    {'constant_input_low_output': {'min_run': '5'}}
    """
    out: dict[str, dict[str, str]] = {}
    for item in items:
        m = re.match(r"^([a-z][a-z0-9_]*)\.([A-Za-z_]\w*)=(.*)$", item)
        if not m:
            raise ParamError(f"--param {item!r} is not NAME.KEY=VALUE")
        out.setdefault(m.group(1), {})[m.group(2)] = m.group(3)
    return out


@dataclass
class Selection:
    """The detectors that will run, each with the parameters it runs with (checked once,
    before anything runs)."""

    bound: list[tuple[Detector, dict[str, Any]]]

    @property
    def names(self) -> list[str]:
        return [d.name for d, _ in self.bound]


def select(
    only: list[str] | None = None,
    params: list[str] | None = None,
    queries: list[str] | None = None,
) -> Selection:
    """The built-in detectors and those in ``queries``, limited to ``only``, with ``params``
    (``NAME.KEY=VALUE``) bound: a name or parameter that does not exist is a ParamError."""
    detectors = discover(queries)
    if only:
        names = {d.name for d in detectors}
        unknown = [n for n in only if n not in names]
        if unknown:
            raise ParamError(
                f"no detector named {', '.join(unknown)} (see `llm-forensics detectors`)"
            )
        detectors = [d for d in detectors if d.name in only]
    return bind_all(detectors, parse_param_overrides(params or []))


def bind_all(detectors: list[Detector], overrides: dict[str, dict[str, str]]) -> Selection:
    by_name = {d.name: d for d in detectors}
    unknown = set(overrides) - set(by_name)
    if unknown:
        raise ParamError(f"{', '.join(sorted(unknown))} is not a detector that runs")
    try:
        return Selection([(d, d.bind(overrides.get(d.name))) for d in detectors])
    except ParamError:
        raise
    except ForensicsError as exc:
        raise ParamError(exc.message) from exc


class DetectorEngine(Protocol):
    """The seam where an engine plugs in: all the detector runner asks of one. DuckDB's
    ``Engine`` (a store's ``store.engine``) is one; Spark's (``spark_engine.SparkEngine``,
    over a Parquet export) another. Both take a query in DuckDB's dialect."""

    name: str  # named in a detector's error, unless it is DuckDB (the engine by default)

    def table(self, sql: str, params: Params = None) -> Table:
        """The column names and rows of one query (a detector's text, run as it is)."""
        ...

    def failure(self, exc: Exception) -> str | None:
        """The first line of what the engine said, if ``exc`` is a query's failure; else None
        (an error that is not the query's goes through)."""
        ...


def run_detector(
    engine: DetectorEngine, det: Detector, params: dict[str, Any]
) -> list[dict[str, Any]]:
    """The detector's rows, run on ``engine``, as dicts with the standard columns."""
    bound = {k: v for k, v in params.items() if k in det.placeholders}
    started = time.perf_counter()
    try:
        names, rows = engine.table(det.sql, bound)
    except ForensicsError as exc:  # the engine's own words (Spark: SQL it cannot translate)
        if exc.path is not None:
            raise
        raise ForensicsError(exc.message, path=det.path) from exc
    except Exception as exc:
        said = engine.failure(exc)
        if said is None:
            raise
        where = "" if engine.name == "DuckDB" else f" on {engine.name}"
        raise ForensicsError(f"detector failed{where}: {said}", path=det.path) from exc
    if timings.ON:
        timings.record(f"detector {det.name}", time.perf_counter() - started)
    return checked_rows(det, names, rows)


def checked_rows(
    det: Detector, names: list[str], rows: list[tuple[Any, ...]]
) -> list[dict[str, Any]]:
    """A detector's result (column ``names``, ``rows``) as dicts, checked against the contract
    whichever engine ran it: every standard column, a known severity (else the header's)."""
    missing = [c for c in OUTPUT_COLUMNS if c not in names]
    if missing:
        raise ForensicsError(f"detector returns no column {', '.join(missing)}", path=det.path)
    out = []
    for row in rows:
        rec = dict(zip(names, row, strict=True))
        if rec.get("severity") is None:
            rec["severity"] = det.severity
        if rec["severity"] not in SEVERITIES:
            raise ForensicsError(f"detector returned severity {rec['severity']!r}", path=det.path)
        out.append(rec)
    return out


def incident_id(detector: str, rec: dict[str, Any]) -> str:
    key = f"{detector}|{rec.get('stream_key')}|{rec.get('first_call_id')}|{rec.get('last_call_id')}"
    if rec.get("first_call_id") is None:  # of runs without calls (refused relaunches): its run
        key += f"|{rec.get('session_id')}"
    return f"{detector}:{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def detect(store: Store, selection: Selection, reuse: bool = False) -> list[Incident]:
    """Run the selected detectors on DuckDB, replacing their incidents in the store; returns
    the new incidents.

    With ``reuse``, when these detectors with these parameters already ran over exactly the
    data now in the store, their stored incidents are returned instead of running again."""
    bound = selection.bound
    k = cache.key(
        store, "detect", [(d.name, d.severity, d.sql, p) for d, p in bound], incidents=False
    )
    if reuse and cache.get(store, "detect", k) is not None:
        return load_incidents(store, selection.names)
    with store.transaction():
        record(store, selection, {d.name: run_detector(store.engine, d, v) for d, v in bound})
        cache.put(store, "detect", k, "")
    return load_incidents(store, selection.names)


# A run's own verdict that a loop can have run into (the agent's limit, its stuck detector, an
# error): an incident that lasts to its run's last call is the reason the run ended.
RAN_OUT = ("step_limit", "cost_limit", "context_limit", "format_error", "stuck", "error")
_RAISED = {"low": "medium", "medium": "high"}


def _verdicts(store: Store, sessions: set[str]) -> dict[str, tuple[Any, ...]]:
    """Each session's run verdict (exit status, outcome, result) and its last call."""
    if not sessions:
        return {}
    rows = store.engine.rows("detect/verdicts.sql", {"s": sorted(sessions)})
    return {str(r[0]): r[1:] for r in rows}


def with_verdict(rec: dict[str, Any], verdict: tuple[Any, ...] | None) -> dict[str, Any]:
    """An incident with its run's own verdict: in its evidence when the run did not complete,
    and, when the loop lasted to the run's last call and the run ended on a limit, its stuck
    detector or an error, with its severity raised one step (the log says the loop is why the
    run ended). A verdict alone is no incident: it only ever adds to one."""
    if verdict is None:
        return rec
    status, outcome, result, last_call = verdict
    if outcome in (None, "completed"):
        return rec
    evidence = rec["evidence"]
    evidence = dict(json.loads(evidence)) if isinstance(evidence, str) else dict(evidence or {})
    evidence["run_ended"] = {"exit_status": status, "outcome": outcome, "result": result}
    out = dict(rec)
    if outcome in RAN_OUT and last_call is not None and rec.get("last_call_id") == last_call:
        evidence["ran_to_its_end"] = True
        out["severity"] = _RAISED.get(rec["severity"], rec["severity"])
    out["evidence"] = evidence
    return out


def record(store: Store, selection: Selection, found: dict[str, list[dict[str, Any]]]) -> None:
    """Store what each selected detector ``found`` (its rows, whichever engine ran it) in place
    of its earlier incidents, numbering the new ones (in the caller's transaction); each with
    its run's own verdict (``with_verdict``) and attributed to the app, API key, model and
    project most of its wasted calls carry (``sql/attribute.sql``), once, for every view."""
    with store.engine.step() as e:
        e.register("lf_found", found_table(selection, found, stored_spans(store, selection)))
        found = without(found, deferred(e))
    verdicts = _verdicts(
        store,
        {str(r["session_id"]) for rows in found.values() for r in rows if r.get("session_id")},
    )
    recorded: list[str] = []
    for det, _ in selection.bound:
        store.engine.run("detect/forget.sql", {"detector": det.name})
        for rec in found.get(det.name, []):
            rec = with_verdict(rec, verdicts.get(str(rec.get("session_id"))))
            evidence = rec["evidence"]
            if not isinstance(evidence, str):
                evidence = json.dumps(evidence, default=str)
            row = {
                "incident_id": incident_id(det.name, rec),
                "detector": det.name,
                "severity": rec["severity"],
                **{c: rec[c] for c in OUTPUT_COLUMNS},
                "evidence": evidence,
            }
            row["wasted_usd"] = Decimal(row["wasted_usd"] or 0)
            store.engine.run(
                "INSERT INTO incidents ({{columns}}) VALUES ({{marks}})",
                list(row.values()),
                columns=", ".join(row),
                marks=", ".join("?" * len(row)),
            )
            if row["wasted_usd"] > 0 or rec.get("wasted_calls"):
                _record_wasted_calls(store, row, rec.get("wasted_calls"))
            recorded.append(row["incident_id"])
    if recorded:
        store.engine.run("attribute.sql", {"ids": recorded})
    _number(store)
    _remember_run(store, selection.names)
    cache.bump(store, cache.INCIDENTS)


# What the deferral of the general detectors reads of each incident (``lf_found``).
FOUND_COLUMNS = {
    "incident_id": pa.string(),
    "general": pa.bool_(),
    "severity": pa.string(),
    "first_call_id": pa.string(),
    "last_call_id": pa.string(),
}
Span = tuple[str, bool, str, str | None, str | None]  # a row of lf_found


def found_spans(selection: Selection, found: dict[str, list[dict[str, Any]]]) -> list[Span]:
    """The incidents just ``found`` as rows of ``lf_found`` (their ids as they will be kept)."""
    general = {det.name: det.general for det, _ in selection.bound}
    return [
        (
            incident_id(name, rec),
            general.get(name, False),
            rec["severity"],
            rec.get("first_call_id"),
            rec.get("last_call_id"),
        )
        for name, rows in found.items()
        for rec in rows
    ]


def found_table(
    selection: Selection, found: dict[str, list[dict[str, Any]]], stored: Sequence[Span] = ()
) -> pa.Table:
    """``lf_found`` as an Arrow table: the incidents just found, then ``stored`` ones."""
    rows = [*found_spans(selection, found), *stored]
    cols = list(zip(*rows, strict=True)) or [()] * len(FOUND_COLUMNS)
    return pa.table(
        {n: pa.array(c, t) for (n, t), c in zip(FOUND_COLUMNS.items(), cols, strict=True)}
    )


def stored_spans(store: Store, selection: Selection) -> list[Span]:
    """The store's incidents of the detectors that did not run now (named ones, as far as the
    deferral goes): a general detector run alone defers to them too."""
    rows = store.engine.rows("detect/stored_spans.sql", {"names": selection.names})
    return [(str(a), bool(b), str(c), d, e) for a, b, c, d, e in rows]


def deferred(engine: DetectorEngine) -> set[str]:
    """The ids of the general detectors' incidents in ``lf_found`` that a named detector's
    incident already tells (``sql/detect/deferred.sql``), on ``engine``."""
    started = time.perf_counter()
    _, rows = engine.table(unit_text("detect/deferred.sql"))
    if timings.ON:
        timings.record("detect/deferred.sql", time.perf_counter() - started)
    return {str(r[0]) for r in rows}


def without(
    found: dict[str, list[dict[str, Any]]], ids: set[str]
) -> dict[str, list[dict[str, Any]]]:
    """``found`` less the incidents whose ids are ``ids``."""
    if not ids:
        return found
    return {
        name: [rec for rec in rows if incident_id(name, rec) not in ids]
        for name, rows in found.items()
    }


def _remember_run(store: Store, names: list[str]) -> None:
    """Add ``names`` to the detectors that have run over this store (kept in ``meta``), so a
    page with no incident can say what was checked."""
    known = set(detectors_run(store)) | set(names)
    store.engine.run(
        "detect/meta_put.sql", {"key": "detectors_run", "value": json.dumps(sorted(known))}
    )


def detectors_run(store: Store) -> list[str]:
    """The detectors that have run over this store (by name, sorted)."""
    row = store.engine.one("SELECT value FROM meta WHERE key = 'detectors_run'")
    return list(json.loads(row[0])) if row else []


def _number(store: Store) -> None:
    """Give each incident found for the first time the next number (in order of time), so an
    incident found again keeps its number: the short id ``show N`` takes."""
    store.engine.run("detect/number.sql")


def _record_wasted_calls(store: Store, incident: dict[str, Any], calls: list[str] | None) -> None:
    """Which calls an incident's waste is made of (the backtest prices what a guard saves)."""
    if calls:
        # (one statement with the ids as a list: a statement per call took 0.1 ms each, a
        # second for an incident of 8,000 calls)
        listed = [c for c in dict.fromkeys(calls) if c is not None]
        store.engine.run(
            "INSERT INTO incident_calls SELECT ?, unnest(?::VARCHAR[])",
            [incident["incident_id"], listed],
        )
        return
    store.engine.run(
        "detect/wasted_calls.sql",
        {
            "id": incident["incident_id"],
            "first": incident["first_call_id"],
            "last": incident["last_call_id"],
        },
    )


def wasted_once(store: Store, incidents: list[Incident]) -> Decimal:
    """The dollars ``incidents`` wasted, each wasted call counted once however many of them
    tell it (``sql/detect/wasted_once.sql``)."""
    if not incidents:
        return Decimal(0)
    ids = [i.incident_id for i in incidents]
    return Decimal(store.engine.scalar("detect/wasted_once.sql", {"ids": ids}) or 0)


def load_incidents(store: Store, detectors: list[str] | None = None) -> list[Incident]:
    """The incidents in the store (of ``detectors``, or all), most wasted dollars first."""
    where = "WHERE list_contains($names, i.detector)" if detectors is not None else ""
    rows = store.engine.rows(
        "detect/incidents.sql",
        {"names": detectors} if detectors is not None else {},
        columns=", ".join("i." + c for c in COLUMNS),
        severity_order=severity_order_sql("i.severity"),
        where=where,
    )
    return [Incident.from_row(r) for r in rows]
