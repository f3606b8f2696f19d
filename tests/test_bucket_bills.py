"""Bills per time bucket: Anthropic's usage and cost reports (Console CSV exports, Admin API
JSON) and OpenAI's usage and costs (API JSON, dashboard CSV), loaded as ``bill_buckets``
(never calls), shown by ``usage bills`` and reconciled with the logs by ``usage reconcile``."""

from __future__ import annotations

import json
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.detect.reconcile import totals, units
from analyzer.engine.store import SCHEMA_VERSION, open_store
from analyzer.errors import ForensicsError
from analyzer.ingest.base import IngestOptions
from analyzer.load.flow import FileReport
from analyzer.model.formatting import money
from analyzer.pipeline import ingest_paths
from analyzer.report.pages import md_env
from tests.helpers import REPO, counts, shared_samples
from tests.test_markdown_report import check_well_formed, parsed_tables

ANTHROPIC = REPO / "tests" / "fixtures" / "anthropic_usage"
OPENAI = REPO / "tests" / "fixtures" / "openai_usage"
USAGE_JSON = ANTHROPIC / "usage_report_messages.json"
COST_JSON = ANTHROPIC / "cost_report.json"
CLAUDE_LOGS = ANTHROPIC / "claude-projects"


def ingest(db: Path, *paths: Path) -> list[FileReport]:
    with open_store(db) as store:
        return list(ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False)))


def accounted(r: FileReport) -> bool:
    return r.rows_read == r.rows_loaded + r.rows_rejected + r.rows_duplicate + r.rows_skipped


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with open_store(db, read_only=True) as store:
        return store.con.execute(sql).fetchall()


def exact(usd: object) -> Decimal | None:
    """An amount as the page or --json writes it (all its digits, trailing zeros or not)."""
    return None if usd in (None, "") else Decimal(str(usd))


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "130", "NO_COLOR": "1"})
    return result.exit_code, result.output


# --- Anthropic: the real Console exports ------------------------------------------------------


def test_the_real_console_exports(tmp_path: Path) -> None:
    """The two real Console CSVs (one day, the same organisation): the usage export's tokens at
    list prices come to the cost export's dollars, within its rounding to the cent per row."""
    folder = shared_samples() / "more-formats" / "anthropic-admin-usage-cost"
    db = tmp_path / "s.duckdb"
    reports = sorted(ingest(db, *sorted(folder.glob("*.csv"))), key=lambda r: r.path)
    assert [(r.format, counts(r)) for r in reports] == [
        ("anthropic_usage", (6, 6, 0, 0, 0)),  # claude_api_cost_...: a row per token type
        ("anthropic_usage", (2, 2, 0, 0, 0)),  # claude_api_tokens_...: a row per model
    ]
    assert rows(db, "SELECT count(*) FROM calls") == [(0,)]  # a bucketed bill makes no call
    usage = rows(
        db,
        """SELECT model, model_key, api_key, workspace, service_tier,
                               context_window, input_tokens, cached_input_tokens,
                               cache_write_tokens, output_tokens, cost_estimate_usd
                        FROM bill_buckets WHERE measure = 'usage' ORDER BY model""",
    )
    assert usage == [
        (
            "claude-haiku-4-5-20251001",
            "claude-haiku-4-5",
            "claude-sdk",
            "Default",
            "standard",
            "≤ 200k",
            16765,
            0,
            0,
            1702,
            Decimal("0.0252750000"),
        ),
        # 43 fresh + 302,527 written + 3,301,672 read: the whole prompt, as in calls
        (
            "claude-opus-4-5-20251101",
            "claude-opus-4-5",
            "claude-sdk",
            "Default",
            "standard",
            "≤ 200k",
            3604242,
            3301672,
            302527,
            32676,
            Decimal("4.3587447500"),
        ),
    ]
    cost = rows(
        db,
        """SELECT model_key, item, sum(cost_usd) FROM bill_buckets
                       WHERE measure = 'cost' GROUP BY ALL ORDER BY ALL""",
    )
    assert [(k, i) for k, i, _ in cost] == [
        ("claude-haiku-4-5", "input_no_cache"),
        ("claude-haiku-4-5", "output"),
        ("claude-opus-4-5", "input_cache_read"),
        ("claude-opus-4-5", "input_cache_write_5m"),
        ("claude-opus-4-5", "input_no_cache"),
        ("claude-opus-4-5", "output"),
    ]
    with open_store(db, read_only=True) as store:
        found = {u.model: u for u in units(store)}
    opus, haiku = found["claude-opus-4-5-20251101"], found["claude-haiku-4-5-20251001"]
    # The display name "Claude Opus 4.5" and the id claude-opus-4-5-20251101 are one unit.
    assert (opus.basis, opus.billed_usd, opus.cost_rows) == ("billed", Decimal("4.36"), 4)
    assert (haiku.basis, haiku.billed_usd, haiku.cost_rows) == ("billed", Decimal("0.03"), 2)
    for u in (opus, haiku):
        assert u.estimate_usd is not None
        assert abs(u.billed_usd - u.estimate_usd) <= Decimal("0.005") * u.cost_rows
        assert u.status == "no log" and u.calls == 0


# --- Anthropic: the acceptance case: a usage report and the Claude Code logs it covers --------


def test_a_usage_report_reconciles_with_claude_code_logs_to_the_cent(tmp_path: Path) -> None:
    """The fixture's Claude Code session (3 Sonnet 4.5 and 2 Haiku 4.5 calls on 2026-03-05)
    against an Admin API usage report whose Sonnet bucket holds 1,000,000 more 5-minute cache
    writes than the logs ($3.75 at $3.75 per million), whose Haiku bucket is exactly the logs',
    and with a day the logs do not cover."""
    db = tmp_path / "s.duckdb"
    reports = ingest(db, USAGE_JSON, CLAUDE_LOGS)
    by_format = {r.format: r for r in reports}
    # 3 results and an empty bucket (skipped); the transcript's 10 lines.
    assert counts(by_format["anthropic_usage"]) == (4, 3, 0, 0, 1)
    assert rows(db, "SELECT skipped_kinds FROM sources WHERE format = 'anthropic_usage'") == [
        ('{"empty_bucket": 1}',)
    ]
    assert by_format["claude_code"].rows_loaded == 10
    with open_store(db, read_only=True) as store:
        found = units(store)
        t = totals(found)
    assert [(f"{u.start:%m-%d}", u.model, u.calls, u.status) for u in found] == [
        ("03-05", "claude-haiku-4-5-20251001", 2, "explained"),
        ("03-05", "claude-sonnet-4-5-20250929", 3, "partly"),
        ("03-06", "claude-haiku-4-5-20251001", 0, "no log"),
    ]
    haiku, sonnet, later = found
    # Sonnet 4.5 at list prices ($3 in, $3.75 5m write, $0.30 read, $15 out per million): the
    # logs' 1,550 fresh, 21,500 written, 41,500 read, 4,000 out is $0.157725.
    assert sonnet.logged_usd.quantize(Decimal("1e-6")) == Decimal("0.157725")
    assert sonnet.billed_usd.quantize(Decimal("1e-6")) == Decimal("3.907725")
    assert sonnet.unexplained_usd.quantize(Decimal("0.01")) == Decimal("3.75")
    assert (sonnet.bill_input, sonnet.log_input) == (1_064_550, 64_550)
    # Haiku 4.5 ($1 in, $0.10 read, $5 out): 5,200 fresh, 5,000 read, 150 out on both sides.
    assert haiku.billed_usd.quantize(Decimal("1e-6")) == Decimal("0.006450")
    assert abs(haiku.unexplained_usd) < Decimal("0.005")
    assert (haiku.bill_input, haiku.bill_output) == (haiku.log_input, haiku.log_output)
    assert later.billed_usd.quantize(Decimal("1e-6")) == Decimal("0.020000")
    assert t.no_log_usd.quantize(Decimal("0.01")) == Decimal("3.77")
    assert t.explained_usd.quantize(Decimal("0.01")) == Decimal("0.16")

    code, text = run("usage", "reconcile", "--db", str(db))
    assert code == 0, text
    assert (
        "2026-03-05 claude-sonnet-4-5-20250929: the logs explain $0.16 of Anthropic's "
        "$3.91; $3.75 has no log"
    ) in text
    assert "2026-03-06 claude-haiku-4-5-20251001: $0.02 of Anthropic's bill has no log" in text
    assert "The logs explain $0.16 of the $3.93 billed; $3.77 has no log." in text
    code, out = run("usage", "reconcile", "--db", str(db), "--json")
    doc = json.loads(out)
    assert [u["status"] for u in doc["units"]] == ["explained", "partly", "no log"]
    assert Decimal(doc["units"][1]["unexplained_usd"]).quantize(Decimal("0.01")) == Decimal("3.75")

    # The cost report of the same day: the Sonnet unit is now billed in dollars, to the same sum.
    [r] = ingest(db, COST_JSON)
    assert counts(r) == (4, 4, 0, 0, 0)
    with open_store(db, read_only=True) as store:
        sonnet = units(store)[1]
    assert (sonnet.basis, sonnet.cost_rows) == ("billed", 4)
    assert sonnet.billed_usd == Decimal("3.907725")  # 0.465 + 383.0625 + 1.245 + 6 cents
    assert sonnet.unexplained_usd.quantize(Decimal("0.01")) == Decimal("3.75")

    # audit says it in one line; the period views say the bills are not in their figures.
    code, text = run("audit", "--db", str(db), str(USAGE_JSON), str(COST_JSON), str(CLAUDE_LOGS))
    assert code == 0, text
    assert "$3.93 on Anthropic's bills per bucket: the logs explain $0.16, $3.77 has no log" in text
    code, text = run("usage", "daily", "--db", str(db))
    assert "Not in this table: $3.93 of provider bills per bucket (3 buckets)" in text


def test_a_window_limits_the_buckets(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest(db, USAGE_JSON)
    code, out = run("usage", "bills", "--db", str(db), "--since", "2026-03-06", "--json")
    assert code == 0, out
    assert [r["start"] for r in json.loads(out)["rows"]] == ["2026-03-06T00:00:00Z"]


def test_the_same_buckets_again_are_duplicates(tmp_path: Path) -> None:
    """Another export of the same buckets (here: the same page written as JSON Lines) adds
    nothing: every record is a duplicate."""
    db = tmp_path / "s.duckdb"
    ingest(db, USAGE_JSON)
    again = tmp_path / "pages.jsonl"
    again.write_text(json.dumps(json.loads(USAGE_JSON.read_text())) + "\n")
    [r] = ingest(db, again)
    assert r.format == "anthropic_usage" and counts(r) == (4, 0, 0, 3, 1)
    assert rows(db, "SELECT count(*) FROM bill_buckets") == [(3,)]


def test_damaged_records_are_rejected_with_their_number(tmp_path: Path) -> None:
    page = json.loads(USAGE_JSON.read_text())
    results = page["data"][0]["results"]
    results[0]["output_tokens"] = -5  # not a count
    results.append({"uncached_input_tokens": "many", "model": "claude-x"})
    results.append(7)
    page["data"].append({"starting_at": "yesterday", "results": []})
    path = tmp_path / "usage.json"
    path.write_text(json.dumps(page))
    db = tmp_path / "s.duckdb"
    [r] = ingest(db, path)
    assert accounted(r) and counts(r) == (7, 2, 4, 0, 1)
    found = rows(db, "SELECT line, reason FROM rejects ORDER BY line")
    assert found == [
        (1, "output_tokens is not a count: '-5'"),
        (3, "uncached_input_tokens is not a count: 'many'"),
        (4, "a result that is not an object"),
        (7, "a bucket without starting_at, ending_at and results"),
    ]
    cost = tmp_path / "claude_api_cost.csv"
    cost.write_text(
        "usage_date_utc,model,workspace,api_key,usage_type,context_window,token_type,cost_usd,"
        "cost_type\n2026-02-01,Claude Opus 4.5,Default,k,message,≤ 200k,output,0.82,token\n"
        "2026-02-31,Claude Opus 4.5,Default,k,message,≤ 200k,input_no_cache,0.01,token\n"
        "2026-02-02,Claude Opus 4.5,Default,k\n"
    )
    [r] = ingest(db, cost)
    assert accounted(r) and counts(r) == (3, 1, 2, 0, 0)
    assert rows(db, f"SELECT line, reason FROM rejects WHERE source_id = {r.source_id}") == [
        (3, "usage_date_utc is not a date: '2026-02-31'"),
        (4, "4 fields where the header has 9"),
    ]


def test_a_report_that_is_not_json_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "usage.json"
    path.write_text(
        '{"data": [{"results": [], "starting_at": "2026-03-05T00:00:00Z",\n "ending_at": ,'
    )
    code, out = run("ingest", "--db", str(tmp_path / "s.duckdb"), str(path))
    assert code == 3
    assert "usage.json:2: not valid JSON" in out


# --- OpenAI ------------------------------------------------------------------------------------


def test_openai_usage_and_costs(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    reports = {Path(r.path).name: r for r in ingest(db, OPENAI)}
    assert {n: (r.format, counts(r)) for n, r in reports.items()} == {
        "completions_usage_export.csv": ("openai_usage", (4, 3, 0, 0, 1)),  # a blank day
        "cost_export.csv": ("openai_usage", (4, 3, 0, 0, 1)),
        "costs_by_line_item.json": ("openai_usage", (6, 5, 0, 0, 1)),  # an empty bucket
        "usage_completions.json": ("openai_usage", (4, 3, 0, 0, 1)),
    }
    items = rows(
        db,
        """SELECT model, service_tier, item, cost_usd FROM bill_buckets
                        WHERE format = 'openai_usage' AND measure = 'cost' AND item IS NOT NULL
                        ORDER BY cost_usd DESC""",
    )
    assert items == [
        ("gpt-5-2025-08-07", None, "gpt-5-2025-08-07, output", Decimal("0.6")),
        ("gpt-5-2025-08-07", None, "gpt-5-2025-08-07, input", Decimal("0.04759")),
        (
            "gpt-5-mini-2025-08-07",
            "priority",
            "priority | gpt-5-mini-2025-08-07, output, long context",
            Decimal("0.0412"),
        ),
        (None, None, "web search tool calls", Decimal("0.03")),
        ("gpt-5-2025-08-07", None, "gpt-5-2025-08-07, cached input", Decimal("0.001024")),
    ]
    usage = rows(
        db,
        """SELECT strftime(bucket_start, '%Y-%m-%d'), model, service_tier, requests,
                               input_tokens, cached_input_tokens, output_tokens,
                               round(cost_estimate_usd, 6)
                        FROM bill_buckets WHERE measure = 'usage' AND format = 'openai_usage'
                          AND model LIKE 'gpt-5%' ORDER BY ALL""",
    )
    assert usage == [
        # gpt-5 at $1.25 in, $0.125 cached, $10 out per million (API page and dashboard CSV)
        ("2025-10-05", "gpt-5-2025-08-07", None, 8, 46264, 8192, 60000, Decimal("0.648614")),
        # batch: half the list price
        ("2025-10-05", "gpt-5-mini-2025-08-07", "batch", 21, 80992, 0, 274770, Decimal("0.284894")),
        ("2025-10-06", "gpt-5-2025-08-07", "batch", 1, 5783, 0, 16000, Decimal("0.083614")),
        ("2025-10-06", "gpt-5-2025-08-07", "default", 8, 46264, 8192, 60000, Decimal("0.648614")),
    ]
    # The line items of gpt-5 on 2025-10-05 are its list price to the dollar of the usage page.
    with open_store(db, read_only=True) as store:
        gpt5 = [u for u in units(store) if u.model == "gpt-5-2025-08-07" and u.start.day == 5]
    assert [(u.basis, u.billed_usd, u.estimate_usd) for u in gpt5] == [
        ("billed", Decimal("0.648614"), Decimal("0.648614"))
    ]


def test_the_costs_pages_of_another_project(tmp_path: Path) -> None:
    """cogni-track's two pages of /v1/organization/costs (a fixture of the page shape)."""
    folder = shared_samples() / "more-formats" / "openai-org-usage-costs"
    db = tmp_path / "s.duckdb"
    reports = ingest(db, *sorted(folder.glob("*.json")))
    assert [(r.format, counts(r)) for r in reports] == [
        ("openai_usage", (2, 2, 0, 0, 0)),
        ("openai_usage", (1, 1, 0, 0, 0)),
    ]
    assert rows(db, "SELECT sum(cost_usd), count(model) FROM bill_buckets") == [
        (Decimal("21.22"), 0)  # usage.completions and friends name no model
    ]


# --- The store ---------------------------------------------------------------------------------


def test_a_store_of_the_previous_format_is_upgraded_when_written(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    with open_store(db):
        pass
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE bill_buckets")
    con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.close()
    with (
        pytest.raises(ForensicsError, match="ingest` into it once upgrades it"),
        open_store(db, read_only=True),
    ):
        pass
    ingest(db, USAGE_JSON)
    assert rows(db, "SELECT value FROM meta WHERE key = 'schema_version'") == [(SCHEMA_VERSION,)]
    assert rows(db, "SELECT count(*) FROM bill_buckets") == [(3,)]


def test_a_store_of_format_8_gains_the_new_columns_in_the_order_of_a_new_store(
    tmp_path: Path,
) -> None:
    """Format 9 added the placeholder estimates to calls and the attribution to incidents:
    an upgraded store has the columns of a new one, in the same order, and no kept result
    computed before (every cached figure is computed again)."""
    new, old = tmp_path / "new.duckdb", tmp_path / "old.duckdb"
    for db in (new, old):
        with open_store(db):
            pass
    con = duckdb.connect(str(old))
    for table, column in [
        ("calls", "output_estimate_tokens"),
        ("calls", "output_estimate_floor"),
        ("calls", "cost_logged_usd"),
        ("incidents", "app"),
        ("incidents", "api_key"),
        ("incidents", "model"),
        ("incidents", "project"),
        *((table, "machine") for table in ("sources", "calls", "incidents")),  # (format 10's)
        *((table, "labels") for table in ("calls", "incidents")),  # (format 13's)
    ]:
        con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    con.execute("INSERT INTO cache VALUES ('detect', 'k', '{}')")
    con.close()
    ingest(old, USAGE_JSON)

    def columns(db: Path) -> list[tuple[str, str, str]]:
        return rows(
            db,
            """SELECT table_name, column_name, data_type FROM duckdb_columns()
                           WHERE NOT internal ORDER BY table_name, column_index""",
        )

    assert columns(old) == columns(new)
    assert rows(old, "SELECT value FROM meta WHERE key = 'schema_version'") == [(SCHEMA_VERSION,)]
    assert rows(old, "SELECT count(*) FROM cache WHERE name = 'detect'") == [(0,)]


def test_reconcile_shows_the_gap_placeholder_output_explains(tmp_path: Path) -> None:
    """The same transcript as a Claude Code before 2.1.87 writes it: no line says how a call
    stopped, and each logs the stream's 1-token placeholder. Priced at the output estimated
    from what the calls wrote, the logs explain more of the bill; per bucket, reconcile says
    how many such calls there are and how much of the gap the estimate accounts for."""
    src = next(CLAUDE_LOGS.rglob("*.jsonl"))
    old = tmp_path / "projects" / src.parent.name / src.name
    old.parent.mkdir(parents=True)
    lines = []
    for text in src.read_text(encoding="utf-8").splitlines():
        obj = json.loads(text)
        if obj.get("type") == "assistant":
            obj["message"]["stop_reason"] = None
            obj["message"]["usage"]["output_tokens"] = 1
        lines.append(json.dumps(obj))
    old.write_text("\n".join(lines) + "\n", encoding="utf-8")
    db = tmp_path / "s.duckdb"
    ingest(db, USAGE_JSON, old.parent)
    with open_store(db, read_only=True) as store:
        found = [u for u in units(store) if u.calls]
        for u in found:
            [(n, added)] = store.con.execute(
                """SELECT count(*), sum(cost_usd - cost_logged_usd) FROM calls
                   WHERE cost_basis = 'estimated_output' AND ts >= ? AND ts < ?
                     AND lf_model_key(model) = lf_model_key(?)""",
                [u.start, u.end, u.model],
            ).fetchall()
            assert (u.placeholder_calls, u.placeholder_usd) == (n, added) == (u.calls, added)
            assert added > 0
            said = u.to_json()
            assert Decimal(said["unexplained_at_logged_output_usd"]) == (
                u.billed_usd - (u.logged_usd - added)
            )
    assert [u.calls for u in found] == [2, 3]
    code, text = run("usage", "reconcile", "--db", str(db))
    assert code == 0, text
    assert "3 logged calls carry only a streaming placeholder for their output" in text


# --- The report: the bills per bucket and their reconciliation, as `usage` shows them --------

HOSTILE_MODEL = "claude-x <script>alert(1)</script> | *b* [x](javascript:alert(1)) `c`"


class _Tables(HTMLParser):
    """Each table of a page with an id: its rows (head, body and foot apart), each row's cells
    as (text, attributes)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, dict[str, list[list[tuple[str, dict[str, str | None]]]]]] = {}
        self.table: str | None = None
        self.part = "tbody"
        self.cell: tuple[list[str], dict[str, str | None]] | None = None
        self.items: dict[str, list[str]] = {}  # each list's items, by the list's id
        self.item: list[str] | None = None
        self.list: str | None = None
        self.texts: dict[str, list[str]] = {}  # the text of each paragraph with an id
        self.para: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id"):
            self.table = str(a["id"])
            self.tables[self.table] = {"thead": [], "tbody": [], "tfoot": []}
        elif self.table and tag in ("thead", "tbody", "tfoot"):
            self.part = tag
        elif self.table and tag == "tr":
            self.tables[self.table][self.part].append([])
        elif self.table and tag in ("td", "th"):
            self.cell = ([], a)
        elif tag == "ul" and a.get("id"):
            self.list = str(a["id"])
            self.items[self.list] = []
        elif self.list and tag == "li":
            self.item = []
        elif tag == "p" and a.get("id"):
            self.para = str(a["id"])
            self.texts[self.para] = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.table = None
        elif tag in ("td", "th") and self.table and self.cell is not None:
            text, attrs = self.cell
            self.tables[self.table][self.part][-1].append(("".join(text).strip(), attrs))
            self.cell = None
        elif tag == "li" and self.list and self.item is not None:
            self.items[self.list].append("".join(self.item).strip())
            self.item = None
        elif tag == "ul":
            self.list = None
        elif tag == "p":
            self.para = None

    def handle_data(self, data: str) -> None:
        for sink in (
            self.cell[0] if self.cell else None,
            self.item,
            self.texts.get(self.para or ""),
        ):
            if sink is not None:
                sink.append(data)


@pytest.fixture(scope="module")
def billed_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The acceptance case's store (a usage report, its cost report and the Claude Code logs),
    plus a bucket of a model with a hostile name; its report as HTML and Markdown, and what
    `usage bills --json` and `usage reconcile --json` say of it."""
    tmp = tmp_path_factory.mktemp("billed")
    page = json.loads(USAGE_JSON.read_text())
    page["data"][2]["results"] = [{**page["data"][1]["results"][0], "model": HOSTILE_MODEL}]
    usage = tmp / "usage.json"
    usage.write_text(json.dumps(page))
    db = tmp / "s.duckdb"
    ingest(db, usage, COST_JSON, CLAUDE_LOGS)
    out: dict[str, Any] = {}
    for fmt in ("html", "md", "json"):
        code, text = run("report", "--db", str(db), "-o", str(tmp / f"r.{fmt}"))
        assert code == 0, text
        out[fmt] = (tmp / f"r.{fmt}").read_text(encoding="utf-8")
    for view in ("bills", "reconcile"):
        code, text = run("usage", view, "--db", str(db), "--json")
        assert code == 0, text
        out[view] = json.loads(text)
    return out


def _day(iso: str) -> str:
    return iso[:10]  # the fixture's buckets are days, shown as their date


def test_the_page_shows_the_bills_and_their_reconciliation(billed_store: dict[str, Any]) -> None:
    """The HTML page's bills per bucket are `usage bills`'s rows, and its reconciliation is
    `usage reconcile`'s units and totals, to the exact dollars (``data-usd``); the hostile
    model name is text."""
    html = billed_store["html"]
    parsed = _Tables()
    parsed.feed(html)
    parsed.close()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html

    rows = billed_store["bills"]["rows"]
    table = parsed.tables["bucket-bills"]
    assert [c[0] for c in table["thead"][0]] == [
        "Bucket (UTC)",
        "Provider",
        "Model",
        "Requests",
        "Input",
        "Cache write",
        "Cache read",
        "Output",
        "Billed",
        "At list prices",
    ]
    assert len(table["tbody"]) == len(rows) == 4
    for row, want in zip(table["tbody"], rows, strict=True):
        text = [c[0] for c in row]
        assert text[:3] == [_day(want["start"]), "Anthropic", want["model"]]
        assert text[4:8] == [
            f"{want[k]:,}" for k in ("input", "cache_write", "cache_read", "output")
        ]
        for cell, key in ((row[8], "billed_usd"), (row[9], "estimate_usd")):
            assert exact(cell[1]["data-usd"]) == exact(want[key]), key  # --json's amount
    [total] = table["tfoot"]
    assert total[0][0] == "Total"
    assert Decimal(str(total[8][1]["data-usd"])) == sum(
        Decimal(r["billed_usd"]) for r in rows if r["billed_usd"]
    )

    rec = billed_store["reconcile"]
    table = parsed.tables["bucket-reconcile"]
    assert [c[0] for c in table["thead"][0]] == [
        "Bucket (UTC)",
        "Provider",
        "Model",
        "Bill",
        "Basis",
        "Logs",
        "Calls",
        "Unexplained",
        "Status",
    ]
    assert len(table["tbody"]) == len(rec["units"]) == 4
    for row, want in zip(table["tbody"], rec["units"], strict=True):
        text = [c[0] for c in row]
        assert text[:3] == [_day(want["start"]), "Anthropic", want["model"]]
        assert (text[4], text[6], text[8]) == (
            want["basis"],
            str(want["logged_calls"]),
            want["status"],
        )
        for cell, key in (
            (row[3], "billed_usd"),
            (row[5], "logged_usd"),
            (row[7], "unexplained_usd"),
        ):
            assert exact(cell[1]["data-usd"]) == exact(want[key]), key
    assert [u["status"] for u in rec["units"]] == ["explained", "partly", "no log", "unpriced"]
    [total] = table["tfoot"]
    t = rec["totals"]
    assert exact(total[3][1]["data-usd"]) == exact(t["billed_usd"])
    assert Decimal(str(total[5][1]["data-usd"])) == (
        Decimal(t["explained_usd"]) + Decimal(t["logs_beyond_bill_usd"])
    )
    assert Decimal(str(total[7][1]["data-usd"])) == (
        Decimal(t["no_log_usd"]) - Decimal(t["logs_beyond_bill_usd"])
    )
    said = "".join(parsed.texts["bucket-totals"])
    assert (
        f"The logs explain {money(Decimal(t['explained_usd']))} of the "
        f"{money(Decimal(t['billed_usd']))} billed; {money(Decimal(t['no_log_usd']))} has "
        "no log."
    ) in said
    assert parsed.items["bucket-remainder"] == [
        "2026-03-05 claude-sonnet-4-5-20250929: the logs explain $0.16 of Anthropic's $3.91; "
        "$3.75 has no log (1,000,000 tokens not in the logs)",
        "2026-03-06 claude-haiku-4-5-20251001: $0.02 of Anthropic's bill has no log "
        "(12,000 tokens not in the logs)",
        f"2026-03-07 {HOSTILE_MODEL}: Anthropic's usage has no known list price: not compared",
    ]


def test_the_markdown_shows_the_bills_and_their_reconciliation(
    billed_store: dict[str, Any],
) -> None:
    """The same in Markdown: the tables parse (the hostile model stays literal text in its
    cell), and their figures are `usage bills --json`'s and `usage reconcile --json`'s, as the
    report writes dollars."""
    md = billed_store["md"]
    tokens, _ = check_well_formed(md)
    dollars = md_env().filters["money"]
    tables = {tuple(t["head"]): t["rows"] for t in parsed_tables(tokens)}
    bills = tables[
        (
            "Bucket (UTC)",
            "Provider",
            "Model",
            "Requests",
            "Input",
            "Cache write",
            "Cache read",
            "Output",
            "Billed",
            "At list prices",
        )
    ]
    rows = billed_store["bills"]["rows"]
    assert len(bills) == len(rows) + 1  # and the total
    for got, want in zip(bills, rows, strict=False):
        assert got[:3] == [_day(want["start"]), "Anthropic", want["model"]]
        assert got[4:] == [
            *(f"{want[k]:,}" for k in ("input", "cache_write", "cache_read", "output")),
            *(
                dollars(None if want[k] is None else Decimal(want[k]))
                for k in ("billed_usd", "estimate_usd")
            ),
        ]
    rec = billed_store["reconcile"]
    units = tables[
        (
            "Bucket (UTC)",
            "Provider",
            "Model",
            "Bill",
            "Basis",
            "Logs",
            "Calls",
            "Unexplained",
            "Status",
        )
    ]
    assert len(units) == len(rec["units"]) + 1
    for got, want in zip(units, rec["units"], strict=False):
        assert got == [
            _day(want["start"]),
            "Anthropic",
            want["model"],
            dollars(Decimal(want["billed_usd"])),
            want["basis"],
            dollars(Decimal(want["logged_usd"])),
            str(want["logged_calls"]),
            dollars(Decimal(want["unexplained_usd"])),
            want["status"],
        ]
    t = rec["totals"]
    assert units[-1][:4] == ["Total", "", "", dollars(Decimal(t["billed_usd"]))]
    assert (
        f"The logs explain {money(Decimal(t['explained_usd']))} of the "
        f"{money(Decimal(t['billed_usd']))} billed; {money(Decimal(t['no_log_usd']))} has "
        "no log."
    ) in md
    assert "2026-03-06 claude-haiku-4-5-20251001: $0.02 of Anthropic's bill has no log" in md


def test_the_report_json_carries_them_as_usage_writes_them(billed_store: dict[str, Any]) -> None:
    data = json.loads(billed_store["json"])["bucket_bills"]
    assert data["rows"] == billed_store["bills"]["rows"]
    assert data["units"] == billed_store["reconcile"]["units"]
    assert data["totals"] == billed_store["reconcile"]["totals"]
