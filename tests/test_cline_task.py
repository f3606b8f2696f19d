"""The classic Cline / Roo Code task log (``tasks/<taskId>/ui_messages.json``) on hand-written
tasks of the shape Cline's and Roo Code's source write (tests/fixtures/cline_task). No real
task file could be copied (the ones found are unlicensed), so there is no golden on a real file."""

from __future__ import annotations

import json
import shutil
import tempfile
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.errors import InputError
from analyzer.formats import cline, cline_task, conversation_json, places
from analyzer.ingest.base import Head, IngestOptions
from analyzer.load.flow import FileReport, ingest_file
from analyzer.pipeline import ingest_paths
from tests.helpers import counts, env_of, q
from tests.test_properties import (
    CONVERSATION_SEEDS,
    JSON_DOC_MUTATIONS,
    PROPERTY_SETTINGS,
    _check_loaded,
    check_drawn,
    mutate,
)

FIXTURES = Path(__file__).parent / "fixtures" / "cline_task"
CLINE_ID = "1767261600000"
ROO_ID = "3c5e1f7a-2b4d-4e6f-8a0c-1e3b5d7f9a2c"
CLINE = FIXTURES / CLINE_ID / "ui_messages.json"
ROO = FIXTURES / ROO_ID / "ui_messages.json"
SEEDS = {p.parent.name: p.read_bytes() for p in (CLINE, ROO)}
SONNET = "claude-sonnet-4-5-20250929"


def ingest(store: Store, *paths: Path) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False))


def head(data: bytes) -> Head:
    return Head(data=data[:65536], compression=None, encoding="utf-8")


def write_task(folder: Path, doc: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ui_messages.json"
    path.write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
    return path


def request(ts: int, **info: object) -> dict[str, object]:
    return {"ts": ts, "type": "say", "say": "api_req_started", "text": json.dumps(info)}


# --- Sniffing ----------------------------------------------------------------------------------


def test_the_sniffer_takes_only_task_messages() -> None:
    assert cline_task.sniff(head(CLINE.read_bytes())) and cline_task.sniff(head(ROO.read_bytes()))
    indented = json.dumps(json.loads(ROO.read_text()), indent=2).encode()
    assert cline_task.sniff(head(indented))
    for raw in CONVERSATION_SEEDS.values():  # saved conversations stay theirs
        assert not cline_task.sniff(head(raw)) and conversation_json.sniff(head(raw))
    sdk = (Path(__file__).parent / "fixtures" / "cline").glob("*.messages.json")
    for path in sdk:  # Cline's new SDK sessions stay theirs
        assert not cline_task.sniff(head(path.read_bytes())) and cline.sniff(
            head(path.read_bytes())
        )
    assert not cline_task.sniff(head(b'[{"role": "user", "content": "hi"}]'))
    assert not cline_task.sniff(head(b'[{"ts": 1, "type": "message"}]'))
    assert not cline_task.sniff(head(b'{"ts": 1, "type": "say"}'))


def test_found_by_content_under_another_name(store: Store, tmp_path: Path) -> None:
    other = tmp_path / "notes" / "export.txt"
    other.parent.mkdir()
    shutil.copyfile(CLINE, other)
    [r] = ingest(store, other.parent)
    assert (r.format, r.status, r.rows_rejected) == ("cline_task", "loaded", 0)
    assert q(store, "SELECT DISTINCT session_id FROM calls") == [("export",)]


# --- The Cline task (Anthropic provider) -------------------------------------------------------


def test_cline_task_calls(store: Store) -> None:
    [r] = ingest(store, CLINE)
    # 23 messages: 6 requests (+ a reasoning and an api_req_failed folded into theirs), 12
    # messages; checkpoint_created, ask completion_result and resume_task skipped.
    assert counts(r) == (23, 20, 0, 0, 3)
    [(kinds,)] = q(store, "SELECT skipped_kinds FROM sources")
    assert json.loads(kinds) == {
        "ask_completion_result": 1,
        "ask_resume_task": 1,
        "say_checkpoint_created": 1,
    }
    rows = q(
        store,
        """SELECT line, model, provider, app, input_tokens, cached_input_tokens,
                  cache_write_tokens, output_tokens, cost_usd, cost_basis, finish_reason,
                  response_kind, reasoning_chars, record_count
           FROM calls ORDER BY seq""",
    )
    a, c = "anthropic", "cline"
    assert rows == [
        # tokensIn 4 beside cacheWrites 11145: the fresh part, so the prompt is their sum.
        (
            2,
            SONNET,
            a,
            c,
            11149,
            0,
            11145,
            142,
            Decimal("0.04397175"),
            "reported",
            "unknown",
            "tool_call",
            45,
            2,
        ),
        (
            6,
            SONNET,
            a,
            c,
            12638,
            11145,
            1490,
            388,
            Decimal("0.0147141"),
            "reported",
            "unknown",
            "tool_call",
            0,
            1,
        ),
        (
            10,
            SONNET,
            a,
            c,
            13050,
            12635,
            412,
            96,
            Decimal("0.00680535"),
            "reported",
            "unknown",
            "tool_call",
            0,
            1,
        ),
        (
            14,
            SONNET,
            a,
            c,
            13255,
            13047,
            205,
            121,
            Decimal("0.00650985"),
            "reported",
            "unknown",
            "tool_call",
            0,
            1,
        ),
        (
            18,
            SONNET,
            a,
            c,
            13255,
            13252,
            0,
            9,
            Decimal("0.0041106"),
            "reported",
            "cancelled",
            "text",
            0,
            1,
        ),
        # streaming_failed, cost 0 (read as none: the zero tokens are priced at $0).
        (22, SONNET, a, c, 0, 0, 0, 0, Decimal(0), "estimated", "error", "error", 0, 2),
    ]
    estimates = q(store, "SELECT count(cost_estimate_usd) FROM calls")
    assert estimates == [(6,)]  # Anthropic's list price beside every reported cost


def test_cline_task_turns_and_tools(store: Store) -> None:
    ingest(store, CLINE)
    turns = q(store, "SELECT turn_id, count(*) FROM calls GROUP BY 1 ORDER BY 1")
    assert turns == [
        (f"{CLINE_ID}:1767261600000", 4),
        (f"{CLINE_ID}:1767261661200", 1),
        (f"{CLINE_ID}:1767261670100", 1),
    ]
    prompts = q(store, "SELECT excerpt FROM messages WHERE kind = 'prompt' ORDER BY idx")
    assert [p for (p,) in prompts] == [
        "Add a --verbose flag to the CLI in src/cli.py",
        "Also document it in the README",
        "go on",
    ]
    tools = q(
        store,
        """SELECT c.tool_name, r.excerpt FROM messages c LEFT JOIN messages r
             ON r.kind = 'tool_result' AND r.tool_use_id = c.tool_use_id
           WHERE c.kind = 'tool_call' ORDER BY c.idx""",
    )
    assert tools == [
        ("readFile", None),
        ("editedExistingFile", None),
        ("execute_command", "...\n3 passed in 0.41s"),
        ("attempt_completion", None),
    ]
    owners = q(
        store,
        """SELECT c.line, count(*) FROM messages m JOIN calls c ON c.call_id = m.call_id
           GROUP BY 1 ORDER BY 1""",
    )
    assert owners == [(2, 2), (6, 2), (10, 2), (14, 1), (18, 1)]


# --- The Roo Code task (apiProtocol) ----------------------------------------------------------


def test_roo_task_calls(store: Store) -> None:
    [r] = ingest(store, ROO)
    assert counts(r) == (15, 13, 0, 0, 2)
    rows = q(
        store,
        """SELECT model, app, input_tokens, cached_input_tokens, cache_write_tokens,
                  output_tokens, cost_usd, cost_basis, cost_estimate_usd, response_kind
           FROM calls ORDER BY seq""",
    )
    # Roo's tokensIn is the whole prompt; no model is written: only the reported cost.
    assert rows == [
        (
            None,
            "roo-code",
            15012,
            0,
            15004,
            211,
            Decimal("0.0594465"),
            "reported",
            None,
            "tool_call",
        ),
        (
            None,
            "roo-code",
            15730,
            15004,
            712,
            402,
            Decimal("0.0132027"),
            "reported",
            None,
            "tool_call",
        ),
        (
            None,
            "roo-code",
            16290,
            15716,
            560,
            88,
            Decimal("0.0081618"),
            "reported",
            None,
            "tool_call",
        ),
        (
            None,
            "roo-code",
            16420,
            16276,
            140,
            104,
            Decimal("0.0069648"),
            "reported",
            None,
            "tool_call",
        ),
    ]
    first = q(store, "SELECT kind, excerpt FROM messages WHERE idx = 1")
    assert first == [("prompt", "Why does parse_date fail on 2026-02-29? Fix it.")]


def test_how_tokens_in_is_read(store: Store, tmp_path: Path) -> None:
    """Cline: fresh part (disjoint), except the OpenAI-compatible provider (whole prompt, its
    cacheWrites are DeepSeek's misses); Roo: whole prompt unless below its cache counts."""
    mi = {"providerId": "openai", "modelId": "deepseek-chat", "mode": "act"}
    doc = [
        {"ts": 1767261600000, "type": "say", "say": "task", "text": "hi"},
        {
            **request(1767261601000, tokensIn=900, tokensOut=5, cacheReads=700, cacheWrites=200),
            "modelInfo": mi,
        },
        request(
            1767261602000,
            apiProtocol="anthropic",
            tokensIn=10,
            tokensOut=5,
            cacheReads=700,
            cacheWrites=20,
        ),
        request(
            1767261603000,
            apiProtocol="openai",
            tokensIn=900,
            tokensOut=5,
            cacheReads=700,
            cacheWrites=0,
            modelId="gpt-4.1",
            providerId="openai-native",
        ),
        request(1767261604000, tokensOut=3),
    ]
    [r] = ingest(store, write_task(tmp_path / "t1", doc))
    assert counts(r) == (5, 5, 0, 0, 0)
    rows = q(
        store,
        """SELECT model, provider, input_tokens, cached_input_tokens, cache_write_tokens,
                  output_tokens FROM calls ORDER BY seq""",
    )
    assert rows == [
        ("deepseek-chat", None, 900, 700, 0, 5),
        ("deepseek-chat", None, 730, 700, 20, 5),  # older Roo: the fresh part
        ("gpt-4.1", "openai", 900, 700, 0, 5),
        ("deepseek-chat", None, None, None, None, 3),  # no tokensIn: no prompt count
    ]


def test_bad_messages_are_rejected_by_their_number(store: Store, tmp_path: Path) -> None:
    doc = json.loads(CLINE.read_text(encoding="utf-8"))
    doc.insert(1, "not a message")
    doc[3]["type"] = "message"
    doc[6]["text"] = "{not json"  # the second api_req_started
    doc[12].pop("ask")
    [r] = ingest(store, write_task(tmp_path / CLINE_ID, doc))
    assert q(store, "SELECT line, reason FROM rejects ORDER BY line") == [
        (2, "a message that is not an object"),
        (4, "a message whose type is neither say nor ask"),
        (7, "an api_req_started whose text is not a JSON object"),
        (13, "a ask message without its kind"),
    ]
    assert r.rows_read == 24 and r.rows_rejected == 4
    assert r.rows_read == r.rows_loaded + r.rows_rejected + r.rows_duplicate + r.rows_skipped


@pytest.mark.parametrize(
    ("text", "why"),
    [('{"ts": 1, "type": "say"}', "not a list"), ('[{"ts": 1, "type": "say", ', "not valid JSON")],
)
def test_an_unreadable_task_is_one_error(store: Store, tmp_path: Path, text: str, why: str) -> None:
    f = tmp_path / "ui_messages.json"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        ingest_file(store, f, f.name, True, IngestOptions(progress=False, format="cline_task"))
    assert why in str(exc.value) and "ui_messages.json" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_grown_task_adds_only_what_is_new(store: Store, tmp_path: Path) -> None:
    doc = json.loads(CLINE.read_text(encoding="utf-8"))
    a = write_task(tmp_path / "a" / CLINE_ID, doc[:9])
    b = write_task(tmp_path / "b" / CLINE_ID, doc)
    ra, rb = ingest(store, a, b)
    assert counts(ra)[2:] == (0, 0, 1) and counts(rb)[0] == 23
    assert rb.rows_duplicate > 0 and rb.rows_rejected == 0
    assert q(store, "SELECT count(*), count(DISTINCT call_id) FROM calls") == [(6, 6)]


def test_healthy_tasks_raise_no_incident(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    result = CliRunner().invoke(cli, ["audit", str(FIXTURES), "--json", "--db", str(db)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["calls_by_format"] == {"cline_task": 10}
    assert data["incidents"] == []


# --- Damaged copies: never a crash, every record accounted for --------------------------------


# a property search: CI runs it; the default run has this format's example and damaged-file tests
@pytest.mark.slow
@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_cline_task(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(SEEDS)), label="seed")
    check_drawn(data, mutate(data, SEEDS[name], JSON_DOC_MUTATIONS), name, "ui_messages.json")


def test_the_seeds_load_cleanly() -> None:
    for name, raw in SEEDS.items():
        with tempfile.TemporaryDirectory(prefix="lf-prop-") as tmp, open_store(":memory:") as s:
            path = Path(tmp) / name / "ui_messages.json"
            path.parent.mkdir(parents=True)
            path.write_bytes(raw)
            report = ingest_file(s, path, name, True, IngestOptions(progress=False))
            assert report.status == "loaded" and report.rows_loaded > 0, report
            assert report.rows_rejected == 0, report
            _check_loaded(s, report, raw)


# --- Where VS Code keeps the tasks ------------------------------------------------------------


def test_homes() -> None:
    home = Path("/home/me")
    storage = home / ".config" / "Code" / "User" / "globalStorage"
    assert places.cline_task({}, home, "linux") == [
        storage / "saoudrizwan.claude-dev" / "tasks",
        storage / "rooveterinaryinc.roo-cline" / "tasks",
    ]
    xdg = places.cline_task({"XDG_CONFIG_HOME": "/cfg"}, home, "linux")
    assert xdg[0] == Path("/cfg/Code/User/globalStorage/saoudrizwan.claude-dev/tasks")
    mac = places.cline_task({}, home, "darwin")
    assert mac[1] == home / "Library/Application Support/Code/User/globalStorage" / (
        "rooveterinaryinc.roo-cline/tasks"
    )


def test_audit_with_no_path_reads_the_tasks(runner: CliRunner, tmp_path: Path) -> None:
    home = tmp_path / "home"
    storage = home / ".config" / "Code" / "User" / "globalStorage"
    for ext, src in (("saoudrizwan.claude-dev", CLINE), ("rooveterinaryinc.roo-cline", ROO)):
        task = storage / ext / "tasks" / src.parent.name
        task.mkdir(parents=True)
        shutil.copyfile(src, task / "ui_messages.json")
        (task / "api_conversation_history.json").write_text('[{"role": "user", "content": []}]')
        (task / "task_metadata.json").write_text('{"files_in_context": []}')
    env = env_of(home, XDG_CONFIG_HOME=None)
    result = runner.invoke(cli, ["audit", "--json", "--db", str(tmp_path / "s.db")], env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["calls_by_format"]["cline_task"] == 10
    apps = sorted({s["path"].split("/")[5] for s in data["sources"] if "ui_messages" in s["path"]})
    assert apps == ["rooveterinaryinc.roo-cline", "saoudrizwan.claude-dev"]


def test_mcp_calls_pair_with_their_response(store: Store, tmp_path: Path) -> None:
    use = {
        "serverName": "github",
        "type": "use_mcp_tool",
        "toolName": "get_issue",
        "arguments": '{"number": 7}',
    }
    doc = [
        {"ts": 1767261600000, "type": "say", "say": "task", "text": "read issue 7"},
        request(1767261601000, tokensIn=3, tokensOut=40, cacheReads=0, cacheWrites=900, cost=0.01),
        {"ts": 1767261602000, "type": "ask", "ask": "use_mcp_server", "text": json.dumps(use)},
        {
            "ts": 1767261603000,
            "type": "say",
            "say": "mcp_server_response",
            "text": "Issue 7: crash",
        },
    ]
    [r] = ingest(store, write_task(tmp_path / "t2", doc))
    assert counts(r) == (4, 4, 0, 0, 0)
    rows = q(
        store,
        """SELECT c.tool_name, r.excerpt FROM messages c JOIN messages r
             ON r.kind = 'tool_result' AND r.tool_use_id = c.tool_use_id
           WHERE c.kind = 'tool_call'""",
    )
    assert rows == [("mcp:github/get_issue", "Issue 7: crash")]
