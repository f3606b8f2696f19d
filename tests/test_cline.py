"""The Cline SDK/CLI session ingestor on the real recorded session in ../shared (Cline's own
fixture) and on a hand-written session of the same shape (tests/fixtures/cline)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.errors import InputError
from analyzer.formats import cline, conversation_json, places
from analyzer.ingest.base import Head, IngestOptions
from analyzer.load.flow import FileReport, ingest_file
from analyzer.pipeline import ingest_paths
from tests.helpers import counts, env_of, q, shared_samples
from tests.test_properties import (
    CONVERSATION_SEEDS,
    JSON_DOC_MUTATIONS,
    PROPERTY_SETTINGS,
    _check_loaded,
    check_drawn,
    mutate,
)

REAL = "cline__cline__sdk_session.messages.json"
MANIFEST = "cline__cline__sdk_session.json"
REAL_SID = "1784094124598_rruoq"
FIXTURES = Path(__file__).parent / "fixtures" / "cline"
SID = "1767261600000_k3v9q"
SESSION = FIXTURES / f"{SID}.messages.json"
SEEDS = {p.name: p.read_bytes() for p in sorted(FIXTURES.glob("*.messages.json"))}


def real_dir() -> Path:
    return shared_samples() / "more-formats" / "cline-roo"


def ingest(store: Store, *paths: Path) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False))


def head(data: bytes) -> Head:
    return Head(data=data[:65536], compression=None, encoding="utf-8")


def write_doc(path: Path, doc: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent="\t"), encoding="utf-8")
    return path


# --- The real session -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, FileReport]]:
    with open_store(tmp_path_factory.mktemp("cline") / "real.duckdb") as store:
        [report] = ingest(store, real_dir() / REAL)
        yield store, report


def test_real_session_golden(real: tuple[Store, FileReport]) -> None:
    """Worked out from the file by hand: 32 messages (16 assistant messages with metrics, 5 user
    prompts, 11 tool results); the sums of inputTokens, cacheReadTokens, cacheWriteTokens,
    outputTokens and cost."""
    store, r = real
    assert (r.format, r.status) == ("cline", "loaded")
    assert counts(r) == (32, 32, 0, 0, 0)
    got = q(
        store,
        """SELECT count(*), sum(input_tokens), sum(cached_input_tokens), sum(cache_write_tokens),
                  sum(output_tokens), sum(cost_usd), list(DISTINCT cost_basis),
                  list(DISTINCT model ORDER BY model), list(DISTINCT session_id),
                  list(DISTINCT app), count(provider), bool_and(output_final)
           FROM calls""",
    )[0]
    assert got[:5] == (16, 630254, 534435, 0, 4395)
    assert got[5] == Decimal("2.036022565")  # the 16 costs, as Cline wrote them
    assert got[6:10] == (
        ["reported"],
        ["anthropic/claude-opus-4.8-fast", "mistralai/voxtral-small-24b-2507"],
        [REAL_SID],
        ["cline"],
    )
    assert got[10:] == (0, True)  # provider "cline" (the gateway) is stored as none
    kinds = dict(q(store, "SELECT response_kind, count(*) FROM calls GROUP BY 1"))
    assert kinds == {"text": 5, "tool_call": 11}
    assert q(store, "SELECT count(*) FROM rejects") == [(0,)]


def test_real_first_call(real: tuple[Store, FileReport]) -> None:
    store, _ = real
    got = q(
        store,
        """SELECT native_id, line, ts, input_tokens, cached_input_tokens, output_tokens,
                  cost_usd, cost_estimate_usd IS NOT NULL, tool_call_count, turn_id
           FROM calls WHERE seq = 2""",
    )[0]
    assert got[0] == f"{REAL_SID}:msg_WLUQWTo-"
    assert got[1] == 4 and got[2].isoformat() == "2026-07-06T22:27:55.985000"
    assert got[3:6] == (35912, 34332, 164)  # the cache reads are part of the prompt
    assert got[6] == Decimal("0.06539085")
    assert got[7] is True  # priced at OpenRouter's list price beside the reported cost
    assert got[8:] == (1, f"{REAL_SID}:msg_mr9sjimy_1")


def test_real_turns_and_tool_pairs(real: tuple[Store, FileReport]) -> None:
    store, _ = real
    turns = q(store, "SELECT count(*) FROM calls GROUP BY turn_id ORDER BY min(seq)")
    assert [n for (n,) in turns] == [3, 2, 6, 4, 1]
    pairs = q(
        store,
        """SELECT count(*), count(r.tool_use_id), bool_or(r.is_error)
           FROM messages c LEFT JOIN messages r
             ON r.kind = 'tool_result' AND r.tool_use_id = c.tool_use_id
           WHERE c.kind = 'tool_call'""",
    )
    assert pairs == [(11, 11, False)]
    names = q(
        store,
        "SELECT tool_name, count(*) FROM messages WHERE kind = 'tool_call' GROUP BY 1 ORDER BY 1",
    )
    assert names == [("editor", 4), ("read_files", 6), ("run_commands", 1)]


def test_real_session_raises_no_incident() -> None:
    result = CliRunner().invoke(cli, ["audit", str(real_dir() / REAL), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["calls_by_format"] == {"cline": 16}
    assert data["incidents"] == []


def test_found_by_content_under_another_name(store: Store, tmp_path: Path) -> None:
    other = tmp_path / "notes" / "export.txt"
    other.parent.mkdir()
    shutil.copyfile(real_dir() / REAL, other)
    shutil.copyfile(real_dir() / MANIFEST, other.parent / "session.json")
    reports = {Path(r.path).name: r for r in ingest(store, other.parent)}
    r = reports["export.txt"]
    assert (r.format, r.status, r.rows_rejected) == ("cline", "loaded", 0)
    # The manifest beside it is the run's verdict (no call).
    manifest = reports["session.json"]
    assert (manifest.format, manifest.status, manifest.calls) == ("cline", "loaded", 0)
    assert q(store, "SELECT session_id, agent, exit_status, outcome, is_error FROM runs") == [
        ("1784094124598_rruoq", "cline", "completed", "completed", False)
    ]


def test_the_sniffer_takes_only_cline_sessions() -> None:
    assert cline.sniff(head((real_dir() / REAL).read_bytes()))
    assert cline.sniff(head(SESSION.read_bytes()))
    assert cline.sniff(head((real_dir() / MANIFEST).read_bytes()))  # the run's manifest
    # Saved conversations stay saved conversations, and are not Cline's.
    for raw in CONVERSATION_SEEDS.values():
        assert not cline.sniff(head(raw)) and conversation_json.sniff(head(raw))
    assert not cline.sniff(head(b'{"sessionId": "s", "messages": []}'))
    assert not cline.sniff(head(b'[{"role": "user", "content": "hi"}]'))


def test_saved_conversations_still_go_to_conversation_json(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "conversations"
    folder.mkdir()
    for name, raw in CONVERSATION_SEEDS.items():
        (folder / name).write_bytes(raw)
    reports = ingest(store, folder)
    assert len(reports) == len(CONVERSATION_SEEDS)
    assert {r.format for r in reports} == {"conversation_json"}


# --- The hand-written session: what each field becomes ---------------------------------------


def test_fixture_calls(store: Store) -> None:
    [r] = ingest(store, SESSION)
    assert counts(r) == (11, 11, 0, 0, 0)
    rows = q(
        store,
        """SELECT line, model, provider, input_tokens, cached_input_tokens, cache_write_tokens,
                  output_tokens, cost_usd, cost_basis, response_kind, reasoning_chars
           FROM calls ORDER BY seq""",
    )
    sonnet, anth = "claude-sonnet-4-5-20250929", "anthropic"
    assert rows == [
        (2, sonnet, anth, 12840, 0, 12830, 96, Decimal("0.0496"), "reported", "tool_call", 20),
        (4, sonnet, anth, 13050, 12830, 210, 41, Decimal("0.005248"), "reported", "tool_call", 0),
        (6, sonnet, anth, 13310, 13040, 260, 188, Decimal("0.007707"), "reported", "tool_call", 0),
        # inputTokens 12 below its cache reads: Anthropic's fresh part, so 12 + 13300 + 120.
        (9, sonnet, anth, 13432, 13300, 120, 5, Decimal("0.004551"), "estimated", "text", 0),
        # Through Cline's gateway, no metrics: no tokens, no cost.
        (11, "anthropic/claude-haiku-4.5", None, None, None, None, None, None, None, "text", 0),
    ]


def test_fixture_turns_tools_and_errors(store: Store) -> None:
    ingest(store, SESSION)
    first, last = f"{SID}:msg_mk1a2b3c_1", f"{SID}:msg_mk1a3c4d_3"
    assert q(store, "SELECT turn_id, count(*) FROM calls GROUP BY 1 ORDER BY 1") == [
        (first, 4),  # the [SYSTEM] reminder is the agent's: no new turn
        (last, 1),
    ]
    users = q(store, "SELECT kind, excerpt FROM messages WHERE role = 'user' ORDER BY idx")
    assert [k for k, _ in users] == ["prompt", "system", "prompt"]
    rows = q(
        store,
        """SELECT c.tool_name, r.is_error, r.excerpt FROM messages c JOIN messages r
             ON r.kind = 'tool_result' AND r.tool_use_id = c.tool_use_id
           WHERE c.kind = 'tool_call' ORDER BY c.idx""",
    )
    assert [(n, e) for n, e, _ in rows] == [
        ("read_files", False),
        ("run_commands", True),
        ("editor", False),
    ]
    assert rows[1][2] == "make: *** No rule to make target 'docs'.  Stop."


def test_a_grown_session_adds_only_what_is_new(store: Store, tmp_path: Path) -> None:
    doc = json.loads(SESSION.read_text(encoding="utf-8"))
    part = {**doc, "messages": doc["messages"][:5]}
    a = write_doc(tmp_path / "a" / SESSION.name, part)
    b = write_doc(tmp_path / "b" / SESSION.name, doc)
    ra, rb = ingest(store, a, b)
    assert counts(ra) == (5, 5, 0, 0, 0)
    assert counts(rb) == (11, 6, 0, 5, 0)
    assert q(store, "SELECT count(*), count(DISTINCT call_id) FROM calls") == [(5, 5)]


def test_bad_messages_are_rejected_by_their_number(store: Store, tmp_path: Path) -> None:
    doc = json.loads(SESSION.read_text(encoding="utf-8"))
    doc["messages"].insert(1, "not a message")
    doc["messages"][3]["role"] = "system"
    [r] = ingest(store, write_doc(tmp_path / "s.json", doc))
    assert counts(r) == (12, 10, 2, 0, 0)
    assert q(store, "SELECT line, reason FROM rejects ORDER BY line") == [
        (2, "a message that is not an object"),
        (4, "a message whose role is neither user nor assistant"),
    ]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"version": 1, "updated_at": "x", "sessionId": "s", "messages": {}}', "without a list"),
        ('{"version": 1, "updated_at": "x", "sessionId": "s", "messages": [', "not valid JSON"),
    ],
)
def test_an_unreadable_session_is_one_error(
    store: Store, tmp_path: Path, text: str, why: str
) -> None:
    f = tmp_path / "s.messages.json"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        ingest(store, f)
    assert why in str(exc.value) and "s.messages.json" in str(exc.value)
    assert "\n" not in str(exc.value)
    assert q(store, "SELECT count(*) FROM sources") == [(0,)]


# --- Damaged copies: never a crash, every record accounted for --------------------------------


# a property search: CI runs it; the default run has this format's example and damaged-file tests
@pytest.mark.slow
@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_cline(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(SEEDS)), label="seed")
    check_drawn(data, mutate(data, SEEDS[name], JSON_DOC_MUTATIONS), SID, name)


def test_the_seeds_load_cleanly() -> None:
    for name, raw in SEEDS.items():
        with tempfile.TemporaryDirectory(prefix="lf-prop-") as tmp, open_store(":memory:") as s:
            path = Path(tmp) / SID / name
            path.parent.mkdir(parents=True)
            path.write_bytes(raw)
            report = ingest_file(s, path, name, True, IngestOptions(progress=False))
            assert report.status == "loaded" and report.rows_loaded > 0, report
            assert report.rows_rejected == 0, report
            _check_loaded(s, report, raw)


# --- Where Cline keeps its sessions -----------------------------------------------------------


def test_homes() -> None:
    home = Path("/home/me")
    assert places.cline({}, home) == [home / ".cline" / "data" / "sessions"]
    assert places.cline({"CLINE_DIR": "/srv/c"}, home) == [Path("/srv/c/data/sessions")]
    assert places.cline({"CLINE_DATA_DIR": "/d", "CLINE_DIR": "/c"}, home) == [Path("/d/sessions")]
    env = {"CLINE_SESSION_DATA_DIR": "/s", "CLINE_DATA_DIR": "/d"}
    assert places.cline(env, home) == [Path("/s")]


def cline_home(root: Path) -> Path:
    sessions = root / ".cline" / "data" / "sessions"
    (sessions / SID).mkdir(parents=True)
    shutil.copyfile(SESSION, sessions / SID / SESSION.name)
    (sessions / "sessions.index.json").write_text('{"version": 1, "sessions": {}}\n')
    return root


def test_audit_with_no_path_reads_clines_sessions(runner: CliRunner, tmp_path: Path) -> None:
    home = cline_home(tmp_path / "home")
    db = tmp_path / "s.duckdb"
    result = runner.invoke(cli, ["audit", "--json", "--db", str(db)], env=env_of(home))
    assert result.exit_code == 0, result.output
    assert "reading 2 files from ~/.cline/data/sessions" in result.stderr
    data = json.loads(result.stdout)
    assert data["calls_by_format"] == {"cline": 5}
    assert [s["path"] for s in data["sources"]] == [f"~/.cline/data/sessions/{SID}/{SESSION.name}"]


def test_cline_dir_moves_the_default_place(runner: CliRunner, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    other = cline_home(tmp_path / "profile") / ".cline"
    result = runner.invoke(cli, ["audit", "--json"], env=env_of(home, CLINE_DIR=str(other)))
    assert result.exit_code == 0, result.output
    assert f"reading 2 files from {other / 'data' / 'sessions'}" in result.stderr
    assert json.loads(result.stdout)["calls_by_format"] == {"cline": 5}


def test_a_walk_of_a_home_folder_enters_dot_cline(runner: CliRunner, tmp_path: Path) -> None:
    home = cline_home(tmp_path / "home")
    result = runner.invoke(cli, ["audit", str(home), "--json"], env=env_of(tmp_path))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["calls_by_format"] == {"cline": 5}
