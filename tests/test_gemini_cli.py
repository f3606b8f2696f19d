"""The Gemini CLI chat ingestor on the three real sessions in ../shared (one per layout) and on
hand-written chats of the same shapes (tests/fixtures/gemini)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.formats import gemini_cli, places
from analyzer.ingest.base import Head, IngestOptions
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import assert_accounted, counts, env_of, q, shared_samples

OLD = "Mai0313__VibeCodingTracker__b36a8d3__test_conversation_gemini.json"  # 2025, one object
NEW = "Mai0313__VibeCodingTracker__894772f__test_conversation_gemini.json"  # 2026, toolCalls
LINES = "Mai0313__VibeCodingTracker__7acc4bc__gemini.jsonl"  # 2026, JSON Lines
FIXTURES = Path(__file__).parent / "fixtures" / "gemini"
LEGACY = FIXTURES / "session-2025-10-05T07-11-1f2e3d4c.json"
TOOLS = FIXTURES / "session-2026-03-27T10-19-8a9b0c1d.json"
JSONL = FIXTURES / "session-2026-04-23T12-52-5c6d7e8f.jsonl"
JSONL_SID = "5c6d7e8f-9a0b-4c1d-8e2f-3a4b5c6d7e8f"
README = "# Shop\n\nA small shop.\n\n## Build from source\n\ncargo build --release\n"


def real_dir() -> Path:
    return shared_samples() / "more-formats" / "gemini-cli"


def ingest(store: Store, *paths: Path) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False))


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def write_lines(path: Path, lines: list[str], tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines) + tail, encoding="utf-8")
    return path


def gline(**obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


# --- The real sessions -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, dict[str, FileReport]]]:
    folder = real_dir()
    with open_store(tmp_path_factory.mktemp("gemini") / "real.duckdb") as store:
        reports = ingest(store, *(folder / n for n in (OLD, NEW, LINES)))
        yield store, {Path(r.path).name: r for r in reports}


# Worked out from the files by hand: per file, its records (read, loaded, rejected, duplicate,
# skipped), its calls (one per distinct gemini message id), the sums of tokens.input (+ tool,
# 0 here), tokens.cached, tokens.output + tokens.thoughts and tokens.thoughts, the models, the
# session, and the kinds of the calls.
GOLDEN: dict[str, dict[str, Any]] = {
    OLD: {
        "counts": (19, 19, 0, 0, 0),
        "calls": 18,
        "tokens": (466642, 326620, 6944, 3642),
        "models": ["gemini-2.5-pro"],
        "session": "eefc44a3-0832-4bc0-ac33-fa668f038213",
        "kinds": {"text": 18},  # this layout kept no tool calls
    },
    NEW: {
        "counts": (4, 4, 0, 0, 0),
        "calls": 3,
        "tokens": (76348, 39826, 20941, 11616),
        "models": ["gemini-3.1-pro-preview-customtools"],
        "session": "8a20078e-2d5e-4f81-a640-9b879bbb7e6d",
        "kinds": {"text": 1, "tool_call": 2},
    },
    LINES: {
        # 28 lines: a header, 11 $set, 2 info (skipped); 3 user lines and 11 gemini lines
        # holding 6 messages, five of them written twice (loaded as the records of their call).
        "counts": (28, 14, 0, 0, 14),
        "calls": 6,
        "tokens": (202586, 48951, 4293, 2141),
        "models": ["gemini-3-flash-preview", "gemini-3.1-pro-preview"],
        "session": "0ab84937-9fe7-4284-986a-33c832af0b6a",
        "kinds": {"text": 1, "tool_call": 5},
    },
}


@pytest.mark.parametrize("name", list(GOLDEN))
def test_real_sessions_golden(real: tuple[Store, dict[str, FileReport]], name: str) -> None:
    store, reports = real
    r, want = reports[name], GOLDEN[name]
    assert (r.format, r.status) == ("gemini_cli", "loaded")
    assert counts(r) == want["counts"]
    sid = r.source_id
    got = q(
        store,
        """SELECT count(*), sum(input_tokens), sum(cached_input_tokens), sum(output_tokens),
                  sum(reasoning_tokens), list(DISTINCT model ORDER BY model),
                  list(DISTINCT session_id), list(DISTINCT app), list(DISTINCT provider),
                  count(*) FILTER (WHERE cost_basis = 'estimated' AND cost_usd > 0),
                  bool_and(output_final), count(DISTINCT call_id)
           FROM calls WHERE source_id = ?""",
        [sid],
    )[0]
    assert got[0] == want["calls"] == got[11]
    assert got[1:5] == want["tokens"]
    assert got[5] == want["models"]
    assert (got[6], got[7], got[8]) == ([want["session"]], ["gemini-cli"], ["google"])
    assert got[9] == want["calls"] and got[10] is True  # every call priced from list prices
    kinds = dict(
        q(store, "SELECT response_kind, count(*) FROM calls WHERE source_id = ? GROUP BY 1", [sid])
    )
    assert kinds == want["kinds"]
    assert q(store, "SELECT count(*) FROM rejects") == [(0,)]
    assert_accounted(store)


def test_a_message_written_twice_is_one_call(real: tuple[Store, dict[str, FileReport]]) -> None:
    """The JSON Lines file writes five gemini messages twice (the second copy adds toolCalls,
    with the same tokens): counted once, the tool calls kept."""
    store, reports = real
    sid = reports[LINES].source_id
    rows = q(
        store,
        """SELECT record_count, tool_call_count, input_tokens, response_kind FROM calls
           WHERE source_id = ? ORDER BY seq""",
        [sid],
    )
    assert rows == [
        (2, 5, 13906, "tool_call"),
        (2, 3, 29082, "tool_call"),
        (2, 1, 38324, "tool_call"),
        (2, 1, 40914, "tool_call"),  # text and a tool call
        (1, 0, 40122, "text"),
        (2, 2, 40238, "tool_call"),
    ]
    # Every line counted (the 11 gemini lines), the tokens once: 365,050 if both copies counted.
    assert q(store, "SELECT sum(input_tokens) FROM calls WHERE source_id = ?", [sid]) == [(202586,)]
    # Tool calls and their results, tied by id; none is an error.
    tools = q(
        store,
        """SELECT count(*) FILTER (WHERE kind = 'tool_call'),
                  count(*) FILTER (WHERE kind = 'tool_result'),
                  count(*) FILTER (WHERE kind = 'tool_result' AND NOT is_error)
           FROM messages WHERE source_id = ?""",
        [sid],
    )
    assert tools == [(12, 12, 12)]


def test_real_turns_and_the_agents_own_continue_prompt(
    real: tuple[Store, dict[str, FileReport]],
) -> None:
    store, reports = real
    sid = reports[LINES].source_id
    session = GOLDEN[LINES]["session"]
    prompts = q(
        store,
        """SELECT kind, excerpt FROM messages WHERE source_id = ? AND role = 'user'
           ORDER BY idx""",
        [sid],
    )
    assert [k for k, _ in prompts] == ["prompt", "system", "prompt"]
    assert prompts[1][1] == "System: Please continue."
    # Two turns: the /init prompt (its four calls and the continuation) and the last request.
    turns = q(
        store,
        "SELECT turn_id, count(*) FROM calls WHERE source_id = ? GROUP BY 1 ORDER BY 1",
        [sid],
    )
    assert turns == [
        (f"{session}:231038fa-bbfb-4b43-9a30-b8b7fcf54895", 1),
        (f"{session}:8828dd6a-d778-464f-8160-eb2e1604a122", 5),
    ]
    skipped = q(store, "SELECT skipped_kinds FROM sources WHERE source_id = ?", [sid])[0][0]
    assert json.loads(skipped) == {"info": 2, "metadata_update": 11, "session_header": 1}


def test_real_call_is_priced_from_its_tokens(real: tuple[Store, dict[str, FileReport]]) -> None:
    """The first reply of the 2025 session: 7,228 prompt tokens, none cached, 94 output and
    2,659 thinking tokens, at gemini-2.5-pro's list prices ($1.25 and $10 per million)."""
    store, reports = real
    got = q(
        store,
        """SELECT input_tokens, cached_input_tokens, output_tokens, reasoning_tokens, cost_usd,
                  cost_basis, project, ts
           FROM calls WHERE source_id = ? AND seq = 1""",
        [reports[OLD].source_id],
    )[0]
    assert got[:4] == (7228, 0, 2753, 2659)
    assert got[4] == Decimal("7228") * Decimal("1.25e-6") + Decimal("2753") * Decimal("10e-6")
    assert got[5] == "estimated"
    # Outside Gemini CLI's folders the project is the file's projectHash.
    assert got[6] == "ab14fe397f91d5f283525b3178d2314aef552f761131c42172a21b7bf735e73d"
    assert got[7].isoformat() == "2025-10-05T07:11:31.572000"


def test_real_sessions_raise_no_incident() -> None:
    """Healthy real work: no detector fires on the three sessions, read together."""
    folder = real_dir()
    paths = [str(folder / n) for n in (OLD, NEW, LINES)]
    result = CliRunner().invoke(cli, ["audit", *paths, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["calls_by_format"] == {"gemini_cli": 27}
    assert data["incidents"] == []
    assert data["unpriced_models"] == {}


@pytest.mark.parametrize(("name", "calls"), [(OLD, 18), (NEW, 3), (LINES, 6)])
def test_found_by_content_under_another_name(
    store: Store, tmp_path: Path, name: str, calls: int
) -> None:
    other = tmp_path / "notes" / "export.txt"
    other.parent.mkdir()
    shutil.copyfile(real_dir() / name, other)
    [r] = ingest(store, other.parent)
    assert (r.format, r.status, r.rows_rejected) == ("gemini_cli", "loaded", 0)
    assert q(store, "SELECT count(*) FROM calls") == [(calls,)]


def test_the_sniffer_takes_only_gemini_chats() -> None:
    def head(text: str) -> Head:
        return Head(data=text.encode(), compression=None, encoding="utf-8")

    assert gemini_cli.sniff(head(LEGACY.read_text(encoding="utf-8")[:300]))
    assert gemini_cli.sniff(head(JSONL.read_text(encoding="utf-8").splitlines()[0] + "\n"))
    # Other saved conversations and agent logs are not Gemini CLI's.
    assert not gemini_cli.sniff(head('{"id": "s", "messages": [{"role": "user"}]}'))
    assert not gemini_cli.sniff(head('{"type": "user", "sessionId": "s", "uuid": "u"}\n'))
    assert not gemini_cli.sniff(head('{"sessionId": "s", "messages": []}'))


# --- Hand-written chats: what each field becomes ---------------------------------------------


def test_the_three_layouts_of_the_fixtures(store: Store) -> None:
    reports = {Path(r.path).name: r for r in ingest(store, LEGACY, TOOLS, JSONL)}
    assert {r.format for r in reports.values()} == {"gemini_cli"}
    assert counts(reports[LEGACY.name]) == (4, 4, 0, 0, 0)
    assert counts(reports[TOOLS.name]) == (4, 4, 0, 0, 0)
    # 24 lines: 5 calls from 8 lines, 3 user lines; a header, 10 $set and 2 info skipped.
    assert counts(reports[JSONL.name]) == (24, 11, 0, 0, 13)
    assert q(store, "SELECT count(*) FROM calls") == [(3 + 3 + 5,)]
    assert_accounted(store)


def test_tokens_output_includes_thinking(store: Store) -> None:
    ingest(store, TOOLS)
    rows = q(
        store,
        """SELECT input_tokens, cached_input_tokens, output_tokens, reasoning_tokens,
                  model, response_kind, tool_call_count, content_chars, reasoning_chars
           FROM calls ORDER BY seq""",
    )
    assert rows == [
        (11702, 7733, 71 + 352, 352, "gemini-3.1-pro-preview", "tool_call", 2, 0, 71),
        (13100, 11800, 820 + 1900, 1900, "gemini-3.1-pro-preview", "tool_call", 1, 0, 60),
        (14210, 13050, 297 + 423, 423, "gemini-3.1-pro-preview", "text", 0, 78, 42),
    ]


def test_tool_calls_results_and_their_errors(store: Store) -> None:
    ingest(store, TOOLS, JSONL)
    rows = q(
        store,
        """SELECT c.tool_name, r.is_error, r.excerpt
           FROM messages c JOIN messages r
             ON r.kind = 'tool_result' AND r.tool_use_id = c.tool_use_id
            AND r.session_id = c.session_id
           WHERE c.kind = 'tool_call' ORDER BY c.session_id, c.idx""",
    )
    wrote = "Successfully created and wrote to new file: /home/dev/shop/"
    assert rows == [
        ("read_file", False, README),
        ("read_file", False, "test:\n\tuv run pytest\n"),
        ("write_file", False, wrote + "GEMINI.md."),
        ("replace", True, "[Operation Cancelled] Reason: User denied execution."),
        ("read_file", False, README),
        ("run_shell_command", True, "make: *** No rule to make target 'docs'.  Stop."),
        ("write_file", False, wrote + "CONTRIBUTING.md."),
    ]
    # The same README read in two sessions, by calls of different ids: the same result hash.
    hashes = q(
        store,
        """SELECT count(DISTINCT tool_result_hash) FROM messages
           WHERE kind = 'tool_result' AND excerpt LIKE '# Shop%'""",
    )
    assert hashes == [(1,)]


def test_turns_thinking_only_and_continue(store: Store) -> None:
    ingest(store, JSONL)
    rows = q(
        store,
        "SELECT seq, line, record_count, response_kind, turn_id FROM calls ORDER BY seq",
    )
    first = f"{JSONL_SID}:d3000000-0000-4000-8000-000000000002"
    last = f"{JSONL_SID}:d3000000-0000-4000-8000-000000000004"
    assert rows == [
        (1, 6, 2, "tool_call", first),
        (2, 9, 2, "tool_call", first),
        (3, 12, 1, "text", first),
        (4, 16, 1, "thinking_only", first),  # "System: Please continue." is no new turn
        (5, 20, 2, "tool_call", last),
    ]


def test_a_grown_chat_adds_only_what_is_new(store: Store, tmp_path: Path) -> None:
    """Read while the first reply was written once (no tool calls yet), then again grown."""
    lines = lines_of(JSONL)
    first = write_lines(tmp_path / "a" / JSONL.name, lines[:7])
    grown = write_lines(tmp_path / "b" / JSONL.name, lines)
    a, b = ingest(store, first, grown)
    assert counts(a) == (7, 2, 0, 0, 5)
    assert q(store, "SELECT count(*) FROM calls WHERE source_id = ?", [a.source_id]) == [(0,)]
    # The reply's two copies replace the one stored; the user line was stored already.
    assert counts(b) == (24, 9, 0, 2, 13)
    assert q(store, "SELECT count(*), count(DISTINCT native_id), sum(input_tokens) FROM calls") == [
        (5, 5, 13520 + 28410 + 31914 + 32122 + 32238)
    ]
    assert q(store, "SELECT tool_call_count FROM calls WHERE seq = 1") == [(2,)]
    assert q(store, "SELECT count(*) FROM messages") == [(12,)]


def test_a_resumed_chat_copied_to_json_lines_adds_nothing(store: Store, tmp_path: Path) -> None:
    """Gemini CLI resumes a chat of the one-object layout by copying it into a new ``.jsonl``
    (a header, then each message once): the same session and ids, so the same calls."""
    doc = json.loads(TOOLS.read_text(encoding="utf-8"))
    head = {k: v for k, v in doc.items() if k != "messages"}
    copy = write_lines(
        tmp_path / (TOOLS.name + "l"), [gline(**head)] + [gline(**m) for m in doc["messages"]]
    )
    first, second = ingest(store, TOOLS, copy)
    assert counts(first) == (4, 4, 0, 0, 0)
    assert counts(second) == (5, 0, 0, 4, 1)
    assert q(store, "SELECT count(*), count(DISTINCT source_id) FROM calls") == [(3, 1)]
    assert q(store, "SELECT count(*) FROM messages") == [(8,)]


def test_damaged_lines_are_rejected_by_number(store: Store, tmp_path: Path) -> None:
    lines = lines_of(JSONL)
    damaged = [*lines[:4], '{"id": "x", "type": oops}', *lines[4:10], '{"foo": 1}', *lines[10:]]
    f = write_lines(tmp_path / "chats" / JSONL.name, damaged, tail='{"id":"c2000000-00')
    [r] = ingest(store, f)
    assert (r.status, r.format) == ("loaded", "gemini_cli")
    assert counts(r) == (27, 11, 3, 0, 13)
    rejects = q(store, "SELECT line, reason, excerpt FROM rejects ORDER BY line")
    assert [(line, reason[:14]) for line, reason, _ in rejects] == [
        (5, "not valid JSON"),
        (12, "neither a mess"),
        (27, "cut-off last l"),
    ]
    assert rejects[0][2].strip() == '{"id": "x", "type": oops}'
    assert q(store, "SELECT count(*), sum(record_count) FROM calls") == [(5, 8)]
    assert_accounted(store)


def test_a_saved_chats_bad_messages_are_rejected_by_their_number(
    store: Store, tmp_path: Path
) -> None:
    doc = json.loads(LEGACY.read_text(encoding="utf-8"))
    doc["messages"].insert(1, "not a message")
    doc["messages"][3].pop("id")
    f = tmp_path / "session.json"
    f.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    [r] = ingest(store, f)
    assert counts(r) == (5, 3, 2, 0, 0)
    assert q(store, "SELECT line, reason FROM rejects ORDER BY line") == [
        (2, "a message that is not an object"),
        (4, "a message without an id"),
    ]
    assert_accounted(store)


HEADER = gline(
    sessionId="s1",
    projectHash="ab" * 32,
    startTime="2026-04-23T12:00:00.000Z",
    lastUpdated="2026-04-23T12:00:00.000Z",
    kind="main",
)


def reply(mid: str, sec: int, **extra: Any) -> str:
    tokens = {"input": 1000, "output": 10, "cached": 0, "thoughts": 5, "tool": 0, "total": 1015}
    return gline(
        id=mid,
        timestamp=f"2026-04-23T12:00:{sec:02d}.000Z",
        type="gemini",
        content="ok",
        thoughts=[],
        tokens=extra.pop("tokens", tokens),
        model="gemini-3-flash-preview",
        **extra,
    )


def ask(mid: str, sec: int, text: str) -> str:
    return gline(
        id=mid, timestamp=f"2026-04-23T12:00:{sec:02d}.000Z", type="user", content=[{"text": text}]
    )


def test_rewinds_repeats_and_notes(store: Store, tmp_path: Path) -> None:
    lines = [
        HEADER,
        ask("u1", 1, "go"),
        reply("g1", 2),
        gline(**{"$rewindTo": "g1"}),  # g1 left the conversation, but it was sent and billed
        ask("u2", 3, "go again"),
        reply("g1", 4),  # g1 written again after another message: a duplicate
        gline(id="e1", timestamp="2026-04-23T12:00:05.000Z", type="error", content="boom"),
        gline(id="w1", timestamp="2026-04-23T12:00:06.000Z", type="warning", content="hm"),
        ask("u1", 7, "go"),  # a user message written again
    ]
    [r] = ingest(store, write_lines(tmp_path / "s.jsonl", lines))
    assert counts(r) == (9, 3, 0, 1, 5)
    skipped = json.loads(q(store, "SELECT skipped_kinds FROM sources")[0][0])
    assert skipped == {
        "error": 1,
        "message_written_again": 1,
        "rewind": 1,
        "session_header": 1,
        "warning": 1,
    }
    assert q(store, "SELECT count(*), sum(input_tokens) FROM calls") == [(1, 1000)]


def test_tool_prompt_tokens_are_prompt(store: Store, tmp_path: Path) -> None:
    """``tool`` (toolUsePromptTokenCount) is read as prompt, as genai-prices reads it; a cache
    count above the prompt is a broken value, cut to the prompt."""
    tokens = {"input": 1000, "output": 10, "cached": 5000, "thoughts": 0, "tool": 25}
    lines = [HEADER, reply("g1", 1, tokens=tokens)]
    ingest(store, write_lines(tmp_path / "s.jsonl", lines))
    assert q(store, "SELECT input_tokens, cached_input_tokens, output_tokens FROM calls") == [
        (1025, 1025, 10)
    ]


def test_a_sub_agent_chat_names_its_parent(store: Store, tmp_path: Path) -> None:
    header = gline(
        sessionId="sub1",
        projectHash="ab" * 32,
        kind="subagent",
        startTime="2026-04-23T12:00:00.000Z",
    )
    chats = tmp_path / ".gemini" / "tmp" / "shop" / "chats"
    f = write_lines(chats / "parent1" / "sub1.jsonl", [header, reply("g1", 1)])
    ingest(store, f)
    assert q(store, "SELECT session_id, agent_id, parent_session_id, project FROM calls") == [
        ("sub1", "sub1", "parent1", "shop")
    ]


# --- Where Gemini CLI keeps its chats ---------------------------------------------------------


def test_homes() -> None:
    home = Path("/home/me")
    assert places.gemini_cli({}, home) == [home / ".gemini" / "tmp"]
    assert places.gemini_cli({"GEMINI_CLI_HOME": "/srv/g"}, home) == [Path("/srv/g/.gemini/tmp")]


def gemini_home(root: Path) -> Path:
    chats = root / ".gemini" / "tmp" / "shop" / "chats"
    chats.mkdir(parents=True)
    shutil.copyfile(JSONL, chats / JSONL.name)
    (root / ".gemini" / "tmp" / "shop" / ".project_root").write_text("/home/dev/shop")
    (root / ".gemini" / "tmp" / "shop" / "logs.json").write_text("[]\n")
    return root


def test_audit_with_no_path_reads_gemini_clis_chats(runner: CliRunner, tmp_path: Path) -> None:
    home = gemini_home(tmp_path / "home")
    db = tmp_path / "s.duckdb"
    result = runner.invoke(cli, ["audit", "--json", "--db", str(db)], env=env_of(home))
    assert result.exit_code == 0, result.output
    assert "reading 2 files from ~/.gemini/tmp" in result.stderr
    data = json.loads(result.stdout)
    assert data["calls_by_format"] == {"gemini_cli": 5}
    assert [s["path"] for s in data["sources"]] == [
        f"~/.gemini/tmp/shop/chats/{JSONL.name}",
    ]
    with open_store(db) as store:  # the project is the folder Gemini CLI keeps it in
        assert q(store, "SELECT DISTINCT project FROM calls") == [("shop",)]


def test_gemini_cli_home_moves_the_default_place(runner: CliRunner, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    other = gemini_home(tmp_path / "profile")
    result = runner.invoke(cli, ["audit", "--json"], env=env_of(home, GEMINI_CLI_HOME=str(other)))
    assert result.exit_code == 0, result.output
    assert f"reading 2 files from {other / '.gemini' / 'tmp'}" in result.stderr
    assert json.loads(result.stdout)["calls_by_format"] == {"gemini_cli": 5}


def test_a_walk_of_a_home_folder_enters_dot_gemini(runner: CliRunner, tmp_path: Path) -> None:
    home = gemini_home(tmp_path / "home")
    result = runner.invoke(cli, ["audit", str(home), "--json"], env=env_of(tmp_path))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["calls_by_format"] == {"gemini_cli": 5}
