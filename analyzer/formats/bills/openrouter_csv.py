"""OpenRouter activity export (openrouter.ai/activity -> export), CSV or CSV.gz.

The real header has 24 columns (the README lists them). Columns may come in any order;
unknown extra columns are ignored (and named once on stderr); only ``generation_id``,
``created_at``, ``tokens_prompt``, ``tokens_completion`` and ``model_permaslug`` are required.

The file is read by DuckDB's own CSV reader into a staging table of text columns (no Python per
row: the same code takes a 10-million-row export), then typed and checked in SQL; when a stray
quote or a record over its line limit made the reader lose records, it is read again,
carefully (``openrouter_read``). Rows the CSV reader cannot split (too few or too many
fields, bad quoting, an unterminated quote, invalid UTF-8) and rows whose values do not parse
go to ``rejects`` with their line and reason; the rest load.

Line numbers count CSV records with the header as line 1 (a quoted field spanning several
physical lines counts once), the same convention DuckDB's reader uses for its own errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzer.console import warn
from analyzer.engine.engine import Engine
from analyzer.errors import InputError, LoaderBug
from analyzer.formats.bills.openrouter_read import UNITS, stage, store_refused
from analyzer.formats.bills.sessions import (
    interleaved_streams_sql,
    numbered_sql,
    renumber_streams,
    session_id_sql,
)
from analyzer.ingest.base import Head, LoadContext, LoadResult, SourceFile
from analyzer.ingest.spec import FormatSpec

KNOWN_COLUMNS = (
    "generation_id",
    "created_at",
    "cost_total",
    "cost_web_search",
    "cost_cache",
    "cost_file_processing",
    "byok_usage_inference",
    "tokens_prompt",
    "tokens_completion",
    "tokens_reasoning",
    "tokens_cached",
    "model_permaslug",
    "provider_name",
    "variant",
    "cancelled",
    "streamed",
    "user",
    "finish_reason_raw",
    "finish_reason_normalized",
    "generation_time_ms",
    "time_to_first_token_ms",
    "api_key_disabled",
    "api_key_name",
    "app_name",
)
REQUIRED_COLUMNS = (
    "generation_id",
    "created_at",
    "tokens_prompt",
    "tokens_completion",
    "model_permaslug",
)
_DELIMITERS = (",", ";", "\t")

# Date-time layouts accepted for a value without a zone (the export writes the first).
NAIVE_TIME_FORMATS = (
    "%Y-%m-%d %H:%M:%S.%f",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S.%f",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M",
)
MAX_COST_USD = 1_000_000  # a single generation above this is a broken value, not a bill
MAX_TOKENS = 10**12


def _normalise(name: str) -> str:
    return name.strip().lstrip("\ufeff").strip().lower()


def _header(head: Head) -> tuple[list[str], str] | None:
    """The header's column names and the delimiter that gives the most known columns."""
    best: tuple[list[str], str] | None = None
    best_known = 0
    for delim in _DELIMITERS:
        record = head.first_record(delim)
        if not record:
            continue
        names = [_normalise(c) for c in record]
        known = len(set(names) & set(KNOWN_COLUMNS))
        if known > best_known:
            best, best_known = (names, delim), known
    return best


def sniff(head: Head) -> bool:
    header = _header(head)
    return header is not None and len(set(header[0]) & set(KNOWN_COLUMNS)) >= 3


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _typing(names: list[str], tz: str) -> dict[str, str]:
    """The slots of ``typed.sql`` that the header ``names`` and the input zone ``tz`` decide:
    the reader's columns c0..cN cleaned and named, the time layouts, the record's text."""
    index = {name: i for i, name in enumerate(names)}
    first, *other_formats = NAIVE_TIME_FORMATS
    others = "[" + ", ".join(_sql_str(f) for f in other_formats) + "]"

    def column(name: str) -> str:
        return f"c{index[name]}" if name in index else "NULL::VARCHAR"

    def utc(naive: str) -> str:
        if tz.upper() == "UTC":
            return naive
        return f"timezone('UTC', timezone({_sql_str(tz)}, {naive}))"

    values = ", ".join(f"coalesce(c{i}, '')" for i in range(len(names)))
    return {
        "cleaned": _cleaned(len(names)),
        "named": ", ".join(f"{column(name)} AS in_{name}" for name in KNOWN_COLUMNS),
        "export_time": utc(f"try_strptime(in_created_at, {_sql_str(first)})"),
        "other_times": utc(f"try_strptime(in_created_at, {others})"),
        "row_text": f"concat_ws(',', {values})",
    }


def _cleaned(n_columns: int) -> str:
    """The text columns c0..cN without surrounding blanks, empty as NULL. (``trim`` only where
    a value starts or ends with a space: most do not, and trimming every value of every column
    costs more than the rest of the typing together.)"""
    return ", ".join(
        f"NULLIF(CASE WHEN c{i} LIKE ' %' OR c{i} LIKE '% ' THEN trim(c{i}) ELSE c{i} END, '')"
        f" AS c{i}"
        for i in range(n_columns)
    )


def _checked_header(src: SourceFile) -> tuple[list[str], str]:
    """The header's column names and delimiter, or the error that says why the file is not an
    export (unknown columns are named once on stderr)."""
    header = _header(src.head)
    if header is None:
        first = src.head.first_record(",") or []
        shown = ", ".join(_normalise(c) for c in first[:8]) + (", ..." if len(first) > 8 else "")
        raise InputError(
            f"missing required columns {', '.join(REQUIRED_COLUMNS)}: the first line "
            + (f"({shown}) " if shown else "")
            + f"has none of the columns of an {SPEC.title}",
            path=src.display,
            line=1,
        )
    names, delim = header
    seen: set[str] = set()
    for name in names:
        if name in seen and name in KNOWN_COLUMNS:
            raise InputError(f"column {name!r} appears twice in the header", src.display, 1)
        seen.add(name)
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise InputError(
            f"missing required column {', '.join(missing)} "
            f"(an {SPEC.title} needs {', '.join(REQUIRED_COLUMNS)})",
            path=src.display,
            line=1,
        )
    unknown = [n for n in names if n not in KNOWN_COLUMNS]
    if unknown:
        warn(f"{src.display}: ignoring unknown columns: {', '.join(unknown)}")
    return names, delim


@dataclass(frozen=True)
class _Lines:
    """Where the typed rows were in the file: counted from their rowid (the rows of a table
    made inside a transaction are numbered from an offset, ``base``), past the lines of the
    records the reader refused (``refused`` of them; then ``lines.sql`` made ``lf_or_line``)."""

    refused: int
    base: int

    @classmethod
    def of(cls, engine: Engine) -> _Lines:
        refused = int(engine.scalar("SELECT count(DISTINCT line) FROM lf_or_rej"))
        base = int(engine.scalar("SELECT coalesce(min(rowid), 0) FROM lf_or_typed"))
        if refused:
            engine.run(f"{UNITS}/lines.sql", {"base": base})
        return cls(refused, base)

    @property
    def slots(self) -> dict[str, str]:
        """The slots ``line`` and ``line_join`` of the units that say where a row ``t`` was."""
        if self.refused:
            return {"line": "l.line", "line_join": "JOIN lf_or_line l USING (rid)"}
        return {"line": "t.rid - $base + 2", "line_join": ""}


def _accounted(engine: Engine, lines: _Lines) -> tuple[LoadResult, int]:
    """What the file's records are, so far (read, rejected, skipped), and how many typed rows
    cannot load."""
    staged, rejected, headers = engine.one(f"{UNITS}/counts.sql") or (0, 0, 0)
    result = LoadResult()
    result.rows_read = int(lines.refused + staged)
    result.rows_rejected = int(lines.refused + rejected)
    if headers:
        result.rows_skipped = int(headers)
        result.skipped_kinds = {"repeated_header": int(headers)}
    return result, int(rejected)


def _new_rows(engine: Engine, lines: _Lines) -> bool:
    """``lf_or_new``, the rows that load: the first row of each generation_id in the file
    wins; ids already stored are duplicates (only looked for when the store holds calls of
    this format in the file's time range: a new store compares nothing). And
    ``lf_or_inter``, the streams whose new rows do not all come after the stored calls: are
    there any?"""
    fmt = {"fmt": SPEC.name}
    engine.run(f"{UNITS}/repeats.sql")
    engine.run(f"{UNITS}/new.sql", {"base": lines.base}, **lines.slots)
    if engine.scalar("SELECT count(*) FROM lf_or_dups"):
        engine.run(f"{UNITS}/drop_repeats.sql")
    times = "SELECT min(ts), max(ts) FROM lf_or_typed WHERE reject_reason IS NULL"
    lo, hi = engine.one(times) or (None, None)
    # Whether the store holds calls of this format at all (else no stream continues, none is
    # interleaved) and in the file's time range (else no row can be a duplicate).
    if not engine.scalar(
        "SELECT count(*) FROM (SELECT 1 FROM calls WHERE format = $fmt LIMIT 1)", fmt
    ):
        engine.run("CREATE TEMP TABLE lf_or_inter (stream_key VARCHAR)")
        return False
    if lo is not None and engine.scalar(
        f"{UNITS}/stored_in_range.sql", {**fmt, "lo": lo, "hi": hi}
    ):
        engine.run(f"{UNITS}/drop_stored.sql", {**fmt, "lo": lo, "hi": hi})
    streams = interleaved_streams_sql("lf_or_new")
    engine.run("CREATE TEMP TABLE lf_or_inter AS {{streams}}", fmt, streams=streams)
    return bool(engine.scalar("SELECT count(*) FROM lf_or_inter"))


def _number(engine: Engine, ctx: LoadContext) -> None:
    """``lf_or_seq``: every typed row, in order, with its place in its stream and session."""
    engine.run(f"{UNITS}/streams.sql")
    engine.run(
        f"{UNITS}/numbered.sql",
        {"fmt": SPEC.name, "gap": ctx.options.session_gap_s},
        numbered=numbered_sql("lf_or_rows", "lf_or_sk"),
    )
    misaligned = int(engine.scalar(f"{UNITS}/misaligned.sql"))
    if misaligned:  # never: both tables hold the typed rows in their order
        raise LoaderBug(
            f"{misaligned} staged rows out of order (a bug in llm-forensics; nothing from this "
            "file was stored)",
            path=ctx.source.display,
        )


def load(ctx: LoadContext) -> LoadResult:
    names, delim = _checked_header(ctx.source)
    engine = ctx.engine
    with engine.step():  # the lf_or_* tables live as long as the load
        ctx.stage("reading")
        # The typed rows and why each cannot load, and the records the reader refused: fast,
        # and again carefully when a stray quote or a long line made the reader lose records.
        limits = {"max_tokens": MAX_TOKENS, "max_usd": MAX_COST_USD}
        stage(engine, ctx, names, delim, _typing(names, ctx.options.tz), limits)
        lines = _Lines.of(engine)
        result, rejected = _accounted(engine, lines)
        store_refused(engine, ctx.source_id)
        if rejected:
            engine.run(
                f"{UNITS}/rejects.sql", {"sid": ctx.source_id, "base": lines.base}, **lines.slots
            )
        ctx.stage("de-duplicating")
        interleaved = _new_rows(engine, lines)
        _number(engine, ctx)
        ctx.stage("storing")
        inserted = engine.scalar(
            f"{UNITS}/store.sql",
            {"prefix": SPEC.call_prefix, "sid": ctx.source_id, "fmt": SPEC.name},
            session_id=session_id_sql("stream_key", "session_start"),
        )
        result.rows_loaded = int(inserted or 0)
        good = result.rows_read - result.rows_rejected - result.rows_skipped
        result.rows_duplicate = good - result.rows_loaded
        if interleaved:
            renumber_streams(engine, SPEC.name, "lf_or_inter", ctx.options.session_gap_s)
    return result


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="openrouter_csv",
    title="OpenRouter activity export (CSV)",
    kind="bill",
    sniff_order=10,
    call_prefix="or:",
    sniff=sniff,
    load=load,
)
