"""Billing <-> log reconciliation: link each logged call to the billing row of the same call.

When a billing export and the agent logs of the same activity are both loaded, every call is in
the store twice: once as billed, once as logged (with content, tool calls, turns). A logged call
is linked to its billing row

1. by id, when the log kept the provider's response id and it equals the ``generation_id``;
2. else by time (within 2 s), model (compared by ``lf_model_key``) and token counts (the prompt
   size must agree when the log has it; the output too when the log's count is final - Claude
   Code's is a snapshot and is not compared).

Each side is linked at most once, nearest in time first. The logged call then carries the billed
dollars (``cost_basis = 'billed'``), the bill's model, app, key and user (so spend tables name
each call as the bill does) and, where the log had none, the billed token counts; the
billing row is marked ``superseded_by`` the logged call, so every call is counted once
(``live_calls``). What stayed unmatched on each side is reported: the reconciliation users now do
by hand in spreadsheets.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from analyzer.engine import cache
from analyzer.engine.store import Store
from analyzer.ingest import billing_formats

WINDOW_S = 2
NEAR_LOGS_S = 300  # billing rows this close to a logged session count as "should have matched"


@dataclass
class Reconciliation:
    billing_rows: int
    log_calls: int
    matched: int
    log_calls_unmatched: int  # logged calls inside the billing export's period, not matched
    billing_rows_unmatched: int  # billing rows of a logged model near its sessions, not matched

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def is_bill(column: str = "format") -> str:
    """SQL: whether a call's format is a bill (a format that declares ``KIND = "bill"``)."""
    names = ", ".join("'" + n.replace("'", "''") + "'" for n in billing_formats())
    return f"{column} IN ({names})" if names else "false"


def link_if_needed(store: Store, loaded: bool) -> None:
    """Link after files were ``loaded`` - or when a run was stopped between loading its files
    and linking them (the store notes which data version was last linked)."""
    linked = store.scalar("SELECT value FROM meta WHERE key = 'linked_version'")
    if not loaded and linked == cache.version(store, cache.DATA):
        return
    with store.transaction():
        link(store)
        cache.bump(store, cache.DATA)
        store.con.execute(
            "INSERT INTO meta VALUES ('linked_version', ?) ON CONFLICT (key) DO UPDATE "
            "SET value = excluded.value",
            [cache.version(store, cache.DATA)],
        )


def link(store: Store, max_rounds: int = 20) -> int:
    """Link what can be linked now; returns the number of new links.

    Each round links the pairs that are each other's nearest candidate; a call that lost its
    nearest partner to a closer one tries its next candidate in the following round.
    """
    total = 0
    for _ in range(max_rounds):
        n = _link_round(store)
        total += n
        if n == 0:
            break
    return total


def _link_round(store: Store) -> int:
    con = store.con
    # Nothing to pair when one side is missing (a bill alone, logs alone): no link table.
    if not store.scalar(
        f"""SELECT EXISTS (SELECT 1 FROM calls WHERE NOT {is_bill()} AND billing_call_id IS NULL
                                               AND ts IS NOT NULL)
                  AND EXISTS (SELECT 1 FROM calls WHERE {is_bill()} AND superseded_by IS NULL)"""
    ):
        return 0
    # The logs still unlinked, as a table of their own: few next to the bills, and the
    # planner then knows it (a CTE's size is guessed, and 10M bills were hashed for it).
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE lf_link_logs AS
            SELECT call_id, ts, lf_model_key(model) AS mk, input_tokens, output_tokens,
                   output_final, response_id,
                   epoch_us(ts) // {WINDOW_S * 1_000_000} AS bk
            FROM calls
            WHERE NOT {is_bill()} AND billing_call_id IS NULL AND ts IS NOT NULL"""
    )
    # Bills are compared only within the logs' time range: given as values, the range lets
    # the scan skip the row groups outside it.
    lo, hi = con.execute(
        f"""SELECT min(ts) - INTERVAL {WINDOW_S} SECOND, max(ts) + INTERVAL {WINDOW_S} SECOND
            FROM lf_link_logs"""
    ).fetchall()[0]
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE lf_links AS
        WITH by_id AS (
            SELECT l.call_id AS log_id, b.call_id AS bill_id, -1.0 AS dt
            FROM lf_link_logs l
            JOIN (SELECT call_id, native_id FROM calls
                  WHERE {is_bill()} AND superseded_by IS NULL
                    AND native_id IN (SELECT response_id FROM lf_link_logs)) b
              ON b.native_id = l.response_id
        ),
        -- A model's key once per model (not per billing row), for the models logs have.
        keys AS (
            SELECT model, mk
            FROM (SELECT model, lf_model_key(model) AS mk
                  FROM (SELECT DISTINCT model FROM calls
                        WHERE {is_bill()} AND ts BETWEEN $lo AND $hi))
            WHERE mk IN (SELECT mk FROM lf_link_logs)
        ),
        -- A bill within the window of a log lies in the log's bucket of the window's width or
        -- a bucket beside it: bills are joined on (model key, bucket), the window then checked.
        near AS (
            SELECT b.call_id, b.ts, k.mk, b.input_tokens, b.output_tokens,
                   epoch_us(b.ts) // {WINDOW_S * 1_000_000} AS bucket
            FROM calls b JOIN keys k ON b.model = k.model
            WHERE {is_bill("b.format")} AND b.superseded_by IS NULL
              AND b.ts BETWEEN $lo AND $hi
        ),
        by_time AS (
            SELECT l.call_id AS log_id, b.call_id AS bill_id,
                   abs(epoch(b.ts) - epoch(l.ts)) AS dt
            FROM (SELECT *, unnest([bk - 1, bk, bk + 1]) AS bucket FROM lf_link_logs) l
            JOIN near b ON b.mk = l.mk AND b.bucket = l.bucket
            WHERE b.ts BETWEEN l.ts - INTERVAL {WINDOW_S} SECOND
                           AND l.ts + INTERVAL {WINDOW_S} SECOND
              AND (l.input_tokens IS NULL OR l.input_tokens = b.input_tokens)
              AND (l.output_tokens IS NULL OR NOT coalesce(l.output_final, false)
                   OR l.output_tokens = b.output_tokens)
        ),
        ranked AS (
            SELECT *,
                   row_number() OVER (PARTITION BY log_id ORDER BY dt, bill_id) AS r_log,
                   row_number() OVER (PARTITION BY bill_id ORDER BY dt, log_id) AS r_bill
            FROM (SELECT * FROM by_id UNION ALL SELECT * FROM by_time)
        )
        SELECT log_id, bill_id FROM ranked WHERE r_log = 1 AND r_bill = 1""",
        {"lo": lo, "hi": hi},
    )
    n = int(store.scalar("SELECT count(*) FROM lf_links"))
    if n:
        con.execute(
            """UPDATE calls SET
                billing_call_id = k.bill_id,
                model = b.model,
                provider = coalesce(b.provider, calls.provider),
                app = coalesce(b.app, calls.app),
                api_key = b.api_key,
                user_id = coalesce(b.user_id, calls.user_id),
                cost_usd = b.cost_usd,
                cost_basis = b.cost_basis,
                input_tokens = coalesce(calls.input_tokens, b.input_tokens),
                cached_input_tokens = coalesce(calls.cached_input_tokens, b.cached_input_tokens),
                output_tokens = CASE WHEN coalesce(calls.output_final, false)
                                     THEN calls.output_tokens
                                     ELSE coalesce(b.output_tokens, calls.output_tokens) END,
                reasoning_tokens = coalesce(calls.reasoning_tokens, b.reasoning_tokens),
                output_final = coalesce(calls.output_final, false) OR b.output_tokens IS NOT NULL,
                output_estimate_tokens = CASE WHEN b.output_tokens IS NULL
                                              THEN calls.output_estimate_tokens END,
                output_estimate_floor = CASE WHEN b.output_tokens IS NULL
                                             THEN calls.output_estimate_floor END,
                cost_logged_usd = NULL,
                response_kind = coalesce(calls.response_kind, lf_response_kind(
                    calls.finish_reason, calls.http_status, b.output_tokens, b.reasoning_tokens,
                    calls.content_chars, calls.visible_chars, calls.reasoning_chars,
                    calls.tool_call_count))
            FROM lf_links k JOIN calls b ON b.call_id = k.bill_id
            WHERE calls.call_id = k.log_id"""
        )
        con.execute(
            """UPDATE calls SET superseded_by = k.log_id
               FROM lf_links k WHERE calls.call_id = k.bill_id"""
        )
    con.execute("DROP TABLE lf_links")
    con.execute("DROP TABLE lf_link_logs")
    return n


def reconciliation(store: Store) -> Reconciliation | None:
    """Matched and unmatched on each side; None unless both a bill and logs are loaded."""
    row = store.one(
        f"""SELECT count(*) FILTER (WHERE {is_bill()}),
                   count(*) FILTER (WHERE NOT {is_bill()}),
                   count(*) FILTER (WHERE billing_call_id IS NOT NULL),
                   min(ts) FILTER (WHERE {is_bill()}),
                   max(ts) FILTER (WHERE {is_bill()})
            FROM calls"""
    )
    assert row is not None
    bills, logs, matched, lo, hi = row
    if not bills or not logs:
        return None
    log_unmatched = store.scalar(
        f"""SELECT count(*) FROM calls WHERE NOT {is_bill()} AND billing_call_id IS NULL
            AND ts BETWEEN ? AND ?""",
        [lo, hi],
    )
    bill_unmatched = store.scalar(
        f"""WITH spans AS (
                SELECT session_id, lf_model_key(model) AS mk,
                       min(ts) - INTERVAL {NEAR_LOGS_S} SECOND AS lo,
                       max(ts) + INTERVAL {NEAR_LOGS_S} SECOND AS hi
                FROM calls WHERE NOT {is_bill()} AND ts IS NOT NULL GROUP BY ALL),
            -- a model's key once per model, not per billing row (10M rows: 3.5 s -> 0.3 s)
            keyed AS (
                SELECT model, mk
                FROM (SELECT model, lf_model_key(model) AS mk
                      FROM (SELECT DISTINCT model FROM calls WHERE {is_bill()}))
                WHERE mk IN (SELECT mk FROM spans))
            SELECT count(*) FROM calls b JOIN keyed k ON b.model = k.model
            WHERE {is_bill("b.format")} AND b.superseded_by IS NULL
              AND b.ts BETWEEN (SELECT min(lo) FROM spans) AND (SELECT max(hi) FROM spans)
              AND EXISTS (SELECT 1 FROM spans s
                          WHERE s.mk = k.mk AND b.ts BETWEEN s.lo AND s.hi)"""
    )
    return Reconciliation(
        billing_rows=int(bills),
        log_calls=int(logs),
        matched=int(matched),
        log_calls_unmatched=int(log_unmatched),
        billing_rows_unmatched=int(bill_unmatched),
    )
