"""OpenTelemetry against the bill: Claude Code's ``api_request`` events (``tests/fixtures/otel``)
held by ``usage reconcile`` against an hourly Admin API usage report of the same hour.

The events' tokens are counted here again from the fixture's envelopes (each ``request_id``
once: the fixture exports one batch twice), and the bill is written from them, as the provider
would bill the same requests, plus what the telemetry lost: the case of anthropics/claude-code
#86375, requests billed that the telemetry never reported.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analyzer.detect.reconcile import Match, Unit, units
from analyzer.engine.store import open_store
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from tests.helpers import REPO

EVENTS = REPO / "tests" / "fixtures" / "otel" / "claude_code_session.jsonl"
TOKENS = ("input", "cache_read", "cache_write", "output")
LOST = {"input": 900, "cache_read": 40_000, "cache_write": 2_500, "output": 1_200}


def _requests() -> dict[str, dict[str, Any]]:
    """The fixture's api_request events by request id: hour, model, tokens, labels."""
    out: dict[str, dict[str, Any]] = {}
    for line in EVENTS.read_text().splitlines():
        for rl in json.loads(line).get("resourceLogs", []):
            resource = {a["key"]: a["value"] for a in rl["resource"]["attributes"]}
            for sl in rl["scopeLogs"]:
                for rec in sl["logRecords"]:
                    a = {x["key"]: next(iter(x["value"].values())) for x in rec["attributes"]}
                    if a.get("event.name") != "api_request":
                        continue
                    out[a["request_id"]] = {
                        "ns": int(rec["timeUnixNano"]),
                        "model": a["model"],
                        "input": int(a["input_tokens"]),
                        "cache_read": int(a["cache_read_tokens"]),
                        "cache_write": int(a["cache_creation_tokens"]),
                        "output": int(a["output_tokens"]),
                        "team": resource["team.id"]["stringValue"],
                    }
    return out


def _bill(path: Path, tokens: dict[str, int], hour: int, workspace: str | None) -> None:
    """An hourly usage report page (the Admin API's shape, as tests/fixtures/reconcile) of one
    hour and model."""
    start = hour * 3600
    iso = "%Y-%m-%dT%H:%M:%SZ"
    page = {
        "data": [
            {
                "starting_at": datetime.fromtimestamp(start, UTC).strftime(iso),
                "ending_at": datetime.fromtimestamp(start + 3600, UTC).strftime(iso),
                "results": [
                    {
                        "uncached_input_tokens": tokens["input"],
                        "cache_read_input_tokens": tokens["cache_read"],
                        "cache_creation": {
                            "ephemeral_1h_input_tokens": 0,
                            "ephemeral_5m_input_tokens": tokens["cache_write"],
                        },
                        "output_tokens": tokens["output"],
                        "server_tool_use": {"web_search_requests": 0},
                        "api_key_id": None,
                        "workspace_id": workspace,
                        "model": "claude-sonnet-4-5-20250929",
                        "service_tier": "standard",
                        "context_window": "0-200k",
                        "inference_geo": None,
                    }
                ],
            }
        ],
        "has_more": False,
        "next_page": None,
    }
    path.write_text(json.dumps(page))


def _units(tmp_path: Path, lost: dict[str, int], match: Match | None = None) -> list[Unit]:
    requests = _requests()
    (hour,) = {r["ns"] // 3_600_000_000_000 for r in requests.values()}
    (team,) = {r["team"] for r in requests.values()}
    billed = {k: sum(r[k] for r in requests.values()) + lost.get(k, 0) for k in TOKENS}
    report = tmp_path / "usage_report.json"
    _bill(report, billed, hour, team if match else None)
    db = tmp_path / "s.duckdb"
    with open_store(db) as store:
        list(ingest_paths(store, [str(EVENTS), str(report)], IngestOptions(progress=False)))
    with open_store(db, read_only=True) as store:
        return units(store, match)


def test_telemetry_that_covers_the_hour_leaves_nothing_missing(tmp_path: Path) -> None:
    (unit,) = _units(tmp_path, {})
    assert unit.calls == len(_requests()) == 3
    assert unit.missing_tokens == 0 and unit.extra_tokens == 0
    # one request's cost_usd is null (Claude Code 2.1.122 on): priced from list prices
    assert unit.estimated_calls == 1 and unit.stated_calls == 2


def test_requests_the_telemetry_lost_are_missing_from_it(tmp_path: Path) -> None:
    (unit,) = _units(tmp_path, LOST)
    assert unit.calls == 3 and unit.status == "partly"
    for kind in TOKENS:
        assert unit.token_gap(kind, missing=True) == LOST[kind]
        assert unit.token_gap(kind, missing=False) == 0
    assert unit.missing_usd > 0 and unit.extra_usd == 0


def test_a_bill_by_workspace_meets_the_resource_attribute_that_names_it(tmp_path: Path) -> None:
    """OTEL_RESOURCE_ATTRIBUTES=team.id=...: the bill's workspace id is the team's, so
    ``--match workspace=team.id`` compares the workspace's row with that team's events."""
    (unit,) = _units(tmp_path, LOST, Match.parse("workspace=team.id"))
    (team,) = {r["team"] for r in _requests().values()}
    assert unit.key is not None and team in unit.key
    assert unit.calls == 3
    assert unit.token_gap("output", missing=True) == LOST["output"]
