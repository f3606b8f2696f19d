"""The Aider analytics-log ingestor on the real log Aider publishes (in ../shared) and on
hand-written logs of the same shape (tests/fixtures/aider)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.formats import aider
from analyzer.ingest.base import Head, IngestOptions
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import assert_accounted, counts, q, shared_samples
from tests.test_properties import JSONL_MUTATIONS, PROPERTY_SETTINGS, check_drawn, mutate

REAL = "Aider-AI__aider__sample-analytics.jsonl"
USER = "c42c4e6b-f054-44d7-ae1f-6726cc41da88"
FIXTURES = Path(__file__).parent / "fixtures" / "aider"
LOG = FIXTURES / "analytics.jsonl"  # 2026: four Aider processes, two installations
OLD = FIXTURES / "analytics-2024.jsonl"  # 2024: system info in every event's properties
U = "5b8f0c2e-7d41-4a9e-b3c6-1e2f3a4b5c6d"
V = "e1d2c3b4-a596-4788-9aab-bccddeeff001"


def real_log() -> Path:
    return shared_samples() / "more-formats" / "aider" / REAL


def ingest(store: Store, *paths: Path, **options: Any) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False, **options))


def skipped_kinds(store: Store, r: FileReport) -> dict[str, int]:
    raw = q(store, "SELECT skipped_kinds FROM sources WHERE source_id = ?", [r.source_id])[0][0]
    return dict(json.loads(raw))


def write_lines(path: Path, lines: list[str], tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines) + tail, encoding="utf-8")
    return path


def event(name: str, t: int, user: str | None = U, **props: Any) -> str:
    return json.dumps({"event": name, "properties": props, "user_id": user, "time": t})


def send(t: int, cost: object, total: object, user: str | None = U, **extra: Any) -> str:
    props = {
        "main_model": "gpt-5.2",
        "weak_model": "gpt-5-nano",
        "editor_model": "gpt-5.2",
        "edit_format": "diff",
        "prompt_tokens": 1000,
        "completion_tokens": 10,
        "total_tokens": 1010,
        "cost": cost,
        "total_cost": total,
        **extra,
    }
    return event("message_send", t, user, **props)


# --- The real log -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, FileReport]]:
    with open_store(tmp_path_factory.mktemp("aider") / "real.duckdb") as store:
        [report] = ingest(store, real_log())
        yield store, report


def test_real_log_golden(real: tuple[Store, FileReport]) -> None:
    """Worked out from the file: 1,000 lines, one user; 107 message_send events (the calls),
    the other 893 events skipped by kind; tokens and Aider's dollars summed from the events."""
    store, r = real
    assert (r.format, r.status) == ("aider", "loaded")
    assert counts(r) == (1000, 107, 0, 0, 893)
    skipped = skipped_kinds(store, r)
    assert (skipped["launched"], skipped["message_send_starting"], skipped["exit"]) == (
        140,
        156,
        131,
    )
    assert sum(skipped.values()) == 893
    got = q(
        store,
        """SELECT count(*), count(DISTINCT call_id), sum(input_tokens), sum(output_tokens),
                  sum(cost_usd), list(DISTINCT cost_basis), count(DISTINCT session_id),
                  list(DISTINCT app), bool_and(output_final), count(cached_input_tokens),
                  min(ts), max(ts)
           FROM calls""",
    )[0]
    assert got[0] == got[1] == 107
    assert got[2:4] == (2484349, 45772)
    assert got[4] == Decimal("5.3053320000")
    assert got[5:8] == (["reported"], 37, ["aider"])
    assert got[8] is True and got[9] == 0  # no cache breakdown in the event
    assert (got[10].isoformat(), got[11].isoformat()) == (
        "2025-08-13T15:53:26",
        "2026-04-25T04:20:34",
    )
    models = q(store, "SELECT model, provider, count(*) FROM calls GROUP BY ALL ORDER BY ALL")
    assert models == [
        ("gemini-2.5-pro", "gemini", 5),
        ("gemini-3-flash-preview", "gemini", 13),
        ("gemini-3-pro-preview", "gemini", 3),
        ("gpt-5", None, 2),
        ("gpt-5.2", "openai", 36),
        ("gpt-5.2", None, 9),
        ("gpt-5.2-codex", None, 12),
        ("gpt-5.3-codex", None, 2),
        ("gpt-5.4", "openai", 3),
        ("gpt-5.4", None, 20),
        ("gpt-5.5", "openai", 1),
        ("gpt-5.5", None, 1),
    ]
    assert q(store, "SELECT count(*) FROM rejects") == [(0,)]
    assert_accounted(store)


def test_real_costs_are_aiders_own_and_match_list_prices(real: tuple[Store, FileReport]) -> None:
    """The first reply: 10,006 prompt and 81 completion tokens of gemini-2.5-pro, $0.0133175 by
    Aider - which is what the list prices ($1.25 and $10 per million) make of the tokens too,
    for every reply of the log (Aider priced the whole prompt, as the estimate does)."""
    store, _ = real
    first = q(
        store,
        """SELECT input_tokens, output_tokens, cost_usd, cost_basis, cost_estimate_usd, ts,
                  session_id, seq
           FROM calls ORDER BY line LIMIT 1""",
    )[0]
    assert first[:4] == (10006, 81, Decimal("0.0133175000"), "reported")
    assert first[4] == Decimal("10006") * Decimal("1.25e-6") + Decimal("81") * Decimal("10e-6")
    assert first[5].isoformat() == "2025-08-13T15:53:26"  # "time": 1755100406, UTC
    assert first[6:] == (f"{USER}@2025-08-13T15:53:26", 1)
    assert q(store, "SELECT count(*) FROM calls WHERE cost_usd <> cost_estimate_usd") == [(0,)]


def test_real_sessions_follow_total_cost_across_interleaved_runs(
    real: tuple[Store, FileReport],
) -> None:
    """A chat opened at 2026-04-23 13:49 made 9 replies, then 6 more a day later (lines 969-988)
    while 40 ``--message`` runs were launched in between: its running total_cost chains all 15
    into one session. Two chats of 2026-02-11 wrote to the log at once (lines 381-463)."""
    store, _ = real
    rows = q(
        store,
        """SELECT session_id, count(*), min(line), max(line), max(seq), sum(cost_usd)
           FROM calls GROUP BY 1 HAVING count(*) >= 6 ORDER BY min(line)""",
    )
    assert rows == [
        (f"{USER}@2026-02-11T03:06:07", 12, 336, 369, 12, Decimal("0.3551782500")),
        (f"{USER}@2026-02-11T14:39:28", 16, 381, 463, 16, Decimal("1.1710982500")),
        (f"{USER}@2026-02-11T14:49:38", 6, 429, 452, 6, Decimal("0.3807300000")),
        (f"{USER}@2026-03-16T23:59:53", 8, 667, 689, 8, Decimal("0.1306935000")),
        (f"{USER}@2026-04-23T13:50:48", 15, 772, 988, 15, Decimal("1.7924100000")),
    ]
    # The last reply of the long chat: its total_cost ($1.79241) is the session's sum.
    assert q(store, "SELECT session_id FROM calls WHERE line = 988") == [
        (f"{USER}@2026-04-23T13:50:48",)
    ]
    # Each session is its own stream, numbered in order.
    assert q(store, "SELECT count(*) FROM calls WHERE stream_key <> session_id") == [(0,)]


def test_real_log_raises_no_incident(runner: CliRunner, tmp_path: Path) -> None:
    """Healthy real work: no detector fires on the log (only the token and cost detectors can:
    the log has no message content)."""
    db = str(tmp_path / "s.duckdb")
    result = runner.invoke(cli, ["ingest", "--db", db, str(real_log())])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["detect", "--db", db, "--fail-on", "info"])
    assert result.exit_code == 0, result.output  # --fail-on info: any incident would fail
    result = runner.invoke(cli, ["audit", "--db", db, str(real_log()), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["calls_by_format"] == {"aider": 107}
    assert data["incidents"] == []
    assert data["unpriced_models"] == {}
    assert data["total_usd"] == pytest.approx(5.305332)


def test_found_by_content_under_another_name(store: Store, tmp_path: Path) -> None:
    other = tmp_path / "notes" / "events.txt"
    other.parent.mkdir()
    shutil.copyfile(real_log(), other)
    [r] = ingest(store, other.parent)
    assert (r.format, r.status, r.rows_rejected) == ("aider", "loaded", 0)
    assert q(store, "SELECT count(*) FROM calls") == [(107,)]


def head(text: str) -> Head:
    return Head(data=text.encode(), compression=None, encoding="utf-8")


def test_the_sniffer_takes_only_aider_events() -> None:
    assert aider.sniff(head(LOG.read_text(encoding="utf-8")[:2000]))
    assert aider.sniff(head(OLD.read_text(encoding="utf-8")))
    assert aider.sniff(head(real_log().read_text(encoding="utf-8")[:4096]))
    assert aider.sniff(head(event("launched", 1, None) + "\n"))  # user_id null
    # Other JSON Lines are not Aider's: other keys, an event name that is not text.
    assert not aider.sniff(head('{"event": "x", "properties": {}, "time": 1}\n'))
    extra_key = '{"event": "x", "properties": {}, "user_id": "u", "time": 1, "id": 2}\n'
    assert not aider.sniff(head(extra_key))
    assert not aider.sniff(head('{"event": 1, "properties": {}, "user_id": "u", "time": 1}\n'))
    assert not aider.sniff(head('{"type": "user", "sessionId": "s", "uuid": "u"}\n'))
    assert not aider.sniff(head("# aider chat started at 2025-07-15 11:38:37\n"))


def test_the_chat_history_is_not_taken(store: Store) -> None:
    """The Markdown chat history is another layout, not read (yet): it stays unrecognised."""
    history = real_log().parent / "AFI-Protocol__afi-core__59f2649__.aider.chat.history.md"
    assert not aider.sniff(head(history.read_text(encoding="utf-8")[:4096]))


# --- Hand-written logs: what each field becomes ----------------------------------------------


def test_the_fixtures(store: Store) -> None:
    reports = {Path(r.path).name: r for r in ingest(store, LOG, OLD)}
    assert {r.format for r in reports.values()} == {"aider"}
    assert counts(reports[LOG.name]) == (32, 7, 0, 0, 25)
    assert counts(reports[OLD.name]) == (7, 2, 0, 0, 5)
    rows = q(
        store,
        """SELECT line, session_id, seq, model, provider, input_tokens, output_tokens, cost_usd,
                  cost_basis
           FROM calls WHERE source_id = ? ORDER BY line""",
        [reports[LOG.name].source_id],
    )
    chat, run = f"{U}@2026-01-01T09:00:58", f"{U}@2026-01-01T09:01:44"
    local, other = f"{U}@2026-01-01T09:10:55", f"{V}@2026-01-01T09:15:30"
    assert rows == [
        (7, chat, 1, "gpt-5.2", "openai", 12000, 400, Decimal("0.0266"), "reported"),
        (12, run, 1, "gemini-3-flash-preview", "gemini", 8000, 60, Decimal("0.00418"), "reported"),
        (16, chat, 2, "gpt-5.2", "openai", 13100, 250, Decimal("0.026425"), "reported"),
        # Aider redacts a model it does not know: the provider is kept, the cost its own.
        (19, chat, 3, None, "openrouter", 14800, 900, Decimal("0.0386"), "reported"),
        # Aider had no price (cost 0): no cost reported, and no model to estimate by.
        (25, local, 1, None, None, 3000, 120, None, None),
        (27, local, 2, None, None, 3300, 90, None, None),
        (31, other, 1, "gpt-5.4", None, 20000, 500, Decimal("0.0575"), "reported"),
    ]
    skipped = skipped_kinds(store, reports[LOG.name])
    assert skipped["launched"] == 4 and skipped["cli session"] == 2 and skipped["exit"] == 4
    old = q(
        store,
        "SELECT session_id, seq, model, cost_usd FROM calls WHERE source_id = ? ORDER BY line",
        [reports[OLD.name].source_id],
    )
    assert old == [
        (f"{U}@2024-08-07T03:07:29", 1, "claude-3-5-sonnet-20240620", Decimal("0.02025")),
        (f"{U}@2024-08-07T03:07:29", 2, "claude-3-5-sonnet-20240620", Decimal("0.0261")),
    ]
    assert_accounted(store)


def test_a_zero_cost_is_estimated_from_list_prices(store: Store, tmp_path: Path) -> None:
    """A known model Aider had no price for: cost 0 is no cost, the list prices give one."""
    lines = [event("launched", 1767258000), send(1767258010, 0.0, 0.0)]
    f = write_lines(tmp_path / "a.jsonl", lines)
    ingest(store, f)
    got = q(store, "SELECT cost_basis, cost_usd FROM calls")[0]
    assert got == ("estimated", Decimal("1000") * Decimal("1.75e-6") + 10 * Decimal("14e-6"))


def test_unpriced_replies_split_at_a_launch(store: Store, tmp_path: Path) -> None:
    t = 1767258000
    lines = [
        event("launched", t),
        send(t + 10, 0.0, 0.0, main_model="None"),
        send(t + 20, 0.0, 0.0, main_model="None"),  # the same run: no launch since
        event("launched", t + 30),
        send(t + 40, 0.0, 0.0, main_model="None"),  # a new run
    ]
    ingest(store, write_lines(tmp_path / "a.jsonl", lines))
    assert q(store, "SELECT session_id, seq FROM calls ORDER BY line") == [
        (f"{U}@2026-01-01T09:00:10", 1),
        (f"{U}@2026-01-01T09:00:10", 2),
        (f"{U}@2026-01-01T09:00:40", 1),
    ]


def test_a_broken_chain_starts_a_session(store: Store, tmp_path: Path) -> None:
    """A log that begins mid-run (its first replies were written before): the first reply
    chains to nothing, so it starts a session, and the next one chains to it. A missing
    total_cost joins the latest session; two runs in the same second get numbered ids."""
    t = 1767258000
    lines = [
        send(t, 0.5, 2.0),
        send(t + 5, 0.25, 2.25),
        send(t + 9, 0.125, 0.125),
        send(t + 9, 0.125, 0.125),  # another run's first reply, the same second
        send(t + 12, 0.1, "n/a"),
    ]
    ingest(store, write_lines(tmp_path / "a.jsonl", lines))
    assert q(store, "SELECT session_id, seq FROM calls ORDER BY line") == [
        (f"{U}@2026-01-01T09:00:00", 1),
        (f"{U}@2026-01-01T09:00:00", 2),
        (f"{U}@2026-01-01T09:00:09", 1),
        (f"{U}@2026-01-01T09:00:09#2", 1),
        (f"{U}@2026-01-01T09:00:09#2", 2),
    ]
    # Two events alike in every value are two calls (their ids are numbered).
    assert q(store, "SELECT count(DISTINCT call_id) FROM calls") == [(5,)]


def test_times_are_unix_seconds_whatever_the_input_zone(store: Store) -> None:
    ingest(store, LOG, tz="America/New_York")
    assert q(store, "SELECT min(ts) FROM calls")[0][0].isoformat() == "2026-01-01T09:00:58"


def test_a_grown_log_adds_only_what_is_new(store: Store, tmp_path: Path) -> None:
    lines = LOG.read_text(encoding="utf-8").splitlines()
    first = write_lines(tmp_path / "a" / LOG.name, lines[:17])
    grown = write_lines(tmp_path / "b" / LOG.name, lines)
    a, b = ingest(store, first, grown)
    assert counts(a) == (17, 3, 0, 0, 14)
    assert counts(b) == (32, 4, 0, 3, 25)
    assert q(store, "SELECT count(*), count(DISTINCT session_id) FROM calls") == [(7, 4)]


def test_damaged_lines_are_rejected_by_number(store: Store, tmp_path: Path) -> None:
    lines = LOG.read_text(encoding="utf-8").splitlines()
    damaged = [
        *lines[:3],
        '{"event": "launched", oops}',
        *lines[3:8],
        '{"properties": {}, "user_id": "u", "time": 1}',
        '{"event": "message_send", "properties": "none", "user_id": "u", "time": 1}',
        "[1, 2]",
        *lines[8:],
    ]
    f = write_lines(tmp_path / "log.jsonl", damaged, tail='{"event": "message_se')
    [r] = ingest(store, f)
    assert (r.status, r.format) == ("loaded", "aider")
    assert counts(r) == (37, 7, 5, 0, 25)
    rejects = q(store, "SELECT line, reason FROM rejects ORDER BY line")
    assert [line for line, _ in rejects] == [4, 10, 11, 12, 37]
    assert rejects[0][1].startswith("not valid JSON")
    assert [reason for _, reason in rejects[1:]] == [
        "not an Aider analytics event (no event name)",
        "a message_send event without properties",
        "a JSON line that is not an object",
        "cut-off last line (is the log still being written?)",
    ]
    assert_accounted(store)


def test_an_unreadable_file_is_one_line_error(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "log.jsonl"
    f.write_bytes(b"\x1f\x8b" + b"\x00" * 40)  # a damaged gzip
    result = runner.invoke(
        cli, ["ingest", "--db", str(tmp_path / "s.duckdb"), "--format", "aider", str(f)]
    )
    assert result.exit_code == 3
    assert "log.jsonl" in result.output and len(result.output.strip().splitlines()) == 1


# --- Damaged logs never crash ------------------------------------------------------------------

SEEDS = {p.name: p.read_bytes() for p in (LOG, OLD)}


def test_the_seeds_load_cleanly(store: Store, tmp_path: Path) -> None:
    for name, raw in SEEDS.items():
        f = tmp_path / name
        f.write_bytes(raw)
        [r] = ingest(store, f)
        assert (r.format, r.status, r.rows_rejected) == ("aider", "loaded", 0), name


# a property search: CI runs it; the default run has this format's example and damaged-file tests
@pytest.mark.slow
@PROPERTY_SETTINGS
@given(data=st.data())
def test_damaged_aider(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(SEEDS)), label="seed")
    check_drawn(data, mutate(data, SEEDS[name], JSONL_MUTATIONS), "aider", name)
