"""Gemini CLI's headless stream-json output: the real eval-harness file in
../shared/samples/real-loops (held to its truth.json), hand-written streams of the shapes it
lacks (error lines, a failed run, several tool calls in one response, a resumed session), sniffing
and damaged input."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from analyzer.engine.store import Store, open_store
from analyzer.errors import InputError
from analyzer.formats import gemini_cli, gemini_stream
from analyzer.ingest.base import Head, IngestOptions
from analyzer.ingest.reading import read_head
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import assert_accounted, counts, q, shared_samples

KEY = (
    "gemini_stream_json/metaphi-agent__figma-eval-010ac575-1280-41fe-be26-130311bef5ed-gemini_cli/"
    "transcript.jsonl"
)
RUN1 = "6727b31e-11a1-4351-b526-77ba7b90da09"
RUN2 = "65b8f8e4-6941-4eba-b2b8-a3f492435908"


def real_file() -> Path:
    return shared_samples() / "real-loops" / KEY


def truth() -> dict[str, Any]:
    data = json.loads((shared_samples() / "real-loops" / "truth.json").read_text("utf-8"))
    found: dict[str, Any] = data["files"][KEY]
    return found


def ingest(store: Store, *paths: Path, **options: Any) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False, **options))


def line(**obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def write(path: Path, lines: list[str], tail: str = "") -> Path:
    path.write_text("".join(x + "\n" for x in lines) + tail, encoding="utf-8")
    return path


# --- The real file -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, FileReport]]:
    with open_store(tmp_path_factory.mktemp("gstream") / "real.duckdb") as store:
        [r] = ingest(store, real_file())
        yield store, r


def test_real_file_is_read_whole(real: tuple[Store, FileReport]) -> None:
    store, r = real
    assert (r.format, r.status) == ("gemini_stream_json", "loaded")
    types = truth()["line_types"]
    # Every line counted: the harness's two task lines (before each init) skipped by kind.
    assert counts(r) == (sum(types.values()), sum(types.values()) - 2, 0, 0, 2)
    assert json.loads(q(store, "SELECT skipped_kinds FROM sources")[0][0]) == {
        "message_outside_run": 2
    }
    kinds = dict(q(store, "SELECT kind, count(*) FROM messages GROUP BY 1"))
    assert kinds["tool_call"] == types["tool_use"] == truth()["tool_calls"]
    assert kinds["tool_result"] == types["tool_result"]
    # The CLI's own user messages are the prompts; the 9 other message lines are the deltas
    # of the one text answer (7) and those two harness lines.
    assert kinds["prompt"] == types["init"] == 2
    assert q(store, "SELECT count(*), count(exit_status) FROM runs") == [
        (types["init"], types["result"])
    ]
    assert q(store, "SELECT count(*) FROM rejects") == [(0,)]
    assert_accounted(store)


def test_real_runs_and_their_verdicts(real: tuple[Store, FileReport]) -> None:
    store, _ = real
    stats = truth()["final_stats"]
    rows = q(
        store,
        """SELECT session_id, stream_key, seq, line, agent, model, exit_status, outcome,
                  is_error, reported_input_tokens, reported_output_tokens, duration_ms,
                  reported_calls, reported_cost_usd, cost_apportioned
           FROM runs ORDER BY seq""",
    )
    assert rows == [
        (
            RUN1,
            RUN1,
            1,
            91,
            "gemini-cli",
            "gemini-3-pro-preview",
            "success",
            "completed",
            False,
            stats["input_tokens"],
            stats["output_tokens"],
            float(stats["duration_ms"]),
            None,
            None,
            True,
        ),
        # The second run was cut off: no result line, so no verdict, but the session is known.
        (
            RUN2,
            RUN1,
            2,
            93,
            "gemini-cli",
            "gemini-3-pro-preview",
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        ),
    ]
    # No cost is stated, nor any call's tokens: the run's stated tokens at list prices
    # (gemini-3-pro-preview: $2 / M fresh input, $0.20 cached, $12 output with thinking, the
    # output billed being total_tokens - input_tokens) divided over its calls as their estimate.
    fresh, cached = stats["input_tokens"] - stats["cached"], stats["cached"]
    billed = stats["total_tokens"] - stats["input_tokens"]
    want = (Decimal(fresh) * 2 + Decimal(cached) * Decimal("0.2") + Decimal(billed) * 12) / 10**6
    assert q(store, "SELECT reported_cached_tokens, cost_estimate_usd FROM runs WHERE seq = 1") == [
        (cached, want)
    ]
    assert q(
        store,
        "SELECT session_id, sum(cost_usd), list(DISTINCT cost_basis) FROM calls GROUP BY 1 "
        "ORDER BY 1 DESC",
    ) == [(RUN1, want, ["estimated"]), (RUN2, None, [None])]  # run 2 states nothing
    # stats.tool_calls counts the run's tool calls, not its model calls.
    assert q(store, "SELECT sum(tool_call_count) FROM calls WHERE session_id = ?", [RUN1]) == [
        (stats["tool_calls"],)
    ]


def test_real_calls_one_per_model_response(real: tuple[Store, FileReport]) -> None:
    store, _ = real
    rows = q(
        store,
        """SELECT session_id, count(*), sum(tool_call_count),
                  count(*) FILTER (WHERE tool_call_count > 1),
                  list(DISTINCT response_kind ORDER BY response_kind), sum(record_count),
                  count(input_tokens) + count(output_tokens),
                  list(DISTINCT model), list(DISTINCT provider), list(DISTINCT app),
                  list(DISTINCT stream_key)
           FROM calls GROUP BY 1 ORDER BY 1 DESC""",
    )
    assert rows == [
        # 40 responses each calling one tool, then the answer (7 deltas): 75 lines in all.
        (
            RUN1,
            41,
            40,
            0,
            ["text", "tool_call"],
            40 + 7,
            0,
            ["gemini-3-pro-preview"],
            ["google"],
            ["gemini-cli"],
            [RUN1],
        ),
        (
            RUN2,
            28,
            28,
            0,
            ["tool_call"],
            28,
            0,
            ["gemini-3-pro-preview"],
            ["google"],
            ["gemini-cli"],
            [RUN1],
        ),
    ]
    # The answer: its time is its first delta's own timestamp (not the harness's ts), its text
    # the deltas joined.
    [(ts, chars, seq)] = q(store, "SELECT ts, content_chars, seq FROM calls WHERE line = 84")
    assert ts == datetime(2026, 1, 30, 6, 26, 16, 149000)
    deltas = real_file().read_text("utf-8").splitlines()[83:90]
    assert chars == sum(len(json.loads(d)["content"]) for d in deltas)
    assert seq == 41
    assert q(store, "SELECT list(seq ORDER BY seq) = range(1, 70) FROM calls") == [(True,)]


def test_real_tool_calls_tied_to_their_results(real: tuple[Store, FileReport]) -> None:
    store, _ = real
    tied = q(
        store,
        """SELECT count(*) FROM messages c JOIN messages r
             ON r.kind = 'tool_result' AND r.tool_use_id = c.tool_use_id
            AND r.session_id = c.session_id
           WHERE c.kind = 'tool_call'""",
    )
    assert tied == [(truth()["line_types"]["tool_result"],)]
    # The one without a result is the last line: the run was cut off while it ran.
    assert q(
        store,
        """SELECT c.tool_name, c.excerpt FROM messages c WHERE c.kind = 'tool_call'
             AND NOT EXISTS (SELECT 1 FROM messages r WHERE r.kind = 'tool_result'
                             AND r.tool_use_id = c.tool_use_id)""",
    ) == [
        (
            "run_shell_command",
            '{"command":"git add . && git commit -m \\"Implement Figma '
            'design\\" && git push origin main"}',
        )
    ]
    # Every tool call belongs to a call of its session.
    assert q(
        store,
        """SELECT count(*) FROM messages m JOIN calls c ON c.call_id = m.call_id
           AND c.session_id = m.session_id WHERE m.kind = 'tool_call'""",
    ) == [(truth()["tool_calls"],)]
    errors = Counter(
        excerpt.split(":", 1)[0]
        for (excerpt,) in q(store, "SELECT excerpt FROM messages WHERE is_error")
    )
    assert errors == truth()["tool_result_errors"]
    assert q(
        store, "SELECT count(*) FROM messages WHERE is_error IS NULL AND kind = 'tool_result'"
    )[0] == (0,)


# --- Hand-written streams ----------------------------------------------------------------------


def ts(sec: int) -> str:
    return f"2026-03-02T10:00:{sec:02d}.000Z"


def init(sid: str, sec: int, model: str = "gemini-2.5-pro") -> str:
    return line(type="init", timestamp=ts(sec), session_id=sid, model=model)


def msg(role: str, sec: int, content: str, **extra: Any) -> str:
    return line(type="message", timestamp=ts(sec), role=role, content=content, **extra)


def use(sec: int, name: str, tid: str, **params: Any) -> str:
    return line(type="tool_use", timestamp=ts(sec), tool_name=name, tool_id=tid, parameters=params)


def res(sec: int, tid: str, output: str | None = None, error: dict[str, str] | None = None) -> str:
    extra: dict[str, Any] = {"status": "error" if error else "success"}
    if output is not None:
        extra["output"] = output
    if error:
        extra["error"] = error
    return line(type="tool_result", timestamp=ts(sec), tool_id=tid, **extra)


def stats(inp: int, out: int, duration: int, tools: int, **extra: Any) -> dict[str, Any]:
    return {
        "total_tokens": inp + out + 40,
        "input_tokens": inp,
        "output_tokens": out,
        "cached": inp // 2,
        "input": inp - inp // 2,
        "duration_ms": duration,
        "tool_calls": tools,
        **extra,
    }


# Two runs, in the shapes Gemini CLI's source writes them (nonInteractiveCli.ts, errors.ts).
STREAM = [
    init("s-a", 0),
    msg("user", 0, "Fix the build"),
    msg("assistant", 2, "I'll look at both files.", delta=True),
    use(3, "read_file", "read_file-1-a", file_path="Makefile"),  # one response, two calls
    use(3, "read_file", "read_file-1-b", file_path="setup.py"),
    res(4, "read_file-1-a", "all:\n\tcc main.c"),
    res(
        4,
        "read_file-1-b",
        "File not found: setup.py",
        {"type": "file_not_found", "message": "File not found: setup.py"},
    ),
    msg("assistant", 6, "Same again.", delta=True),
    msg("assistant", 7, " And again.", delta=True),
    line(
        type="error",
        timestamp=ts(8),
        severity="warning",
        message="Loop detected, stopping execution",
    ),
    line(
        type="result",
        timestamp=ts(9),
        status="success",
        stats=stats(5000, 80, 9000, 2, models={"gemini-2.5-pro": {"total_tokens": 5120}}),
    ),
    init("s-b", 20, model="auto"),
    msg("user", 20, "Deploy"),
    use(21, "run_shell_command", "run_shell_command-2-a", command="make deploy"),
    res(22, "run_shell_command-2-a", "deployed"),
    line(
        type="result",
        timestamp=ts(23),
        status="error",
        error={"type": "FatalTurnLimitedError", "message": "Reached max session turns"},
        stats=stats(3000, 30, 0, 1),
    ),
]


def test_hand_written_runs_calls_and_verdicts(store: Store, tmp_path: Path) -> None:
    [r] = ingest(store, write(tmp_path / "out.jsonl", STREAM))
    assert (r.format, r.status) == ("gemini_stream_json", "loaded")
    assert counts(r) == (16, 16, 0, 0, 0)
    calls = q(
        store,
        """SELECT session_id, seq, line, ts, model, tool_call_count, content_chars,
                  response_kind, record_count, turn_id, stream_key
           FROM calls ORDER BY seq""",
    )
    assert calls == [
        (
            "s-a",
            1,
            3,
            datetime(2026, 3, 2, 10, 0, 2),
            "gemini-2.5-pro",
            2,
            24,
            "tool_call",
            3,
            "s-a:2",
            "s-a",
        ),
        (
            "s-a",
            2,
            8,
            datetime(2026, 3, 2, 10, 0, 6),
            "gemini-2.5-pro",
            0,
            22,
            "text",
            2,
            "s-a:2",
            "s-a",
        ),
        # The run's model as configured: an alias ("auto") names no model to price.
        (
            "s-b",
            3,
            14,
            datetime(2026, 3, 2, 10, 0, 21),
            "auto",
            1,
            0,
            "tool_call",
            1,
            "s-b:13",
            "s-a",
        ),
    ]
    runs = q(
        store,
        """SELECT session_id, seq, line, model, exit_status, outcome, is_error, result_excerpt,
                  reported_input_tokens, reported_output_tokens, duration_ms, reported_calls
           FROM runs ORDER BY seq""",
    )
    assert runs == [
        # The CLI says success, but its last word was its loop detector stopping the run.
        (
            "s-a",
            1,
            11,
            "gemini-2.5-pro",
            "success",
            "stuck",
            False,
            "Loop detected, stopping execution",
            5000,
            80,
            9000.0,
            None,
        ),
        # A failed run: the result's error names it; its duration is the source's literal 0.
        (
            "s-b",
            2,
            16,
            "auto",
            "error (FatalTurnLimitedError)",
            "step_limit",
            True,
            "Reached max session turns",
            3000,
            30,
            None,
            None,
        ),
    ]
    # s-a's stated tokens are priced over its two calls; "auto" names no model to price.
    assert q(store, "SELECT session_id, count(cost_usd) FROM calls GROUP BY 1 ORDER BY 1") == [
        ("s-a", 2),
        ("s-b", 0),
    ]
    assert_accounted(store)


def test_hand_written_messages_in_order(store: Store, tmp_path: Path) -> None:
    ingest(store, write(tmp_path / "out.jsonl", STREAM))
    rows = q(
        store,
        """SELECT idx, role, kind, tool_name, tool_use_id, is_error, excerpt,
                  call_id IS NOT NULL
           FROM messages WHERE session_id = 's-a' ORDER BY idx""",
    )
    assert rows == [
        (1, "user", "prompt", None, None, None, "Fix the build", False),
        (2, "assistant", "text", None, None, None, "I'll look at both files.", True),
        (
            3,
            "assistant",
            "tool_call",
            "read_file",
            "read_file-1-a",
            None,
            '{"file_path":"Makefile"}',
            True,
        ),
        (
            4,
            "assistant",
            "tool_call",
            "read_file",
            "read_file-1-b",
            None,
            '{"file_path":"setup.py"}',
            True,
        ),
        (5, "tool", "tool_result", None, "read_file-1-a", False, "all:\n\tcc main.c", False),
        (
            6,
            "tool",
            "tool_result",
            None,
            "read_file-1-b",
            True,
            "file_not_found: File not found: setup.py",
            False,
        ),
        (7, "assistant", "text", None, None, None, "Same again. And again.", True),
        (
            8,
            "system",
            "system",
            None,
            None,
            None,
            "warning: Loop detected, stopping execution",
            False,
        ),
    ]


def test_text_after_a_tool_call_stays_in_its_response(store: Store, tmp_path: Path) -> None:
    lines = [
        init("s", 0),
        msg("user", 0, "go"),
        use(1, "ls", "ls-1"),
        msg("assistant", 2, "then this", delta=True),
        use(3, "ls", "ls-2"),
    ]
    [r] = ingest(store, write(tmp_path / "out.jsonl", lines))
    assert counts(r) == (5, 5, 0, 0, 0)
    assert q(store, "SELECT count(*), sum(tool_call_count), sum(content_chars) FROM calls") == [
        (1, 2, 9)
    ]
    assert q(store, "SELECT list(kind ORDER BY idx) FROM messages") == [
        (["prompt", "tool_call", "text", "tool_call"],)
    ]


def test_a_resumed_session_is_one_run(store: Store, tmp_path: Path) -> None:
    """``gemini --resume`` writes the session's id again: one run row, its results' totals
    added (each process counts its own)."""
    lines = [
        init("s", 0),
        msg("user", 0, "one"),
        msg("assistant", 1, "a", delta=True),
        line(type="result", timestamp=ts(2), status="success", stats=stats(100, 5, 2000, 0)),
        init("s", 10),
        msg("user", 10, "two"),
        msg("assistant", 11, "b", delta=True),
        line(type="result", timestamp=ts(12), status="success", stats=stats(300, 7, 2000, 0)),
    ]
    [r] = ingest(store, write(tmp_path / "out.jsonl", lines))
    assert counts(r) == (8, 8, 0, 0, 0)
    assert q(
        store,
        """SELECT seq, line, exit_status, reported_input_tokens, reported_output_tokens,
                  duration_ms FROM runs""",
    ) == [(1, 8, "success", 400, 12, 4000.0)]
    assert q(store, "SELECT list(turn_id ORDER BY seq) FROM calls") == [(["s:2", "s:6"],)]
    assert q(store, "SELECT list(idx ORDER BY idx) FROM messages") == [([1, 2, 3, 4],)]


# --- Sniffing ----------------------------------------------------------------------------------


def sniffs(path: Path) -> tuple[bool, bool]:
    head = read_head(path, str(path))
    return gemini_stream.sniff(head), gemini_cli.sniff(head)


def test_sniffs_its_own_files_only(tmp_path: Path) -> None:
    assert sniffs(real_file()) == (True, False)
    assert sniffs(write(tmp_path / "out.jsonl", STREAM)) == (True, False)
    # A stream whose head was cut away still shows its events.
    assert sniffs(write(tmp_path / "tail.jsonl", STREAM[5:])) == (True, False)
    samples = shared_samples()
    others = [
        *sorted((samples / "more-formats" / "gemini-cli").glob("*.json*")),
        *sorted((Path(__file__).parent / "fixtures" / "gemini").glob("*.json*")),
        *sorted((samples / "real-world").rglob("*.jsonl")),
        *sorted((samples / "real-loops" / "claude_stream_json").rglob("*.jsonl")),
        *sorted((samples / "real-loops" / "claude_code").rglob("*.jsonl")),
        *sorted(samples.glob("*.jsonl")),
    ]
    assert len(others) > 10
    claimed = [p.name for p in others if sniffs(p)[0]]
    assert claimed == []
    # Gemini CLI's saved chats are still gemini_cli's.
    for p in (samples / "more-formats" / "gemini-cli").glob("*.json*"):
        assert sniffs(p)[1], p.name


def test_sniffer_needs_an_event_of_the_cli() -> None:
    def sniff(*objs: dict[str, Any]) -> bool:
        data = "".join(json.dumps(o) + "\n" for o in objs).encode()
        return gemini_stream.sniff(Head(data=data, compression=None, encoding="utf-8"))

    assert sniff({"type": "init", "session_id": "s", "model": "m"})
    assert sniff({"type": "tool_result", "tool_id": "t", "status": "success"})
    # A user message alone could be anything's; Claude Code's stream has other types.
    assert not sniff({"type": "message", "role": "user", "content": "hi"})
    assert not sniff({"type": "system", "subtype": "init", "session_id": "s", "model": "m"})
    assert not sniff(
        {"type": "result", "subtype": "success", "status": "x", "session_id": "s"},
    )
    assert not sniff({"type": "init", "session_id": "s", "model": "m"}, {"type": "assistant"})


# --- Damaged input -----------------------------------------------------------------------------


def test_damaged_lines_are_rejected_by_number(store: Store, tmp_path: Path) -> None:
    lines = [
        init("s", 0),
        "not json at all",
        "[1, 2]",
        line(timestamp=ts(1), role="user"),  # no type
        line(type="init", timestamp=ts(1), session_id=["s"], model=3),
        line(type="message", timestamp=ts(1), role="system", content="x"),
        line(type="tool_result", timestamp=ts(2), status="success", output="orphan"),
        # Values of the wrong types are read as missing, never trusted.
        line(type="message", timestamp=12345, role="user", content=["not", "text"]),
        line(type="tool_use", timestamp=None, tool_name=7, tool_id={"x": 1}, parameters="a b"),
        line(
            type="tool_result",
            timestamp=ts(3),
            tool_id=7,
            status=True,
            output={"o": 1},
            error="bad",
        ),
        line(type="error", timestamp=ts(4), severity=1, message=None),
        line(
            type="result",
            timestamp=ts(5),
            status=["success"],
            stats={"input_tokens": "9", "output_tokens": -1, "duration_ms": 1e30},
        ),
        line(type="thought", timestamp=ts(5)),  # a newer event
    ]
    [r] = ingest(store, write(tmp_path / "out.jsonl", lines, tail='{"type":"message","ro'))
    assert r.status == "loaded"
    assert counts(r) == (14, 6, 7, 0, 1)
    rejects = q(store, "SELECT line, reason FROM rejects ORDER BY line")
    assert [(n, reason[:22]) for n, reason in rejects] == [
        (2, "not valid JSON: invali"),
        (3, "a JSON line that is no"),
        (4, "a line without a type"),
        (5, "an init line without a"),
        (6, "a message neither the "),
        (7, "a tool_result without "),
        (14, "cut-off last line (is "),
    ]
    assert q(store, "SELECT ts, tool_call_count, content_chars FROM calls") == [(None, 1, 0)]
    assert q(
        store, "SELECT tool_name, tool_use_id, excerpt FROM messages WHERE kind = 'tool_call'"
    ) == [("7", None, "a b")]
    assert q(store, "SELECT tool_use_id, is_error FROM messages WHERE kind = 'tool_result'") == [
        ("7", None)
    ]
    assert q(store, "SELECT ts FROM messages WHERE kind = 'prompt'") == [
        (datetime(1970, 1, 1, 3, 25, 45),)
    ]
    assert q(
        store,
        """SELECT exit_status, outcome, reported_input_tokens, reported_output_tokens,
                  duration_ms FROM runs""",
    ) == [(None, None, None, None, None)]
    assert_accounted(store)


def test_a_stream_without_init_is_one_run_named_after_the_file(
    store: Store, tmp_path: Path
) -> None:
    [r] = ingest(store, write(tmp_path / "tail-only.jsonl", STREAM[5:11]))
    assert counts(r) == (6, 6, 0, 0, 0)
    assert q(store, "SELECT session_id, model, outcome FROM runs") == [("tail-only", None, "stuck")]
    assert q(store, "SELECT session_id, model, count(*) FROM calls GROUP BY ALL") == [
        ("tail-only", None, 1)
    ]


def test_an_empty_file_is_one_error(store: Store, tmp_path: Path) -> None:
    empty = tmp_path / "out.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="empty file"):
        ingest(store, empty, format="gemini_stream_json")
