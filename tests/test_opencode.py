"""The OpenCode storage ingestor on the public fixtures in ../shared (other projects' OpenCode
readers' test files) and on a hand-written storage tree of the same shapes
(tests/fixtures/opencode)."""

from __future__ import annotations

import json
import shutil
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
from analyzer.formats import opencode, places
from analyzer.ingest.base import Head, IngestOptions
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import assert_accounted, counts, env_of, q, shared_samples
from tests.test_properties import JSON_DOC_MUTATIONS, PROPERTY_SETTINGS, check_drawn, mutate

TOKSCALE = "junhoyeo__tokscale__msg_test001.json"
USER = "mirsella__tokenuze__msg_1_user.json"
BUILDER = "mirsella__tokenuze__msg_2_builder.json"
NESTED = "mirsella__tokenuze__msg_3_nested.json"
SESSION = "mirsella__tokenuze__ses_fixture_one.json"
STORAGE = Path(__file__).parent / "fixtures" / "opencode" / "storage"
SID = "ses_637d33fffffeKy9Pf34qY6Nb3w"
MESSAGES = STORAGE / "message" / SID
U1, U2 = "msg_9c82cc3e8001WD25RQ4F5ZR3qa", "msg_9c82daa60001yTMAd7V3DnI8lF"
A1, A2 = "msg_9c82cc4b00017yEeeby3abP3E2", "msg_9c82cd964001c47WQAmL9xVQ2z"
A3, A4 = "msg_9c82cee7c001bpT4r5yHUig43k", "msg_9c82dab28001PPwtV5ASPZHu8q"
A5, A6 = "msg_9c82df880001B9EgE0VrbBGI09", "msg_9c82e1f90001QYNdaKy8isWydf"
SEEDS = sorted(p for p in STORAGE.rglob("*.json"))


def real_dir() -> Path:
    return shared_samples() / "more-formats" / "opencode"


def ingest(store: Store, *paths: Path) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False))


def head(data: bytes) -> Head:
    return Head(data=data, compression=None, encoding="utf-8")


# --- The public fixtures ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, dict[str, FileReport]]]:
    folder = real_dir()
    names = (TOKSCALE, USER, BUILDER, NESTED, SESSION)
    with open_store(tmp_path_factory.mktemp("opencode") / "real.duckdb") as store:
        reports = ingest(store, *(folder / n for n in names))
        yield store, {Path(r.path).name: r for r in reports}


def test_real_files_golden(real: tuple[Store, dict[str, FileReport]]) -> None:
    store, reports = real
    assert {r.format for r in reports.values()} == {"opencode"}
    assert {n: counts(r) for n, r in reports.items()} == {
        TOKSCALE: (1, 1, 0, 0, 0),
        USER: (1, 1, 0, 0, 0),
        BUILDER: (1, 1, 0, 0, 0),
        NESTED: (1, 1, 0, 0, 0),
        SESSION: (1, 0, 0, 0, 1),  # a session file, skipped by kind
    }
    rows = q(
        store,
        """SELECT native_id, session_id, model, provider, input_tokens, cached_input_tokens,
                  cache_write_tokens, output_tokens, reasoning_tokens, cost_basis, ts,
                  output_final, app
           FROM calls ORDER BY native_id""",
    )
    assert rows == [
        # tokens.input is the fresh part: the prompt is input + cache.read + cache.write; the
        # output is output + reasoning. No cost in these files: priced from list prices.
        (
            "msg_builder",
            "ses_fixture_one",
            "grok-code",
            None,
            1200 + 300 + 100,
            300,
            100,
            200 + 50,
            50,
            None,
            rows[0][10],
            True,
            "opencode",
        ),
        (
            "msg_nested",
            "ses_fixture_one",
            "scout-preview",
            None,
            400,
            0,
            0,
            80,
            None,
            None,
            rows[1][10],
            False,
            "opencode",
        ),
        (
            "msg_test001",
            "ses_test001",
            "claude-3-5-sonnet-20241022",
            "anthropic",
            1000 + 200 + 100,
            200,
            100,
            500,
            0,
            "estimated",
            rows[2][10],
            True,
            "opencode",
        ),
    ]
    assert [r[10].isoformat() for r in rows] == [
        "2025-10-01T07:00:01",
        "2025-10-01T07:10:00",
        "2024-12-01T00:00:00",
    ]
    # 1000 fresh at $3, 200 read at $0.30, 100 written at $3.75, 500 out at $15 per million.
    cost = q(store, "SELECT cost_usd FROM calls WHERE native_id = 'msg_test001'")[0][0]
    assert cost == Decimal("0.003") + Decimal("0.00006") + Decimal("0.000375") + Decimal("0.0075")
    # The user message is a prompt that starts its turn; the builder's turn is not known
    # (these fixtures leave out parentID).
    assert q(store, "SELECT session_id, role, kind, turn_id FROM messages") == [
        ("ses_fixture_one", "user", "prompt", "ses_fixture_one:msg_user")
    ]
    assert q(store, "SELECT count(*) FROM rejects") == [(0,)]
    assert_accounted(store)


def test_real_files_raise_no_incident() -> None:
    result = CliRunner().invoke(cli, ["audit", str(real_dir()), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["calls_by_format"] == {"opencode": 3}
    assert data["incidents"] == []
    assert data["unpriced_models"] == {"grok-code": 1, "scout-preview": 1}


@pytest.mark.parametrize("name", [TOKSCALE, USER, SESSION])
def test_found_by_content_under_another_name(store: Store, tmp_path: Path, name: str) -> None:
    other = tmp_path / "notes" / "export.txt"
    other.parent.mkdir()
    shutil.copyfile(real_dir() / name, other)
    [r] = ingest(store, other.parent)
    assert (r.format, r.status, r.rows_rejected) == ("opencode", "loaded", 0)


def test_the_sniffer_takes_only_opencode_files() -> None:
    for path in SEEDS:
        assert opencode.sniff(head(path.read_bytes())), path
    compact = json.dumps(json.loads((MESSAGES / f"{A1}.json").read_text())).encode()
    assert opencode.sniff(head(compact))  # written on one line (an older migration)
    # Other agents' records are not OpenCode's.
    assert not opencode.sniff(head(b'{"type": "user", "sessionId": "s", "uuid": "u"}\n'))
    assert not opencode.sniff(head(b'{"sessionId": "s", "projectHash": "p", "messages": []}'))
    assert not opencode.sniff(head(b'{"id": "msg_1", "role": "user", "content": "hi"}'))
    assert not opencode.sniff(head(b'[{"id": "msg_1", "sessionID": "s", "role": "user"}]'))


# --- A hand-written storage tree ----------------------------------------------------------------


def test_the_storage_tree(store: Store) -> None:
    reports = ingest(store, STORAGE)
    assert len(reports) == len(SEEDS) == 16
    assert {r.format for r in reports} == {"opencode"}
    skipped: dict[str, int] = {}
    for (kinds,) in q(store, "SELECT skipped_kinds FROM sources WHERE skipped_kinds IS NOT NULL"):
        for kind, n in json.loads(kinds).items():
            skipped[kind] = skipped.get(kind, 0) + n
    assert skipped == {
        "part_reasoning": 1,
        "part_step-finish": 1,
        "part_step-start": 1,
        "part_text": 2,
        "session": 1,
    }
    rows = q(
        store,
        """SELECT native_id, turn_id, model, provider, input_tokens, cached_input_tokens,
                  cache_write_tokens, output_tokens, reasoning_tokens, cost_usd, cost_basis,
                  finish_reason, response_kind, http_status, cancelled, duration_ms, project
           FROM calls ORDER BY seq""",
    )
    t1, t2 = f"{SID}:{U1}", f"{SID}:{U2}"
    shop = "/home/dev/shop"
    assert rows == [
        (
            A1,
            t1,
            "claude-sonnet-4-5",
            "anthropic",
            14492,
            0,
            14480,
            180,
            0,
            Decimal("0.0570375"),
            "reported",
            "tool_calls",
            "tool_call",
            None,
            None,
            5200.0,
            shop,
        ),
        (
            A2,
            t1,
            "claude-sonnet-4-5",
            "anthropic",
            14905,
            14480,
            420,
            120,
            0,
            Decimal("0.00704"),
            "reported",
            "tool_calls",
            "tool_call",
            None,
            None,
            5300.0,
            shop,
        ),
        (
            A3,
            t1,
            "claude-sonnet-4-5",
            "anthropic",
            15288,
            14900,
            385,
            420,
            0,
            Decimal("0.0109035"),
            "reported",
            "stop",
            "text",
            None,
            None,
            7100.0,
            shop,
        ),
        # AI SDK 6: ``total`` = the prompt + output + reasoning, the output 150 + 64.
        (
            A4,
            t2,
            "gpt-5",
            "openai",
            10588,
            9088,
            0,
            214,
            64,
            Decimal("0.003365"),
            "reported",
            "stop",
            "text",
            None,
            None,
            10800.0,
            shop,
        ),
        (
            A5,
            t2,
            "gpt-5",
            "openai",
            0,
            0,
            0,
            0,
            0,
            Decimal(0),
            "reported",
            "cancelled",
            "empty",
            None,
            True,
            2000.0,
            shop,
        ),
        # OpenCode Zen (provider "opencode", unknown to the price list): priced by name.
        (
            A6,
            t2,
            "grok-code",
            None,
            0,
            0,
            0,
            0,
            0,
            Decimal(0),
            "reported",
            "error",
            "error",
            529,
            None,
            5000.0,
            shop,
        ),
    ]
    # The reported cost is kept; the list-price estimate beside it.
    assert q(store, f"SELECT cost_estimate_usd FROM calls WHERE native_id = '{A1}'") == [
        (Decimal("0.000012") * 3 + Decimal("0.00018") * 15 + Decimal("0.01448") * Decimal("3.75"),)
    ]
    assert_accounted(store)


def test_tool_parts_are_tool_calls_and_results(store: Store) -> None:
    ingest(store, STORAGE)
    rows = q(
        store,
        """SELECT role, kind, tool_name, tool_use_id, is_error, call_id, excerpt
           FROM messages ORDER BY idx""",
    )
    assert rows == [
        ("user", "prompt", None, None, None, None, None),
        (
            "assistant",
            "tool_call",
            "read",
            "toolu_01FZ5bXq7Rr1kV9pDnE2aLmS",
            None,
            f"opencode:{A1}",
            '{"filePath":"/home/dev/shop/README.md"}',
        ),
        (
            "tool",
            "tool_result",
            None,
            "toolu_01FZ5bXq7Rr1kV9pDnE2aLmS",
            False,
            None,
            "<file>\n00001| # Shop\n00002| \n00003| A small shop.\n</file>",
        ),
        (
            "assistant",
            "tool_call",
            "bash",
            "toolu_01Q8cW3nYt6mJbVh2sKxP4dA",
            None,
            f"opencode:{A2}",
            '{"command":"make docs","description":"Build the docs"}',
        ),
        (
            "tool",
            "tool_result",
            None,
            "toolu_01Q8cW3nYt6mJbVh2sKxP4dA",
            True,
            None,
            "make: *** No rule to make target 'docs'.  Stop.",
        ),
        ("user", "prompt", None, None, None, None, None),
    ]
    # Messages and calls of one session in one order, across files: by the ids' clocks.
    assert q(store, "SELECT count(DISTINCT session_id) FROM messages") == [(1,)]


def test_a_message_read_before_it_completed_is_replaced(store: Store, tmp_path: Path) -> None:
    doc = json.loads((MESSAGES / f"{A3}.json").read_text())
    early = {
        **doc,
        "time": {"created": doc["time"]["created"]},
        "finish": None,
        "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
        "cost": 0,
    }
    first = tmp_path / "a" / SID / f"{A3}.json"
    first.parent.mkdir(parents=True)
    first.write_text(json.dumps(early, indent=2))
    a, b = ingest(store, first, MESSAGES / f"{A3}.json")
    assert counts(a) == (1, 1, 0, 0, 0)
    assert counts(b) == (1, 0, 0, 1, 0)  # its one record was read before: a duplicate
    assert q(store, "SELECT count(*), sum(output_tokens), sum(record_count) FROM calls") == [
        (1, 420, 2)
    ]
    # Read again, complete: a duplicate, nothing replaced.
    [c] = ingest(store, tmp_path / "a")
    assert c.status == "unchanged" or counts(c) == (1, 0, 0, 1, 0)
    assert_accounted(store)


def test_damaged_records_are_rejected_as_record_one(store: Store, tmp_path: Path) -> None:
    files = {
        f"{A1}.json": json.dumps(
            {"id": "msg_x", "sessionID": "", "role": "assistant", "tokens": {}}, indent=2
        ),
        "p.json": json.dumps({"id": "prt_x", "sessionID": "", "messageID": "m", "type": "tool"}),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    reports = {
        Path(r.path).name: r for r in ingest(store, tmp_path / f"{A1}.json", tmp_path / "p.json")
    }
    assert counts(reports[f"{A1}.json"]) == (1, 0, 1, 0, 0)
    assert counts(reports["p.json"]) == (1, 0, 1, 0, 0)
    assert sorted(q(store, "SELECT line, reason FROM rejects")) == [
        (1, "a tool part without a sessionID or messageID"),
        (1, "an assistant message without a sessionID"),
    ]
    assert_accounted(store)


def test_a_cut_off_file_is_one_error_naming_it(store: Store, tmp_path: Path) -> None:
    f = tmp_path / f"{A1}.json"
    f.write_bytes((MESSAGES / f"{A1}.json").read_bytes()[:200])
    with pytest.raises(InputError) as err:
        ingest(store, f)
    assert f.name in str(err.value) and "\n" not in str(err.value)


# --- Where OpenCode keeps its storage -----------------------------------------------------------


def test_homes() -> None:
    home = Path("/home/me")
    share = home / ".local" / "share" / "opencode" / "storage"
    assert places.opencode({}, home) == [share / "message", share / "part"]
    xdg = Path("/srv/data/opencode/storage")
    assert places.opencode({"XDG_DATA_HOME": "/srv/data"}, home) == [xdg / "message", xdg / "part"]


def test_audit_with_no_path_reads_opencodes_storage(runner: CliRunner, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(STORAGE, home / ".local" / "share" / "opencode" / "storage")
    db = tmp_path / "s.duckdb"
    result = runner.invoke(cli, ["audit", "--json", "--db", str(db)], env=env_of(home))
    assert result.exit_code == 0, result.output
    assert (
        "reading 8 files from ~/.local/share/opencode/storage/message, "
        "7 from ~/.local/share/opencode/storage/part"
    ) in result.stderr
    data = json.loads(result.stdout)
    assert data["calls_by_format"] == {"opencode": 6}
    assert data["incidents"] == []


def test_xdg_data_home_moves_the_default_place(runner: CliRunner, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copytree(STORAGE, tmp_path / "data" / "opencode" / "storage")
    env = env_of(home, XDG_DATA_HOME=str(tmp_path / "data"))
    result = runner.invoke(cli, ["audit", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["calls_by_format"] == {"opencode": 6}


# --- Damaged files ------------------------------------------------------------------------------


def test_the_seeds_load_cleanly(store: Store) -> None:
    for path in SEEDS:
        [r] = ingest(store, path)
        assert (r.format, r.status, r.rows_rejected, r.rows_read) == ("opencode", "loaded", 0, 1)


# a property search: CI runs it; the default run has this format's example and damaged-file tests
@pytest.mark.slow
@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_opencode(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(SEEDS), label="seed")
    raw = mutate(data, path.read_bytes(), JSON_DOC_MUTATIONS)
    check_drawn(data, raw, path.parent.name, path.name)
