"""OpenRouter activity export (openrouter.ai/activity -> export), CSV or CSV.gz.

The real header has 24 columns (the README lists them). Columns may come in any order;
unknown extra columns are ignored (and named once on stderr); only ``generation_id``,
``created_at``, ``tokens_prompt``, ``tokens_completion`` and ``model_permaslug`` are required.

The file is read by DuckDB's own CSV reader into a staging table of text columns (no Python per
row: the same code takes a 10-million-row export), then typed and checked in SQL; when a stray
quote or a record over its line limit made the reader lose records, it is read again, carefully
(analyzer.ingest.openrouter_read). Rows the CSV reader cannot split (too few or too many fields,
bad quoting, an unterminated quote, invalid UTF-8) and rows whose values do not parse go to
``rejects`` with their line and reason; the rest load.

Line numbers count CSV records with the header as line 1 (a quoted field spanning several
physical lines counts once), the same convention DuckDB's reader uses for its own errors.
"""

from __future__ import annotations

import duckdb

from analyzer.console import warn
from analyzer.errors import InputError, LoaderBug
from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.openrouter_read import TABLES, stage, store_refused
from analyzer.ingest.sessions import (
    interleaved_streams_sql,
    numbered_sql,
    renumber_streams,
    session_id_sql,
)
from analyzer.ingest.spec import FormatSpec

NAME = "openrouter_csv"
TITLE = "OpenRouter activity export (CSV)"
CALL_PREFIX = "or:"
KIND = "bill"
SNIFF_ORDER = 10

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


def _q(expr: str) -> str:
    """SQL for a raw value shown in a reject reason: quoted and cut to 60 characters."""
    return f"'\"' || left({expr}, 60) || '\"'"


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class _Columns:
    """SQL expressions over the staging table, by export column name."""

    def __init__(self, names: list[str]) -> None:
        self.index = {name: i for i, name in enumerate(names)}

    def raw(self, name: str) -> str:
        i = self.index.get(name)
        return f"c{i}" if i is not None else "NULL::VARCHAR"

    def text(self, name: str) -> str:
        """The value (the source has trimmed it and made empty NULL: see ``_cleaned``)."""
        return self.raw(name)


def _cleaned(n_columns: int, source: str) -> str:
    """``source``'s text columns without surrounding blanks, empty as NULL. (``trim`` only where
    a value starts or ends with a space: most do not, and trimming every value of every column
    costs more than the rest of the typing together.)"""
    cols = ", ".join(
        f"NULLIF(CASE WHEN c{i} LIKE ' %' OR c{i} LIKE '% ' THEN trim(c{i}) ELSE c{i} END, '')"
        f" AS c{i}"
        for i in range(n_columns)
    )
    return f"(SELECT {cols} FROM {source})"


def _typed_select(cols: _Columns, n_columns: int, tz: str, source: str) -> str:
    """SELECT over ``source`` (the CSV, as text columns c0..cN) giving typed values and, per
    row, why it cannot load (NULL when it can). The raw row text is kept for rejects only."""
    t = cols.text
    created = t("created_at")
    first, *other_formats = NAIVE_TIME_FORMATS
    others = "[" + ", ".join(_sql_str(f) for f in other_formats) + "]"

    def to_utc(naive: str) -> str:
        if tz.upper() == "UTC":
            return naive
        return f"timezone('UTC', timezone({_sql_str(tz)}, {naive}))"

    # The export's own layout first (cheap); then other layouts, an explicit zone or offset
    # (taken at its word), and epoch seconds (UTC). COALESCE evaluates a branch only for the
    # rows the earlier ones left NULL.
    ts = f"""coalesce(
        {to_utc(f"try_strptime({created}, {_sql_str(first)})")},
        CASE WHEN regexp_matches({created}, '(Z|[+-]\\d\\d:?\\d\\d)$')
                 THEN TRY_CAST({created} AS TIMESTAMPTZ)::TIMESTAMP
             WHEN regexp_matches({created}, '^\\d{{9,10}}(\\.\\d+)?$')
                 THEN to_timestamp(TRY_CAST({created} AS DOUBLE))::TIMESTAMP
             ELSE {to_utc(f"try_strptime({created}, {others})")} END)"""

    int_cols = (
        "tokens_prompt",
        "tokens_completion",
        "tokens_reasoning",
        "tokens_cached",
    )
    money_cols = (
        "cost_total",
        "cost_web_search",
        "cost_cache",
        "cost_file_processing",
        "byok_usage_inference",
    )
    ms_cols = ("generation_time_ms", "time_to_first_token_ms")
    bool_cols = ("cancelled", "streamed", "api_key_disabled")

    select = [
        f"{t('generation_id')} AS generation_id",
        f"{created} AS created_at_raw",
        f"{ts} AS ts",
        f"{t('model_permaslug')} AS model",
        f"{t('provider_name')} AS provider",
        f"{t('variant')} AS variant",
        f"{t('user')} AS user_id",
        f"{t('api_key_name')} AS api_key",
        f"{t('app_name')} AS app",
        f"{t('finish_reason_raw')} AS finish_raw",
        f"{t('finish_reason_normalized')} AS finish_norm",
    ]
    for name in int_cols + money_cols + ms_cols:
        select.append(f"{t(name)} AS {name}_raw")
        select.append(f"TRY_CAST({t(name)} AS DOUBLE) AS {name}_d")
    for name in bool_cols:
        select.append(f"{t(name)} AS {name}_raw")
        select.append(f"TRY_CAST({t(name)} AS BOOLEAN) AS {name}")
    select.append(
        f"coalesce(lower({t('generation_id')}) = 'generation_id' "
        f"OR lower({created}) = 'created_at', false) AS is_header"
    )

    # Why a row cannot load: the first failing check, in this order.
    checks: list[tuple[str, str]] = [
        ("generation_id IS NULL", "'generation_id is empty'"),
        ("created_at_raw IS NULL", "'created_at is empty'"),
        (
            "ts IS NULL",
            f"'created_at: cannot read ' || {_q('created_at_raw')} || ' as a date-time'",
        ),
        ("model IS NULL", "'model_permaslug is empty'"),
    ]
    for name in int_cols:
        if name in REQUIRED_COLUMNS:
            checks.append((f"{name}_raw IS NULL", f"'{name} is empty'"))
        bad = (
            f"{name}_raw IS NOT NULL AND ({name}_d IS NULL OR isnan({name}_d) "
            f"OR isinf({name}_d) OR {name}_d < 0 OR {name}_d <> floor({name}_d) "
            f"OR {name}_d >= {MAX_TOKENS})"
        )
        checks.append(
            (bad, f"'{name}: ' || {_q(name + '_raw')} || ' is not a whole number of tokens'")
        )
    for name in money_cols:
        lower = "" if name == "cost_cache" else f" OR {name}_d < 0"
        bad = (
            f"{name}_raw IS NOT NULL AND ({name}_d IS NULL OR isnan({name}_d) "
            f"OR isinf({name}_d) OR abs({name}_d) >= {MAX_COST_USD}{lower})"
        )
        sign = "an amount of USD" if name == "cost_cache" else "a non-negative amount of USD"
        checks.append((bad, f"'{name}: ' || {_q(name + '_raw')} || ' is not {sign}'"))
    for name in ms_cols:
        bad = (
            f"{name}_raw IS NOT NULL AND ({name}_d IS NULL OR isnan({name}_d) "
            f"OR isinf({name}_d) OR {name}_d < 0)"
        )
        checks.append((bad, f"'{name}: ' || {_q(name + '_raw')} || ' is not a duration in ms'"))
    for name in bool_cols:
        checks.append(
            (
                f"{name}_raw IS NOT NULL AND {name} IS NULL",
                f"'{name}: ' || {_q(name + '_raw')} || ' is not true or false'",
            )
        )
    reason = "CASE " + " ".join(f"WHEN {c} THEN {m}" for c, m in checks) + " END"
    keep = [
        "generation_id",
        "ts",
        "model",
        "provider",
        "variant",
        "user_id",
        "api_key",
        "app",
        "finish_raw",
        "finish_norm",
        "is_header",
        *(f"{n}_d" for n in int_cols + money_cols + ms_cols),
        *bool_cols,
    ]
    row_text = "concat_ws(',', " + ", ".join(f"coalesce(c{i}, '')" for i in range(n_columns))
    return f"""
        SELECT {", ".join(keep)}, reject_reason,
               CASE WHEN reject_reason IS NOT NULL THEN left({row_text}), 300) END AS excerpt
        FROM (SELECT *, CASE WHEN is_header THEN NULL ELSE {reason} END AS reject_reason
              FROM (SELECT *, {", ".join(select)} FROM {source}))
    """


_TEMP_TABLES = (
    *TABLES,
    "lf_or_thr",
    "lf_or_dups",
    "lf_or_new",
    "lf_or_inter",
    "lf_or_sk",
    "lf_or_seq",
)


def _stream_key(t: str) -> str:
    """A bill's stream (api key, app, user, model) from the typed row ``t``."""
    return (
        f"coalesce({t}.api_key, '') || '|' || coalesce({t}.app, '') || '|' "
        f"|| coalesce({t}.user_id, '') || '|' || {t}.model"
    )


def load(ctx: LoadContext) -> LoadResult:
    con, src = ctx.con, ctx.source
    header = _header(src.head)
    if header is None:
        first = src.head.first_record(",") or []
        shown = ", ".join(_normalise(c) for c in first[:8]) + (", ..." if len(first) > 8 else "")
        raise InputError(
            f"missing required columns {', '.join(REQUIRED_COLUMNS)}: the first line "
            + (f"({shown}) " if shown else "")
            + f"has none of the columns of an {TITLE}",
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
            f"(an {TITLE} needs {', '.join(REQUIRED_COLUMNS)})",
            path=src.display,
            line=1,
        )
    unknown = [n for n in names if n not in KNOWN_COLUMNS]
    if unknown:
        warn(f"{src.display}: ignoring unknown columns: {', '.join(unknown)}")

    for table in _TEMP_TABLES:
        con.execute(f"DROP TABLE IF EXISTS {table}")
    ctx.stage("reading")
    # The typed rows and why each cannot load, and the records the reader refused: fast, and
    # again carefully when a stray quote or a long line made the reader lose records.
    stage(
        ctx,
        names,
        delim,
        lambda reader: _typed_select(
            _Columns(names), len(names), ctx.options.tz, _cleaned(len(names), reader)
        ),
    )
    # Records the CSV reader refused (record lines, header = 1); good records' lines skip them.
    con.execute(
        """CREATE TEMP TABLE lf_or_thr AS
           SELECT t, max(cnt) AS cnt FROM (
               SELECT line - 2 - (row_number() OVER (ORDER BY line) - 1) AS t,
                      row_number() OVER (ORDER BY line) AS cnt
               FROM (SELECT DISTINCT line FROM lf_or_rej)) GROUP BY t"""
    )
    structural = _count(con, "SELECT count(DISTINCT line) FROM lf_or_rej")
    # Rows of a table made inside a transaction are numbered from an offset, in order.
    base = _count(con, "SELECT coalesce(min(rowid), 0) FROM lf_or_typed")
    if structural:
        line_sql = f"""(SELECT r.rid, r.rid - {base} + 2 + coalesce(thr.cnt, 0) AS line
                        FROM (SELECT rowid AS rid FROM lf_or_typed) r
                        ASOF LEFT JOIN lf_or_thr thr ON r.rid - {base} >= thr.t)"""
    else:
        line_sql = f"(SELECT rowid AS rid, rowid - {base} + 2 AS line FROM lf_or_typed)"

    staged, rejected, headers = con.execute(
        """SELECT count(*), count(reject_reason), count(*) FILTER (WHERE is_header)
           FROM lf_or_typed"""
    ).fetchall()[0]
    result = LoadResult()
    result.rows_read = int(structural + staged)
    result.rows_rejected = int(structural + rejected)
    if headers:
        result.rows_skipped = int(headers)
        result.skipped_kinds = {"repeated_header": int(headers)}

    store_refused(con, ctx.source_id)
    if rejected:
        con.execute(
            f"""INSERT INTO rejects
                SELECT $sid, l.line, t.reject_reason, t.excerpt
                FROM (SELECT rowid AS rid, * FROM lf_or_typed
                      WHERE reject_reason IS NOT NULL) t
                JOIN {line_sql} l USING (rid)""",
            {"sid": ctx.source_id},
        )

    ctx.stage("de-duplicating")
    # The first row of each generation_id in the file wins; ids already stored are duplicates
    # (the same generation has the same created_at, so only that time range is compared, and
    # only when the store holds calls of this format in it: a new store compares nothing).
    con.execute(
        """CREATE TEMP TABLE lf_or_dups AS
           SELECT generation_id, min(rid) AS keep
           FROM (SELECT rowid AS rid, generation_id FROM lf_or_typed
                 WHERE reject_reason IS NULL AND NOT is_header AND hash(generation_id) IN (
                   SELECT hash(generation_id) FROM lf_or_typed  -- numbers group fast
                   WHERE reject_reason IS NULL AND NOT is_header GROUP BY 1 HAVING count(*) > 1))
           GROUP BY generation_id HAVING count(*) > 1"""
    )
    lo, hi = con.execute(
        "SELECT min(ts), max(ts) FROM lf_or_typed WHERE reject_reason IS NULL"
    ).fetchall()[0]
    # Whether the store holds calls of this format at all (else no stream continues, none is
    # interleaved) and in the file's time range (else no row can be a duplicate).
    stored_sql = "SELECT count(*) FROM (SELECT 1 FROM calls WHERE format = $fmt {} LIMIT 1)"
    any_stored = _count(con, stored_sql.format(""), {"fmt": NAME})
    stored = (
        any_stored
        and lo is not None
        and _count(
            con, stored_sql.format("AND ts BETWEEN $lo AND $hi"), {"fmt": NAME, "lo": lo, "hi": hi}
        )
    )
    conditions = ["t.reject_reason IS NULL", "NOT t.is_header"]
    if _count(con, "SELECT count(*) FROM lf_or_dups"):
        conditions.append(
            """NOT EXISTS (SELECT 1 FROM lf_or_dups d
                           WHERE d.generation_id = t.generation_id AND d.keep <> t.rid)"""
        )
    if stored:
        conditions.append(
            """NOT EXISTS (SELECT 1 FROM calls c
                           WHERE c.format = $fmt AND c.native_id = t.generation_id
                             AND c.ts BETWEEN $lo AND $hi)"""
        )
    # The rows that load, narrow (where each is, its stream, time and id): the sessions are
    # numbered over these few columns, not over whole rows, and the typed rows are read once
    # more only to be stored, beside their numbers (both tables in the file's row order).
    lines = (
        f"JOIN {line_sql} l USING (rid)" if structural else f"CROSS JOIN (SELECT {base}) l(base)"
    )
    line = "l.line" if structural else "t.rid - l.base + 2"
    con.execute(
        f"""CREATE TEMP TABLE lf_or_new AS
        SELECT t.rid, {line} AS line, {_stream_key("t")} AS stream_key,
               t.ts, t.generation_id AS native_id
        FROM (SELECT rowid AS rid, reject_reason, is_header, generation_id, ts, api_key, app,
                     user_id, model FROM lf_or_typed) t
        {lines}
        WHERE {" AND ".join(conditions)}""",
        {"fmt": NAME, "lo": lo, "hi": hi} if stored else {},
    )
    if not any_stored:  # nothing stored of this format: no stream can interleave
        con.execute("CREATE TEMP TABLE lf_or_inter (stream_key VARCHAR)")
    else:
        con.execute(
            f"CREATE TEMP TABLE lf_or_inter AS {interleaved_streams_sql('lf_or_new')}",
            {"fmt": NAME},
        )
    # Streams get integer ids, so the sessions are numbered sorting numbers, not text.
    con.execute(
        """CREATE TEMP TABLE lf_or_sk AS
           SELECT stream_key, (row_number() OVER ())::INTEGER AS sk
           FROM (SELECT DISTINCT stream_key FROM lf_or_new)"""
    )
    # Every typed row, in order, with its place in its stream (NULL for a row that does not
    # load), so the store reads the two side by side (POSITIONAL JOIN) instead of joining. The
    # stream key and session id are not carried: the store rebuilds them from the typed row.
    rows = """(SELECT n.rid, n.line, k.sk, n.ts, n.native_id
                FROM lf_or_new n JOIN lf_or_sk k USING (stream_key))"""
    con.execute(
        f"""CREATE TEMP TABLE lf_or_seq AS
        SELECT r.rid, s.line, s.seq, s.session_start, s.session_given
        FROM (SELECT rowid AS rid FROM lf_or_typed) r
        LEFT JOIN ({numbered_sql(rows, "lf_or_sk")}) s USING (rid)
        ORDER BY r.rid""",
        {"fmt": NAME, "gap": ctx.options.session_gap_s},
    )
    misaligned = _count(
        con,
        """SELECT count(*) FROM (SELECT rowid AS rid FROM lf_or_typed) t
           POSITIONAL JOIN (SELECT rid AS seq_rid FROM lf_or_seq) s
           WHERE t.rid IS DISTINCT FROM s.seq_rid""",
    )
    if misaligned:  # never: both tables hold the typed rows in their order
        raise LoaderBug(
            f"{misaligned} staged rows out of order (a bug in llm-forensics; nothing from this "
            "file was stored)",
            path=src.display,
        )
    params = {"sid": ctx.source_id, "fmt": NAME}
    ctx.stage("storing")
    inserted = con.execute(
        f"""INSERT INTO calls BY NAME
        SELECT
            {_sql_str(CALL_PREFIX)} || generation_id AS call_id,
            $sid AS source_id,
            $fmt AS format,
            generation_id AS native_id, line, ts, stream_key, seq,
            CASE WHEN session_start IS NULL THEN session_given
                 ELSE {session_id_sql("stream_key", "session_start")} END AS session_id,
            model, provider, app, app AS project, api_key, user_id, variant,
            tokens_prompt_d::BIGINT AS input_tokens,
            tokens_cached_d::BIGINT AS cached_input_tokens,
            tokens_completion_d::BIGINT AS output_tokens,
            tokens_reasoning_d::BIGINT AS reasoning_tokens,
            true AS output_final,
            cost_total_d::DECIMAL(18, 10) AS cost_usd,
            CASE WHEN cost_total_d IS NOT NULL THEN 'billed' END AS cost_basis,
            cost_cache_d::DECIMAL(18, 10) AS cost_cache_usd,
            CASE WHEN cost_web_search_d IS NOT NULL OR cost_file_processing_d IS NOT NULL
                 THEN (coalesce(cost_web_search_d, 0) + coalesce(cost_file_processing_d, 0))
                      ::DECIMAL(18, 10) END AS cost_extra_usd,
            byok_usage_inference_d::DECIMAL(18, 10) AS byok_usd,
            fr AS finish_reason,
            coalesce(finish_raw, finish_norm) AS finish_reason_raw,
            lf_response_kind(fr, NULL, tokens_completion_d, tokens_reasoning_d,
                             NULL, NULL, NULL, NULL) AS response_kind,
            generation_time_ms_d AS duration_ms,
            time_to_first_token_ms_d AS ttft_ms,
            streamed,
            cancelled
        FROM (SELECT t.*, s.line, s.seq, s.session_start, s.session_given,
                     {_stream_key("t")} AS stream_key,
                     lf_finish_reason(coalesce(t.finish_norm, t.finish_raw), t.cancelled) AS fr
              FROM lf_or_typed t POSITIONAL JOIN lf_or_seq s
              WHERE s.seq IS NOT NULL)""",
        params,
    ).fetchall()
    result.rows_loaded = int(inserted[0][0]) if inserted else 0
    good = staged - rejected - headers
    result.rows_duplicate = int(good - result.rows_loaded)
    if _count(con, "SELECT count(*) FROM lf_or_inter"):
        renumber_streams(con, NAME, "lf_or_inter", ctx.options.session_gap_s)

    for table in _TEMP_TABLES:
        con.execute(f"DROP TABLE IF EXISTS {table}")
    return result


def _count(
    con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, object] | None = None
) -> int:
    rows = con.execute(sql, params or {}).fetchall()
    return int(rows[0][0]) if rows else 0


# What this module is to the registry (analyzer.ingest).
SPEC = FormatSpec(
    name=NAME,
    title=TITLE,
    kind=KIND,
    sniff_order=SNIFF_ORDER,
    call_prefix=CALL_PREFIX,
    sniff=sniff,
    load=load,
)
