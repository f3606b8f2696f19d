"""The engine: the one object that runs SQL on a store's connection.

Every multi-line statement lives in a file under ``analyzer/sql/`` and is named by its path
there (``"guards/events.sql"``); a one-line statement may be given as text. The engine owns:

* **the connection** - nothing outside ``analyzer/engine/`` calls ``execute`` (the
  architecture test checks it);
* **the parameters** - DuckDB's named markers (``$name``): each statement of a unit is given
  the parameters it names, so one mapping serves a file of several statements;
* **names put into the text** - a table, a column list or a predicate the code chose (never
  a value from a log): ``{{name}}`` in a unit, given as a keyword argument; an unknown or
  missing one is an error, not an empty string;
* **the lifetime of a step's temporary relations** - what ``step()`` sees created (temporary
  tables and views, registered Arrow tables) is dropped when the step ends, however it ends.

A unit holds one statement or several, each ended by ``;`` at the end of a line. Order that
matters is stated in the SQL (``ORDER BY``, an explicit position), never left to a join.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:  # (a command that builds no Arrow table never imports pyarrow)
    import pyarrow as pa

from analyzer.engine import timings
from analyzer.errors import ForensicsError

SQL_DIR = Path(__file__).resolve().parents[1] / "sql"

Params = Mapping[str, object] | Sequence[object] | None

_UNIT = re.compile(r"[\w/.-]+\.sql")
_SLOT = re.compile(r"\{\{(\w+)\}\}")
_MARKER = re.compile(r"\$([A-Za-z_]\w*)")
_COMMENT = re.compile(r"--[^\n]*")
_END = re.compile(r";[ \t]*(?:--[^\n]*)?\n")


# What a statement that fails raises: DuckDB's own errors (for a caller that has a way round),
# and of them what Ctrl-C raises inside a statement (never a failure to go round).
StatementFailed = duckdb.Error
StatementStopped = duckdb.InterruptException

# Fully offline: DuckDB never downloads or loads an extension on its own (what we use, json and
# icu, is built into the wheel).
OFFLINE: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}


class EngineError(ForensicsError):
    """A unit that is missing, or a name put into its text that is unknown or absent."""


@cache
def unit_text(unit: str) -> str:
    """The text of ``sql/<unit>`` (read once per process)."""
    path = SQL_DIR / unit
    if not path.is_file():
        raise EngineError(f"no SQL unit {unit} in the package")
    return path.read_text(encoding="utf-8")


@cache
def statements(text: str) -> tuple[str, ...]:
    """The statements of a unit: split where ``;`` ends a line, empty ones dropped.

    >>> statements("SELECT 1;\\nSELECT 2;  -- two\\n")
    ('SELECT 1', 'SELECT 2')
    """
    parts = _END.split(text + "\n")
    return tuple(p.strip().rstrip(";").strip() for p in parts if _meaningful(p))


def _meaningful(part: str) -> bool:
    lines = [ln for ln in part.strip().splitlines() if not ln.strip().startswith("--")]
    return bool("".join(lines).strip())


def fill(text: str, names: Mapping[str, str]) -> str:
    """Put the named fragments into ``{{slots}}``; every slot must be given, every given name
    used. A slot named in a ``--`` comment (as a unit's opening comment names what it takes) is
    left as it is.

    >>> fill("SELECT * FROM {{table}} -- {{table}}: the calls", {"table": "calls"})
    'SELECT * FROM calls -- {{table}}: the calls'
    """
    used: set[str] = set()

    def put(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            raise EngineError(f"SQL slot {{{{{m.group(1)}}}}} given no text")
        used.add(m.group(1))
        return names[m.group(1)]

    def line(text: str) -> str:
        code, dashes, comment = text.partition("--")
        return _SLOT.sub(put, code) + dashes + comment

    out = "\n".join(line(text) for text in text.split("\n"))
    if set(names) - used:
        raise EngineError(f"SQL names given but not used: {sorted(set(names) - used)}")
    return out


def _bind(sql: str, params: Params) -> Params:
    """The parameters a statement takes: with named markers, only the names it uses (a
    ``$name`` in a comment, as a unit's opening comment names its parameters, is not one)."""
    if params is None or not isinstance(params, Mapping):
        return params
    wanted = set(_MARKER.findall(_COMMENT.sub("", sql)))
    return {k: v for k, v in params.items() if k in wanted}


class Engine:
    """Runs SQL units and one-line statements on one DuckDB connection."""

    name = "DuckDB"  # (the detectors' seam: ``analyzer.detect.detectors.DetectorEngine``)

    @classmethod
    def scratch(cls) -> Engine:
        """An in-memory DuckDB, offline, apart from any store (for reading files with DuckDB's
        own readers where no store is open, or away from a store's transaction)."""
        return cls(duckdb.connect(":memory:", config=OFFLINE))

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._registered: list[set[str]] = []  # per open step, the Arrow tables it registered
        self._lent: dict[str, _Lent] = {}  # the Arrow tables registered, by name

    # -- text ---------------------------------------------------------------------------
    def text(self, sql: str, names: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """The statements of ``sql``: a unit's path (``"x/y.sql"``) or one statement's text."""
        body = unit_text(sql) if _UNIT.fullmatch(sql) else sql
        if names or _SLOT.search(body):
            body = fill(body, names or {})
        return statements(body)

    # -- running ------------------------------------------------------------------------
    def _cursor(self, sql: str, params: Params, names: Mapping[str, str]) -> Any:
        result = None
        started = time.perf_counter() if timings.ON else 0.0
        for statement in self.text(sql, names):
            result = self.con.execute(statement, _bind(statement, params))
        if timings.ON:
            timings.record(sql, time.perf_counter() - started)
        if result is None:
            raise EngineError(f"no statement in {sql[:60]!r}")
        return result

    def run(self, sql: str, params: Params = None, **names: str) -> None:
        """Run every statement of ``sql`` (a unit or one statement), for what it does."""
        self._cursor(sql, params, names)

    def many(self, sql: str, rows: Sequence[Sequence[object]], **names: str) -> None:
        """Run one statement once per row of parameters."""
        (statement,) = self.text(sql, names)
        started = time.perf_counter() if timings.ON else 0.0
        self.con.executemany(statement, rows)
        if timings.ON:
            timings.record(sql, time.perf_counter() - started)

    def rows(self, sql: str, params: Params = None, **names: str) -> list[tuple[Any, ...]]:
        """The rows of the last statement of ``sql``."""
        return list(self._cursor(sql, params, names).fetchall())

    def records(self, sql: str, params: Params = None, **names: str) -> list[dict[str, Any]]:
        """The rows of the last statement as dicts by column name."""
        cur = self._cursor(sql, params, names)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    def one(self, sql: str, params: Params = None, **names: str) -> tuple[Any, ...] | None:
        """The first row, or None (the whole result is fetched: DuckDB refuses other work on
        a connection while a result is only partly read)."""
        found = self.rows(sql, params, **names)
        return found[0] if found else None

    def scalar(self, sql: str, params: Params = None, **names: str) -> Any:
        row = self.one(sql, params, **names)
        return None if row is None else row[0]

    def arrow(self, sql: str, params: Params = None, **names: str) -> pa.Table:
        """The result of the last statement (a query) as an Arrow table, read as a relation
        (a cursor's result would be copied once more on its way to Arrow)."""
        if timings.ON:
            started = time.perf_counter()
            try:
                return self._arrow(sql, params, names)
            finally:
                timings.record(sql, time.perf_counter() - started)
        return self._arrow(sql, params, names)

    def _arrow(self, sql: str, params: Params, names: Mapping[str, str]) -> pa.Table:
        *before, last = self.text(sql, names)
        for statement in before:
            self.con.execute(statement, _bind(statement, params))
        self.con.complete()  # (a result of execute() left unread blocks a relation)
        relation = self.con.sql(last, params=_bind(last, params))
        if relation is None:
            raise EngineError(f"the last statement of {sql[:60]!r} is no query")
        return relation.to_arrow_table()

    def columns(self, sql: str, params: Params = None, **names: str) -> list[str]:
        """The column names of the last statement's result."""
        return [d[0] for d in self._cursor(sql, params, names).description]

    def table(self, sql: str, params: Params = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The column names and rows of one query given as its text and run as it is: not
        split at semicolons, no slots filled (a query from a user's file: a detector, whose
        time its caller counts, ``timings``)."""
        cur = self.con.execute(sql, _bind(sql, params))
        return [d[0] for d in cur.description], list(cur.fetchall())

    @staticmethod
    def failure(exc: Exception) -> str | None:
        """The first line of what DuckDB said, if ``exc`` is DuckDB's; else None."""
        return str(exc).splitlines()[0] if isinstance(exc, duckdb.Error) else None

    # -- relations a step owns ----------------------------------------------------------
    def register(self, name: str, table: pa.Table) -> None:
        """Make an Arrow table readable as ``name`` until the step that registered it ends
        (or ``unregister``, or another table is registered as ``name``): then the table is let
        go, even inside a transaction that keeps the name's view until it commits (``_Lent``)."""
        lent = _Lent(table)
        self.con.register(name, lent)
        self._let_go(name)
        self._lent[name] = lent
        if self._registered:
            self._registered[-1].add(name)

    def unregister(self, name: str) -> None:
        self.con.unregister(name)
        self._let_go(name)
        for names in self._registered:
            names.discard(name)

    def _let_go(self, name: str) -> None:
        lent = self._lent.pop(name, None)
        if lent is not None:
            lent.table = None

    def temporaries(self) -> set[tuple[str, str]]:
        """The temporary tables and views that exist now: (kind, name)."""
        found = self.rows("engine/temporaries.sql")
        return {(str(kind), str(name)) for kind, name in found}

    def begin(self) -> Step:
        """A step ended by ``Step.end`` rather than by a ``with`` block: for one that outlives
        the call that began it (a guard replay's, from its construction to its ``close``)."""
        return Step(self)

    @contextmanager
    def step(self) -> Iterator[Engine]:
        """A step of work: the temporary tables and views it creates and the Arrow tables it
        registers are gone when it ends, whether it ends well or not."""
        began = self.begin()
        try:
            yield self
        finally:
            began.end()


class _Lent:
    """An Arrow table lent to DuckDB as a view (``Engine.register``), read through Arrow's C
    stream interface. DuckDB keeps a view dropped inside a transaction until the transaction
    commits (for a rollback), and with it what the view reads: a long log written in parts in
    its one transaction kept every part's rows so (a copy of the whole file). It keeps this
    holder instead, which lets go of the table when the step that lent it ends."""

    def __init__(self, table: pa.Table) -> None:
        self.table: pa.Table | None = table

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        if self.table is None:
            raise EngineError("an Arrow table read after the step that registered it ended")
        return self.table.__arrow_c_stream__(requested_schema)


class Step:
    """A step of an engine's work (``Engine.step``, ``Engine.begin``): what it sees created
    (temporary tables and views, registered Arrow tables) is dropped by ``end``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.before = engine.temporaries()
        self.registered: set[str] = set()
        engine._registered.append(self.registered)
        self.ended = False

    def end(self) -> None:
        """Drop what the step created (once; a second call does nothing)."""
        if self.ended:
            return
        self.ended = True
        engine = self.engine
        engine._registered[:] = [r for r in engine._registered if r is not self.registered]
        for name in self.registered:
            with suppress(duckdb.Error):
                engine.con.unregister(name)
            engine._let_go(name)
        made: set[tuple[str, str]] = set()
        # (not on a transaction an error aborted: its rollback drops what it made, and the
        # error that aborted it is the one to see)
        with suppress(duckdb.Error):
            made = engine.temporaries() - self.before
        for kind, name in sorted(made, reverse=True):
            with suppress(duckdb.Error):  # a connection Ctrl-C or an error left unusable
                engine.con.execute(f'DROP {kind} IF EXISTS temp.main."{name}"')
