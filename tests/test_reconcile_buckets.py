"""Telemetry against the bill (``usage reconcile``): the bill's own buckets (hours where the
usage report is hourly), requests, tokens and dollars the bill has and the logs lack and the
reverse, units with no bill row (a model or key the bill does not name), a daily cost report
shared over the usage report's hours, and a bill compared key by key (``--match``) with the
calls that carry the key as a label.

Bills: the hand-written hourly reports of ``tests/fixtures/reconcile`` (after the Admin API's
and OpenAI's usage pages of ``tests/fixtures/anthropic_usage`` and ``openai_usage``) and the
real Console exports of ``../shared/samples/more-formats``. Calls: the Claude Code session of
``tests/fixtures/anthropic_usage`` and the Codex rollouts of ``tests/fixtures/codex_forks``,
counted here again from their files (an independent count of the logs' side).
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.detect.reconcile import Match, Unit, totals, units
from analyzer.engine.store import open_store
from analyzer.ingest.base import IngestOptions
from analyzer.ingest.values import labels_text
from analyzer.pipeline import ingest_paths
from tests.helpers import REPO, shared_samples

FIXTURES = REPO / "tests" / "fixtures"
HOURLY = FIXTURES / "reconcile" / "usage_report_hourly.json"
OPENAI_HOURLY = FIXTURES / "reconcile" / "openai_usage_hourly.json"
COST_JSON = FIXTURES / "anthropic_usage" / "cost_report.json"
CLAUDE_LOGS = FIXTURES / "anthropic_usage" / "claude-projects"
CODEX_LOGS = FIXTURES / "codex_forks"
TOKENS = ("input", "cache_read", "cache_write", "output")
_HOUR = timedelta(hours=1)


def ingest(db: Path, *paths: Path) -> None:
    with open_store(db) as store:
        list(ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False)))


def found(db: Path, match: Match | None = None) -> list[Unit]:
    with open_store(db, read_only=True) as store:
        return units(store, match)


def by_hour(found: list[Unit]) -> dict[tuple[str, str | None], Unit]:
    return {(f"{u.start:%m-%d %H}", u.model): u for u in found}


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "150", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


def claude_counts(folder: Path) -> dict[tuple[str, str], dict[str, int]]:
    """The transcript's tokens per hour and model, read here from its lines (each message id
    once): fresh input, cache reads, cache writes, output."""
    seen: set[str] = set()
    out: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: dict.fromkeys(TOKENS, 0))
    for path in folder.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            msg = rec.get("message") or {}
            usage = msg.get("usage")
            if rec.get("type") != "assistant" or not usage or msg["id"] in seen:
                continue
            seen.add(msg["id"])
            at = datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00"))
            t = out[(f"{at:%m-%d %H}", msg["model"])]
            t["input"] += usage["input_tokens"]
            t["cache_read"] += usage.get("cache_read_input_tokens", 0)
            t["cache_write"] += usage.get("cache_creation_input_tokens", 0)
            t["output"] += usage["output_tokens"]
    return out


def codex_calls(folder: Path) -> dict[tuple[str, str], list[dict[str, int]]]:
    """The rollouts' calls per hour and model: each ``token_count`` event's
    ``last_token_usage`` (the model from the turn's context), read here from the files; a
    fork's copy of its parent's history (the same running totals, written again when the
    fork began) counted once."""
    out: dict[tuple[str, str], list[dict[str, int]]] = defaultdict(list)
    seen: set[str] = set()
    for path in sorted(folder.glob("*.jsonl")):
        model = ""
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            p = rec.get("payload") or {}
            if rec.get("type") == "turn_context":
                model = p["model"]
            event = json.dumps(p.get("info"), sort_keys=True)
            if p.get("type") == "token_count" and p.get("info") and event not in seen:
                seen.add(event)
                last = p["info"]["last_token_usage"]
                at = datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00"))
                out[(f"{at:%m-%d %H}", model)].append(last)
    return out


# --- hourly buckets, and a bucket the telemetry covers whole ----------------------------------


def test_hourly_buckets_against_a_claude_code_session(tmp_path: Path) -> None:
    """An Admin API usage report by the hour: each hour is a unit of its own; an hour the
    session covers whole agrees to the cent and in every kind of token (counted here from the
    transcript), an hour with 1,000,000 cache writes no call made is missing them."""
    db = tmp_path / "s.duckdb"
    ingest(db, HOURLY, CLAUDE_LOGS)
    got = found(db)
    assert [(f"{u.start:%H:%M}", f"{u.end:%H:%M}", u.basis, u.status) for u in got] == [
        ("10:00", "11:00", "estimated", "explained"),
        ("11:00", "12:00", "estimated", "no log"),
        ("14:00", "15:00", "estimated", "explained"),
    ]
    logs = claude_counts(CLAUDE_LOGS)
    for u in got:
        assert u.model is not None
        want = logs.get((f"{u.start:%m-%d %H}", u.model), dict.fromkeys(TOKENS, 0))
        log = u.tokens("log")
        assert log is not None
        assert log["cache_read"] == want["cache_read"]
        assert log["cache_write"] == want["cache_write"]
        assert log["input"] == want["input"]  # the transcript's input_tokens: fresh only
        assert log["output"] == want["output"]
        assert u.calls == (3 if u.start.hour == 10 else 2 if u.start.hour == 14 else 0)
    ten, eleven, two = got
    for whole in (ten, two):
        assert abs(whole.unexplained_usd) < Decimal("0.005")
        assert whole.missing_tokens == whole.extra_tokens == 0
        assert (whole.missing_usd, whole.extra_usd) == (Decimal(0), Decimal(0))
    # 1,000,000 five-minute cache writes of Sonnet 4.5 at $3.75 per million
    assert eleven.token_gap("cache_write", missing=True) == 1_000_000
    assert eleven.missing_tokens == 1_000_000 and eleven.extra_tokens == 0
    assert eleven.missing_usd == Decimal("3.75")
    assert eleven.missing_calls is None  # Anthropic's usage report counts no requests

    text = run("usage", "reconcile", "--db", str(db))
    assert "2026-03-05 10:00 Anthropic claude-sonnet-4-5-20250929" in text
    assert (
        "2026-03-05 11:00 claude-sonnet-4-5-20250929: $3.75 of Anthropic's bill has no log "
        "(1,000,000 tokens not in the logs)"
    ) in text
    assert "5 of the 5 logged calls state no cost of their own" in text


def test_a_daily_cost_report_is_shared_over_the_hours(tmp_path: Path) -> None:
    """Anthropic's cost report is daily only: over an hourly usage report of the same day and
    model its dollars are shared by the hours' list prices (``apportioned``), so the day is
    counted once and its hours add up to it."""
    db = tmp_path / "s.duckdb"
    ingest(db, HOURLY, COST_JSON, CLAUDE_LOGS)
    got = by_hour(found(db))
    assert len(got) == 3  # the day's cost report is no unit of its own
    ten = got[("03-05 10", "claude-sonnet-4-5-20250929")]
    eleven = got[("03-05 11", "claude-sonnet-4-5-20250929")]
    haiku = got[("03-05 14", "claude-haiku-4-5-20251001")]
    day = Decimal("3.907725")  # the cost report's four amounts, in cents: 0.465 + ... + 6
    assert abs(ten.billed_usd + eleven.billed_usd - day) < Decimal("1e-8")
    assert (ten.basis, eleven.basis, haiku.basis) == ("apportioned", "apportioned", "estimated")
    assert ten.status == "explained" and abs(ten.unexplained_usd) < Decimal("0.005")
    assert eleven.status == "no log"
    assert abs(eleven.missing_usd - Decimal("3.75")) < Decimal("1e-8")
    t = totals(list(got.values()))
    assert abs(t.billed_usd - (day + haiku.billed_usd)) < Decimal("1e-8")


# --- the bill has calls the telemetry lacks (claude-code #86375: 15 billed, 9 reported) --------


def test_requests_billed_and_not_logged_are_counted_and_priced(tmp_path: Path) -> None:
    """OpenAI's usage by the hour counts 15 gpt-5.3-codex requests where the Codex rollouts
    hold 9 calls: 6 missing, with their tokens (15,000 prompt tokens of which 14,000 cached,
    200 output each) and dollars; the other hour agrees."""
    db = tmp_path / "s.duckdb"
    ingest(db, OPENAI_HOURLY, CODEX_LOGS)
    got = by_hour(found(db))
    calls = codex_calls(CODEX_LOGS)
    nine = calls[("03-02 09", "gpt-5.3-codex")]
    assert len(nine) == 9
    u = got[("03-02 09", "gpt-5.3-codex")]
    assert (u.requests, u.calls, u.missing_calls, u.extra_calls) == (15, 9, 6, 0)
    assert u.log_input == sum(c["input_tokens"] for c in nine)
    assert u.log_cache_read == sum(c["cached_input_tokens"] for c in nine)
    assert u.log_output == sum(c["output_tokens"] for c in nine)
    assert u.token_gap("input", missing=True) == 6 * 1_000
    assert u.token_gap("cache_read", missing=True) == 6 * 14_000
    assert u.token_gap("output", missing=True) == 6 * 200
    # gpt-5.3-codex list prices: $1.75 per million fresh input, $0.175 cached, $14 output
    six = (6 * 1_000 * Decimal("1.75") + 6 * 14_000 * Decimal("0.175") + 6 * 200 * 14) / 10**6
    assert six == Decimal("0.042")
    assert u.status == "partly" and abs(u.missing_usd - six) < Decimal("1e-9")
    other = got[("03-03 14", "gpt-5.5")]
    assert (other.requests, other.calls, other.missing_calls, other.status) == (
        3,
        3,
        0,
        "explained",
    )
    assert len(calls[("03-03 14", "gpt-5.5")]) == 3

    text = run("usage", "reconcile", "--db", str(db))
    assert "(6 of its 15 requests and 91,200 tokens not in the logs)" in text
    assert "Where the bills count requests (18), the logs have 12 calls: 6 missing" in text
    doc = json.loads(run("usage", "reconcile", "--db", str(db), "--json"))
    first = doc["units"][0]
    assert (first["bill_requests"], first["logged_calls"], first["missing_calls"]) == (15, 9, 6)
    assert Decimal(first["missing_usd"]) == u.missing_usd
    assert doc["totals"]["missing_calls"] == 6


# --- telemetry under the wrong model name (claude-code #63536) ---------------------------------


def test_calls_under_another_models_name_are_missing_on_one_and_extra_on_the_other(
    tmp_path: Path,
) -> None:
    """The bill says Opus 4.5 where the session's two calls say Haiku 4.5: Opus's hour is
    missing its dollars, and the Haiku calls show as logs no bill row names."""
    page = json.loads(HOURLY.read_text())
    page["data"][2]["results"][0]["model"] = "claude-opus-4-5-20251101"
    bill = tmp_path / "usage_report_opus.json"
    bill.write_text(json.dumps(page, indent=2))
    db = tmp_path / "s.duckdb"
    ingest(db, bill, CLAUDE_LOGS)
    got = by_hour(found(db))
    opus = got[("03-05 14", "claude-opus-4-5-20251101")]
    haiku = got[("03-05 14", "claude-haiku-4-5-20251001")]
    assert (opus.status, opus.calls, opus.basis) == ("no log", 0, "estimated")
    assert opus.estimate_usd is not None and opus.missing_usd == opus.estimate_usd > 0
    assert (haiku.status, haiku.basis, haiku.billed_usd) == ("no bill", "no bill", Decimal(0))
    assert haiku.calls == 2 and haiku.extra_calls == 2
    assert haiku.extra_usd == haiku.logged_usd > 0
    logs = claude_counts(CLAUDE_LOGS)[("03-05 14", "claude-haiku-4-5-20251001")]
    assert haiku.token_gap("input", missing=False) == logs["input"]
    assert haiku.token_gap("output", missing=False) == logs["output"]
    t = totals(list(got.values()))
    assert t.no_bill_usd == haiku.logged_usd

    text = run("usage", "reconcile", "--db", str(db))
    assert "no bill" in text
    assert (
        "2026-03-05 14:00 claude-haiku-4-5-20251001: 2 logged calls, $0.01, that no row of "
        "Anthropic's bill names"
    ) in text


# --- cost_usd null (claude-code #56098): priced from list prices, and said ---------------------


def test_calls_that_state_no_cost_are_priced_from_list_prices_and_said(tmp_path: Path) -> None:
    """The Sonnet calls state their cost (``costUSD``, as before 2.1.122), the Haiku calls do
    not: they are priced from list prices, the unit says how many, and the hour still agrees."""
    src = next(CLAUDE_LOGS.rglob("*.jsonl"))
    lines = []
    for line in src.read_text().splitlines():
        rec = json.loads(line)
        msg = rec.get("message") or {}
        if rec.get("type") == "assistant" and "sonnet" in msg.get("model", ""):
            rec["costUSD"] = 0.05
        lines.append(json.dumps(rec))
    folder = tmp_path / "projects" / "-home-dev-shop"
    folder.mkdir(parents=True)
    (folder / src.name).write_text("\n".join(lines) + "\n")
    db = tmp_path / "s.duckdb"
    ingest(db, HOURLY, tmp_path / "projects")
    got = by_hour(found(db))
    sonnet = got[("03-05 10", "claude-sonnet-4-5-20250929")]
    haiku = got[("03-05 14", "claude-haiku-4-5-20251001")]
    assert (sonnet.stated_calls, sonnet.estimated_calls) == (3, 0)
    assert sonnet.logged_usd == Decimal("0.15")  # the log's own figures, 3 x $0.05
    assert (haiku.stated_calls, haiku.estimated_calls) == (0, 2)
    assert haiku.status == "explained"
    text = run("usage", "reconcile", "--db", str(db))
    assert "2 of the 5 logged calls state no cost of their own" in text
    doc = json.loads(run("usage", "reconcile", "--db", str(db), "--json"))
    assert [u["logged_calls_at_list_prices"] for u in doc["units"]] == [0, 0, 2]
    assert doc["totals"]["estimated_calls"] == 2


# --- key by key: --match -----------------------------------------------------------------------


def _label_calls(db: Path, where: str, labels: dict[str, str]) -> None:
    """Labels as an OpenTelemetry reader stores them (``values.labels_text``)."""
    con = duckdb.connect(str(db))
    try:
        con.execute(f"UPDATE calls SET labels = ? WHERE {where}", [labels_text(labels)])
    finally:
        con.close()


def test_a_bill_by_workspace_is_compared_workspace_by_workspace(tmp_path: Path) -> None:
    """A usage report grouped by workspace, and calls whose resource attributes name theirs:
    with --match each workspace is a unit; without it, or where no call carries the label, the
    workspaces of a bucket are summed as before."""
    page = json.loads(HOURLY.read_text())
    ten = page["data"][0]["results"][0]
    ten["workspace_id"] = "wrkspc_shop"
    other = json.loads(json.dumps(ten))
    other.update(workspace_id="wrkspc_ci", uncached_input_tokens=100_000, output_tokens=0)
    other.update(cache_read_input_tokens=0, cache_creation={"ephemeral_5m_input_tokens": 0})
    page["data"][0]["results"].append(other)
    bill = tmp_path / "usage_by_workspace.json"
    bill.write_text(json.dumps(page, indent=2))
    db = tmp_path / "s.duckdb"
    ingest(db, bill, CLAUDE_LOGS)

    summed = by_hour(found(db))[("03-05 10", "claude-sonnet-4-5-20250929")]
    assert summed.key is None and summed.calls == 3
    assert summed.token_gap("input", missing=True) == 100_000  # wrkspc_ci's, summed in

    match = Match.parse("workspace=workspace.id")
    # No call carries the label yet: the same units as without --match.
    assert [u.to_json() for u in found(db, match)] == [u.to_json() for u in found(db)]

    _label_calls(db, "model LIKE 'claude-sonnet%'", {"workspace.id": "wrkspc_shop"})
    keyed = {(f"{u.start:%H}", u.key): u for u in found(db, match)}
    shop, ci = keyed[("10", "wrkspc_shop")], keyed[("10", "wrkspc_ci")]
    assert (shop.status, shop.calls, shop.missing_tokens) == ("explained", 3, 0)
    assert (ci.status, ci.calls) == ("no log", 0)
    assert ci.token_gap("input", missing=True) == 100_000
    assert abs(ci.missing_usd - Decimal("0.30")) < Decimal("1e-9")  # $3 per million
    # The Haiku calls carry no label: the 14:00 bill (not grouped) still takes them.
    assert keyed[("14", None)].calls == 2

    out = run("usage", "reconcile", "--db", str(db), "--match", "workspace=workspace.id")
    assert "claude-sonnet-4-5-20250929 [wrkspc_ci]" in out
    rows = list(
        csv.DictReader(
            io.StringIO(
                run(
                    "usage",
                    "reconcile",
                    "--db",
                    str(db),
                    "--match",
                    "workspace=workspace.id",
                    "--csv",
                )
            )
        )
    )
    assert {r["key"] for r in rows} == {"wrkspc_shop", "wrkspc_ci", ""}
    for name in ("missing_calls", "extra_usd", "missing_cache_write_tokens", "bill_requests"):
        assert name in rows[0]

    # A call that lost its label, under a bill split by workspace: logs no bill row names.
    _label_calls(db, "call_id = 'cc:msg_01SHOPa3:req_011CShopA3'", {})
    keyed = {(f"{u.start:%H}", u.key, u.status): u for u in found(db, match)}
    assert keyed[("10", "wrkspc_shop", "partly")].calls == 2
    stray = keyed[("10", None, "no bill")]
    assert (stray.calls, stray.extra_calls, stray.model) == (1, 1, "claude-sonnet-4-5-20250929")
    out = run("usage", "reconcile", "--db", str(db), "--match", "workspace=workspace.id")
    assert "2026-03-05 10:00 Anthropic claude-sonnet-4-5-20250929 [no label]" in out


def test_match_is_checked() -> None:
    result = CliRunner().invoke(cli, ["usage", "reconcile", "--match", "team"])
    assert result.exit_code == 2 and "BILL_KEY=LABEL" in result.output
    result = CliRunner().invoke(cli, ["usage", "daily", "--match", "workspace=x"])
    assert result.exit_code == 2 and "--match is an option of `usage reconcile`" in result.output


# --- the real Console exports: a day's units, no calls -----------------------------------------


def test_the_real_console_exports_give_a_days_units_with_every_gap(tmp_path: Path) -> None:
    """The real Console usage and cost exports (one day, daily): the units keep the day, the
    bill's tokens by kind come out of the usage export's columns, and with no log each unit's
    whole bill is missing."""
    folder = shared_samples() / "more-formats" / "anthropic-admin-usage-cost"
    db = tmp_path / "s.duckdb"
    ingest(db, *sorted(folder.glob("*.csv")))
    got = {u.model: u for u in found(db)}
    opus = got["claude-opus-4-5-20251101"]
    assert (opus.start.isoformat(), opus.end.isoformat()) == (
        "2026-02-01T00:00:00",
        "2026-02-02T00:00:00",
    )
    bill = opus.tokens("bill")
    # the export row: 43 fresh, 302,527 5-minute writes, 3,301,672 read, 32,676 out
    assert bill == {"input": 43, "cache_read": 3_301_672, "cache_write": 302_527, "output": 32_676}
    assert opus.missing_tokens == sum(bill.values()) and opus.extra_tokens == 0
    assert opus.basis == "billed" and opus.missing_usd == opus.billed_usd == Decimal("4.36")
    assert opus.missing_calls is None


# --- the real Claude Code transcripts against a bill of their own hours ------------------------


def test_real_transcripts_against_an_hourly_bill_of_their_own_tokens(tmp_path: Path) -> None:
    """The real-world Claude Code history against an hourly usage report that bills exactly
    the tokens its calls logged, hour by hour and model by model: no token is missing or extra
    in any hour, and the dollars agree to a millionth of a dollar at the logged output counts
    (what differs is only the estimate of the placeholder output counts, said per unit). The
    Codex calls beside them have no OpenAI bill: they are not compared."""
    db = tmp_path / "s.duckdb"
    ingest(db, shared_samples() / "real-world")
    con = duckdb.connect(str(db), read_only=True)
    try:
        hours = con.execute(
            """SELECT date_trunc('hour', ts), model,
                      sum(input_tokens - coalesce(cached_input_tokens, 0)
                          - coalesce(cache_write_tokens, 0)),
                      sum(coalesce(cached_input_tokens, 0)),
                      sum(coalesce(cache_write_tokens, 0) - coalesce(cache_write_1h_tokens, 0)),
                      sum(coalesce(cache_write_1h_tokens, 0)), sum(output_tokens), count(*)
               FROM live_calls WHERE model LIKE 'claude%' AND ts IS NOT NULL
               GROUP BY ALL ORDER BY ALL"""
        ).fetchall()
        claude = con.execute(
            "SELECT count(*) FROM live_calls WHERE model LIKE 'claude%' AND ts IS NOT NULL"
        ).fetchone()
    finally:
        con.close()
    buckets: dict[datetime, list[dict[str, object]]] = defaultdict(list)
    for hour, model, fresh, read, w5, w1, out, _ in hours:
        result = json.loads(json.dumps(json.loads(HOURLY.read_text())["data"][0]["results"][0]))
        result.update(model=model, uncached_input_tokens=int(fresh), output_tokens=int(out))
        result.update(cache_read_input_tokens=int(read), context_window=None)
        result["cache_creation"] = {
            "ephemeral_5m_input_tokens": int(w5),
            "ephemeral_1h_input_tokens": int(w1),
        }
        buckets[hour].append(result)
    page = {
        "data": [
            {
                "starting_at": f"{h:%Y-%m-%dT%H:00:00Z}",
                "ending_at": f"{h + _HOUR:%Y-%m-%dT%H:00:00Z}",
                "results": results,
            }
            for h, results in sorted(buckets.items())
        ],
        "has_more": False,
        "next_page": None,
    }
    bill = tmp_path / "usage_report_hourly.json"
    bill.write_text(json.dumps(page))
    ingest(db, bill)
    got = found(db)
    assert len(got) == len(hours) > 20
    assert claude is not None and sum(u.calls for u in got) == claude[0]
    for u in got:
        assert u.end - u.start == _HOUR and u.basis == "estimated"
        assert (u.missing_tokens, u.extra_tokens) == (0, 0), u
        assert abs(u.unexplained_at_logged_output_usd) < Decimal("1e-6"), u
        assert u.unexplained_usd == -u.placeholder_usd
    t = totals(got)
    assert t.no_log_usd == 0 and t.missing_tokens == t.extra_tokens == 0
    assert t.estimated_calls == claude[0]
