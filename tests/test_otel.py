"""OpenTelemetry exports of agents' events (``analyzer.formats.otel``): sniffing by content,
the OTLP/JSON envelope and flat lines, the accounting, rejects, golden figures on the fixture
(``tests/fixtures/otel/``, following the real Claude Code export its README cites), Codex's
and Gemini CLI's events, and loops planted in events found by the detectors."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from analyzer.formats import otel
from analyzer.ingest.base import IngestOptions
from analyzer.ingest.reading import read_head
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths

FIXTURES = Path(__file__).parent / "fixtures" / "otel"
SESSION_FILE = FIXTURES / "claude_code_session.jsonl"
T0 = 1_791_447_316_602  # ms, as the real export's first event


def ingest(db: Path, *paths: Path) -> list[FileReport]:
    with open_store(db) as store:
        return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False))


def q(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with open_store(db, read_only=True) as store:
        return store.con.execute(sql).fetchall()


def skipped(db: Path) -> dict[str, int]:
    """The kinds of records skipped, of the one file in the store."""
    [(kinds,)] = q(db, "SELECT skipped_kinds FROM sources")
    found: dict[str, int] = json.loads(kinds) if kinds else {}
    return found


def closes(r: FileReport) -> bool:
    return r.rows_read == r.rows_loaded + r.rows_rejected + r.rows_duplicate + r.rows_skipped


# -- builders (the shape of the real Claude Code 2.1.294 export: see the fixtures' README) ----


def kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": value}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def cc_event(name: str, session: str, seq: int, ms: int, **attrs: Any) -> dict[str, Any]:
    pairs = {
        "user.email": "dev@example.com",
        "session.id": session,
        "terminal.type": "xterm-256color",
        "event.name": name,
        "event.sequence": seq,
        "prompt.id": f"{session}-p1",
        **attrs,
    }
    return {
        "timeUnixNano": f"{ms}000000",
        "observedTimeUnixNano": f"{ms}000000",
        "body": {"stringValue": f"claude_code.{name}"},
        "attributes": [kv(k, v) for k, v in pairs.items()],
        "droppedAttributesCount": 0,
    }


def batch(*records: dict[str, Any], team: str = "platform") -> dict[str, Any]:
    resource = [kv("service.name", "claude-code"), kv("team.id", team)]
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": resource},
                "scopeLogs": [
                    {
                        "scope": {"name": "com.anthropic.claude_code.events"},
                        "logRecords": list(records),
                    }
                ],
            }
        ]
    }


def api(session: str, seq: int, ms: int, inp: int, out: int, cr: int = 0, **more: Any) -> Any:
    return cc_event(
        "api_request",
        session,
        seq,
        ms,
        model="claude-sonnet-4-5",
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=cr,
        cache_creation_tokens=0,
        duration_ms=900,
        **more,
    )


def write(path: Path, *objs: Any) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


# -- sniffing ------------------------------------------------------------------------------


def test_sniffed_by_content_not_by_name(tmp_path: Path) -> None:
    renamed = tmp_path / "whatever.log"
    renamed.write_bytes(SESSION_FILE.read_bytes())
    assert otel.sniff(read_head(renamed, "w"))
    [r] = ingest(tmp_path / "s.duckdb", renamed)
    assert r.format == "otel"
    other = write(tmp_path / "x.jsonl", {"type": "user", "message": {"content": "hi"}})
    assert not otel.sniff(read_head(other, "x"))


# -- the fixture: golden figures -------------------------------------------------------------


def test_the_fixture_golden_figures(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    [r] = ingest(db, SESSION_FILE)
    # 13 records: 11 events in 5 envelope lines, 2 metrics, 1 event exported twice.
    assert (r.rows_read, r.rows_loaded, r.rows_duplicate, r.rows_skipped) == (13, 6, 1, 6)
    assert r.rows_rejected == 0 and closes(r)
    assert skipped(db) == {
        "claude_code.assistant_response": 1,
        "claude_code.hook_registered": 1,
        "claude_code.mcp_server_connection": 1,
        "claude_code.tool_decision": 1,
        "metric": 2,
    }
    calls = q(
        db,
        """SELECT call_id, input_tokens, cached_input_tokens, cache_write_tokens, output_tokens,
                  cost_usd, cost_basis, tool_call_count, app, provider, labels
           FROM calls ORDER BY ts""",
    )
    assert [c[0] for c in calls] == [
        "otel:req_011CfpSK96NthX9vPNsW9X2b",
        "otel:req_011CfpSK96NthX9vPNsW9X3c",
        "otel:req_011CfpSK96NthX9vPNsW9X4d",
    ]
    # input_tokens is the whole prompt: fresh + cache write + cache read.
    assert [c[1:5] for c in calls] == [
        (2 + 13356 + 9179, 9179, 13356, 40),
        (3 + 410 + 22535, 22535, 410, 120),
        (1 + 0 + 22945, 22945, 0, 300),
    ]
    assert [(c[5], c[6]) for c in calls] == [
        (Decimal("0.0027651900"), "reported"),  # (stored to 10 places)
        # cost_usd null (Claude Code 2.1.122 on): list prices, $3/$15/$3.75/$0.30 a million
        (Decimal("0.0101070000"), "estimated"),  # 3x3 + 120x15 + 410x3.75 + 22535x0.30
        (Decimal("0.0114000000"), "reported"),
    ]
    assert [c[7] for c in calls] == [1, 1, 0]
    assert {(c[8], c[9]) for c in calls} == {("claude-code", "anthropic")}
    labels = json.loads(calls[0][10])
    assert labels["team.id"] == "platform" and labels["cost_center"] == "cc-42"
    assert labels["user.email"] == "dev@example.com" and "session.id" not in labels
    msgs = q(
        db,
        """SELECT idx, kind, tool_name, is_error, tool_result_hash IS NULL, excerpt
           FROM messages ORDER BY idx""",
    )
    assert [(m[0], m[1], m[2], m[3]) for m in msgs] == [
        (28, "prompt", None, None),
        (36, "tool_call", "Bash", None),
        (37, "tool_result", "Bash", False),  # succeeded; what came back is not in the event
        (40, "tool_call", "Edit", None),
        (41, "tool_result", "Edit", True),
    ]
    assert msgs[2][4] is True and msgs[4][4] is False
    assert msgs[4][5] == "String to replace not found in file"


def test_usage_daily_equals_a_hand_sum(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest(db, SESSION_FILE)
    result = CliRunner().invoke(cli, ["usage", "daily", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    [day] = json.loads(result.stdout)["daily"]
    assert day["period"] == "2026-10-08" and day["calls"] == 3
    assert day["input"] == 2 + 3 + 1
    assert day["cache_write"] == 13356 + 410
    assert day["cache_read"] == 9179 + 22535 + 22945
    assert day["output"] == 40 + 120 + 300
    assert round(day["usd_reported"], 8) == round(0.0027651900000000003 + 0.0114, 8)
    # claude-sonnet-4-5 at list prices ($3 in, $15 out, $3.75 cache write, $0.30 cache read
    # per million): 3 x 3 + 120 x 15 + 410 x 3.75 + 22535 x 0.30, over a million.
    estimated = (3 * 3 + 120 * 15 + 410 * 3.75 + 22535 * 0.30) / 1e6
    assert round(day["usd_estimated"], 8) == round(estimated, 8)


def test_the_same_export_twice_in_two_files_is_counted_once(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    copy = tmp_path / "again.jsonl"
    copy.write_bytes(SESSION_FILE.read_bytes() + b"\n")  # (another file: not the same bytes)
    first, second = ingest(db, SESSION_FILE, copy)
    assert first.rows_loaded == 6 and second.rows_loaded == 0 and closes(second)
    assert q(db, "SELECT count(*) FROM calls") == [(3,)]
    assert q(db, "SELECT count(*) FROM messages") == [(5,)]


# -- damaged input -------------------------------------------------------------------------


def test_rejects_name_their_line_and_reason(tmp_path: Path) -> None:
    good = api("s1", 1, T0, 10, 5)
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps(batch(good, "not a record", {"attributes": 7}))
        + "\n{not json\n"
        + json.dumps({"resourceLogs": {"no": "list"}})
        + "\n",
        encoding="utf-8",
    )
    db = tmp_path / "s.duckdb"
    [r] = ingest(db, path)
    assert r.rows_read == 5 and r.rows_loaded == 1 and r.rows_rejected == 4 and closes(r)
    rejects = q(db, "SELECT line, reason FROM rejects ORDER BY line, reason")
    assert rejects == [
        (1, "a log record that is not an object"),
        (1, "attributes that are not a list of key/value pairs"),
        (2, rejects[2][1]),
        (3, "resourceLogs is not a list"),
    ]
    assert rejects[2][1].startswith("not valid JSON")


# -- Codex and Gemini CLI, flat shapes ---------------------------------------------------------


def clickhouse_row(ts: str, service: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """A row of the Collector's ClickHouse exporter's ``otel_logs`` table, as JSONEachRow."""
    return {
        "Timestamp": ts,
        "TraceId": "",
        "SpanId": "",
        "TraceFlags": 0,
        "SeverityText": "",
        "SeverityNumber": 0,
        "ServiceName": service,
        "Body": attrs["event.name"],
        "ResourceSchemaUrl": "",
        "ResourceAttributes": {"service.name": service, "department": "research"},
        "ScopeSchemaUrl": "",
        "ScopeName": service,
        "ScopeVersion": "",
        "ScopeAttributes": {},
        "LogAttributes": attrs,
    }


def test_codex_events_as_clickhouse_rows(tmp_path: Path) -> None:
    conv = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    common = {"conversation.id": conv, "app.version": "0.46.0", "model": "gpt-5-codex"}
    rows = [
        clickhouse_row(
            "2025-10-07 09:00:00.000000000",
            "codex_cli_rs",
            {**common, "event.name": "codex.user_prompt", "prompt_length": "12"},
        ),
        clickhouse_row(
            "2025-10-07 09:00:01.000000000",
            "codex_cli_rs",
            {**common, "event.name": "codex.api_request", "http.response.status_code": "200"},
        ),
        clickhouse_row(
            "2025-10-07 09:00:04.000000000",
            "codex_cli_rs",
            {
                **common,
                "event.name": "codex.sse_event",
                "event.kind": "response.completed",
                "input_token_count": "12000",
                "cached_token_count": "8000",
                "output_token_count": "300",
                "reasoning_token_count": "200",
                "tool_token_count": "0",
            },
        ),
        clickhouse_row(
            "2025-10-07 09:00:05.000000000",
            "codex_cli_rs",
            {
                **common,
                "event.name": "codex.tool_result",
                "tool_name": "shell",
                "call_id": "call_abc",
                "arguments": '{"command":["bash","-lc","ls"]}',
                "duration_ms": "40",
                "success": "true",
                "output": "README.md\nsrc\n",
            },
        ),
        clickhouse_row(
            "2025-10-07 09:00:06.000000000",
            "codex_cli_rs",
            {**common, "event.name": "codex.sse_event", "event.kind": "response.output_item.done"},
        ),
    ]
    db = tmp_path / "s.duckdb"
    [r] = ingest(db, write(tmp_path / "codex.jsonl", *rows))
    assert r.format == "otel" and closes(r) and r.rows_read == 5 and r.rows_loaded == 3
    assert skipped(db) == {
        "codex.api_request": 1,
        "codex.sse_event (response.output_item.done)": 1,
    }
    [call] = q(
        db,
        """SELECT app, provider, model, input_tokens, cached_input_tokens, output_tokens,
                  reasoning_tokens, tool_call_count, session_id, labels FROM calls""",
    )
    assert call[:9] == ("codex", "openai", "gpt-5-codex", 12000, 8000, 300, 200, 1, conv)
    assert json.loads(call[9])["department"] == "research"
    [(excerpt, is_error)] = q(
        db, "SELECT excerpt, is_error FROM messages WHERE kind = 'tool_result'"
    )
    assert excerpt.startswith("README.md") and is_error is False


def test_gemini_cli_events_as_otlp_records(tmp_path: Path) -> None:
    """One OTLP log record a line (an envelope taken apart): Gemini CLI's events."""

    def record(ms: int, name: str, **attrs: Any) -> dict[str, Any]:
        pairs = {"session.id": "g-1", "event.name": name, "installation.id": "i-1", **attrs}
        return {
            "timeUnixNano": f"{ms}000000",
            "body": {"stringValue": f"API response from gemini-2.5-pro. Status: {name}"},
            "attributes": [kv(k, v) for k, v in pairs.items()],
        }

    lines = [
        record(T0, "gemini_cli.user_prompt", prompt_id="g-1########0", prompt_length=20),
        record(T0 + 10, "gemini_cli.api_request", model="gemini-2.5-pro", prompt_id="g-1########0"),
        record(
            T0 + 2000,
            "gemini_cli.api_response",
            model="gemini-2.5-pro",
            prompt_id="g-1########0",
            status_code=200,
            duration_ms=1990,
            input_token_count=5000,
            cached_content_token_count=1000,
            output_token_count=100,
            thoughts_token_count=50,
            tool_token_count=0,
            total_token_count=5150,
        ),
        record(
            T0 + 2100,
            "gemini_cli.tool_call",
            function_name="read_file",
            function_args='{"absolute_path":"/tmp/x"}',
            duration_ms=3,
            success=False,
            error="File not found: /tmp/x",
            prompt_id="g-1########0",
        ),
    ]
    db = tmp_path / "s.duckdb"
    [r] = ingest(db, write(tmp_path / "gemini.jsonl", *lines))
    assert r.format == "otel" and closes(r) and skipped(db) == {"gemini_cli.api_request": 1}
    [call] = q(
        db,
        """SELECT app, input_tokens, cached_input_tokens, output_tokens, reasoning_tokens,
                  http_status, turn_id FROM calls""",
    )
    assert call == ("gemini-cli", 5000, 1000, 150, 50, 200, "g-1########0")
    [(name, is_error)] = q(
        db, "SELECT tool_name, is_error FROM messages WHERE kind = 'tool_result'"
    )
    assert (name, is_error) == ("read_file", True)


# -- loops in events -------------------------------------------------------------------------


NAMES = ["parser", "lexer", "tokens", "grammar", "errors", "main"]


def test_a_loop_in_events_is_found_and_a_healthy_session_is_not(tmp_path: Path) -> None:
    """The same Bash command failing with the same error, call after call (the tool's
    parameters logged: OTEL_LOG_TOOL_DETAILS=1), beside a healthy session."""
    loop, healthy = [], []
    params = json.dumps({"bash_command": "pytest", "full_command": "pytest -x tests/"})
    for i in range(6):
        ms, seq = T0 + i * 10_000, 2 * i + 1
        loop.append(api("loop", seq, ms, 5, 30, cr=20_000 + i * 200, request_id=f"req_L{i}"))
        loop.append(
            cc_event(
                "tool_result",
                "loop",
                seq + 1,
                ms + 3000,
                tool_name="Bash",
                success="false",
                error="Exit code 1\nModuleNotFoundError: No module named 'app'",
                tool_parameters=params,
            )
        )
    for i in range(6):
        ms, seq = T0 + i * 10_000, 2 * i + 1
        healthy.append(api("fine", seq, ms, 5, 400, cr=20_000 + i * 3000, request_id=f"req_H{i}"))
        healthy.append(
            cc_event(
                "tool_result",
                "fine",
                seq + 1,
                ms + 3000,
                tool_name="Edit",
                success="true",
                tool_parameters=json.dumps({"file_path": f"src/{NAMES[i]}.py"}),
            )
        )
    path = write(tmp_path / "export.jsonl", batch(*loop), batch(*healthy, team="other"))
    result = CliRunner().invoke(cli, ["audit", str(path), "--json", "-q"])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    found = [i for i in data["incidents"] if i["detector"] == "repeated_tool_call"]
    assert len(found) == 1, data["incidents"]
    assert {i["session_id"] for i in data["incidents"]} == {"loop"}
    assert found[0]["n_calls"] >= 3 and found[0]["wasted_usd"] > 0


def test_seed_000_constant_input_low_output_as_api_request_events(tmp_path: Path) -> None:
    """Seed 000's run: a 56,065-token prompt sent again and again, 3 tokens back each time."""
    events = [
        api("seed000", i + 1, T0 + i * 4000, 56_065, 3, request_id=f"req_S{i}") for i in range(22)
    ]
    path = write(tmp_path / "seed.jsonl", batch(*events))
    result = CliRunner().invoke(cli, ["audit", str(path), "--json", "-q"])
    data = json.loads(result.stdout)
    [inc] = [i for i in data["incidents"] if i["detector"] == "constant_input_low_output"]
    assert inc["n_calls"] == 22
