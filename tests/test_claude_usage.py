"""Claude Code read usage first by DuckDB's reader (``formats/claude_usage.py``) against the
Python reader (``claude_code.read``), which is the oracle: the same calls, column for column and
in the same order, the same lines and the same lines left for later, on every transcript of the
samples (read together, as a load reads a history) and on lines of every shape the Python
reader has a rule for; and the files the SQL reader must leave to the Python reader are left."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from analyzer.formats import claude_code, claude_usage
from analyzer.ingest.base import CONTENT_LATER, IngestOptions, LoadContext, SourceFile
from analyzer.ingest.reading import read_head
from analyzer.load.prepare import fingerprint, sniff
from tests.helpers import REPO, shared_samples

# A real transcript the SQL reader leaves to the Python reader, and why (every other Claude Code
# transcript of the samples it reads itself).
LEFT_TO_PYTHON = {
    "edge_cases.jsonl": "a line whose message is a string, which DuckDB cannot read as an object",
}


def _source(path: Path) -> SourceFile:
    head = read_head(path, str(path))
    _digest, _damage, head, mixed = fingerprint(path, head)
    return SourceFile(path, str(path), path.stat().st_size, head, False, mixed)


def python_read(path: Path) -> tuple[Any, int, int]:
    """(calls, lines, lines left for later) as the Python reader reads ``path`` usage first."""
    ctx = LoadContext(None, _source(path), 0, IngestOptions(content=False), batched=True)  # type: ignore[arg-type]
    result = claude_code.read(ctx)
    return ctx.staged.calls_table(), result.rows_read, result.skipped_kinds.get(CONTENT_LATER, 0)


def assert_same(path: Path, read: claude_usage.Read) -> None:
    calls, lines, later = python_read(path)
    assert (read.lines, read.lines - read.assistant) == (lines, later), path
    if not read.calls.equals(calls):
        for name in calls.column_names:
            got, want = read.calls.column(name).to_pylist(), calls.column(name).to_pylist()
            assert got == want, f"{path}: column {name}"
    assert read.calls.schema == calls.schema


def _is_claude(path: Path) -> bool:
    fmt = sniff(_source(path), IngestOptions())
    return fmt is not None and fmt.name == claude_code.SPEC.name


def test_every_sample_transcript_reads_the_same():
    """Every JSON Lines file of the samples and fixtures, read by both as Claude Code (the
    other formats' too: the two readers agree on what they make of any file)."""
    roots = (shared_samples(), REPO / "tests" / "fixtures", REPO / "sample_data")
    files = [p for root in roots for p in sorted(root.rglob("*.jsonl"))]
    claude = {p for p in files if _is_claude(p)}
    assert len(claude) >= 40
    done = claude_usage.read(files)  # (together: line numbers are counted file by file)
    for path in files:
        read = done.get(str(path))
        if read is None:
            assert path not in claude or path.name in LEFT_TO_PYTHON, f"{path} left to Python"
            continue
        assert_same(path, read)
    assert len({str(p) for p in claude} - set(done)) <= len(LEFT_TO_PYTHON)


def test_a_history_of_many_files_reads_the_same(tmp_path):
    """Files of a synthetic history read together and one at a time: the same calls."""
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    try:
        import agent_logs
    finally:
        sys.path.remove(str(REPO / "bench"))
    agent_logs.write_history(tmp_path / ".claude", 3, 1, 0.25)
    files = sorted((tmp_path / ".claude").rglob("*.jsonl"))
    together = claude_usage.read(files)
    assert set(together) == {str(p) for p in files}
    for path in files:
        assert_same(path, together[str(path)])
        alone = claude_usage.read([path])[str(path)]
        assert alone.calls.equals(together[str(path)].calls)


def _line(**over: Any) -> dict[str, Any]:
    """An assistant line of Claude Code's own shape, with ``over`` put in (None: left out)."""
    line: dict[str, Any] = {
        "parentUuid": None,
        "isSidechain": False,
        "type": "assistant",
        "uuid": "u1",
        "timestamp": "2026-03-01T10:00:00.123Z",
        "sessionId": "s-1",
        "version": "2.0.14",
        "cwd": "/work/app",
        "requestId": "req_1",
        "message": {
            "id": "msg_1",
            "model": "claude-sonnet-4-5-20250929",
            "role": "assistant",
            "stop_reason": None,
            "usage": {
                "input_tokens": 3,
                "cache_creation_input_tokens": 400,
                "cache_read_input_tokens": 9000,
                "output_tokens": 4,
            },
            "content": [{"type": "text", "text": "Checking the next file."}],
        },
    }
    msg = over.pop("message", {})
    line.update(over)
    line["message"] = {**line["message"], **msg}
    return {k: v for k, v in line.items() if v is not None}


def _msg(**over: Any) -> dict[str, Any]:
    return {"message": over}


USER = {"type": "user", "sessionId": "s-1", "message": {"role": "user", "content": "go on"}}
TOOL = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a.py"}}
WEIRD_TEXT = "a\u3000b\xa0c\x1cd\u2028e f\tg\x0bh\u200bi\u180ej"
ARGS = {"s": '\x00\x01\x1f\x7f\u2028\u00e9\U0001f600\\"/', "n": [1.5, 1e-7, -0.0, 2.5e-5, 10**18]}

# (name, the file's lines: JSON values, or text written as it is)
TAKEN: list[tuple[str, list[Any]]] = [
    ("two lines of a call", [_line(), _line(uuid="u2", message={"content": [TOOL]})]),
    (
        "stopped on its last line",
        [_line(), _line(message={"stop_reason": "tool_use", "content": [TOOL]})],
    ),
    ("final version", [_line(version="2.1.97")]),
    ("later version", [_line(version="2.1.100")]),
    ("earlier version", [_line(version="2.1.9")]),
    ("version with a suffix", [_line(version="2.1.97-beta.1")]),
    ("major version", [_line(version="10.0.0")]),
    ("version not a version", [_line(version="next")]),
    ("version a number", [_line(version=2.1)]),
    ("no session", [_line(sessionId=None)]),
    ("empty session", [_line(sessionId="")]),
    ("no request", [_line(requestId=None)]),
    (
        "sub-agent",
        [_line(isSidechain=True, agentId="a7be2f0"), _line(requestId="req_2", uuid="u3")],
    ),
    ("sidechain without an agent", [_line(isSidechain=True)]),
    ("replay of an earlier call", [_line(), _line(isSidechain=True, agentId="x", requestId="r9")]),
    ("synthetic reply", [_line(message={"model": "<synthetic>", "usage": {"output_tokens": 0}})]),
    ("stated cost", [_line(costUSD=0.5), _line(costUSD=0.25, uuid="u2")]),
    ("stated cost out of range", [_line(costUSD=-1), _line(costUSD=2e6)]),
    ("stated cost as text", [_line(costUSD="0.5")]),
    ("stated cost true", [_line(costUSD=True)]),
    (
        "fast mode, searches, 1-hour writes",
        [
            _line(
                message={
                    "usage": {
                        "input_tokens": 5,
                        "output_tokens": 9,
                        "speed": "fast",
                        "server_tool_use": {"web_search_requests": 3},
                        "cache_creation": {"ephemeral_1h_input_tokens": 77},
                        "cache_creation_input_tokens": 100,
                    }
                }
            )
        ],
    ),
    (
        "counts of every type",
        [
            _line(message={"usage": {"input_tokens": 12.0, "output_tokens": 12.5}}),
            _line(uuid="u2", message={"usage": {"input_tokens": "12", "output_tokens": -3}}),
            _line(uuid="u3", message={"usage": {"output_tokens": 10**12, "input_tokens": True}}),
        ],
    ),
    ("a count that grows", [_line(), _line(uuid="u2", message={"usage": {"output_tokens": 99}})]),
    ("usage not an object", [_line(message={"usage": "n/a"})]),
    ("usage null", [_line(message={"usage": None})]),
    ("content a string", [_line(message={"content": WEIRD_TEXT})]),
    (
        "text of every kind of space",
        [_line(message={"content": [{"type": "text", "text": WEIRD_TEXT}]})],
    ),
    (
        "thinking, redacted and not",
        [
            _line(message={"content": [{"type": "thinking", "thinking": "hmm " * 40}]}),
            _line(
                uuid="u2",
                message={"content": [{"type": "thinking", "thinking": "", "signature": "x"}]},
            ),
            _line(uuid="u3", message={"content": [{"type": "redacted_thinking", "data": "zz"}]}),
        ],
    ),
    (
        "tool calls of every input",
        [
            _line(
                message={
                    "content": [
                        {**TOOL, "input": ARGS},
                        {**TOOL, "input": "raw text"},
                        {**TOOL, "input": None},
                        {"type": "tool_use", "id": "t2"},
                        {"type": "server_tool_use", "name": "web_search", "input": [1, {}]},
                        {"type": "text"},
                        "not a block",
                        {"type": 5},
                    ]
                }
            )
        ],
    ),
    (
        "an API error after a stop",
        [
            _line(message={"stop_reason": "end_turn"}),
            _line(
                uuid="u2",
                isApiErrorMessage=True,
                message={"content": [{"type": "text", "text": "API Error: 429 rate limited"}]},
            ),
        ],
    ),
    (
        "an API error without a status",
        [_line(isApiErrorMessage=True, message={"content": "API Error: overloaded"})],
    ),
    ("an API error that is false", [_line(isApiErrorMessage=False)]),
    (
        "times of every precision",
        [
            _line(timestamp="2026-03-01T10:00:00Z"),
            _line(timestamp="2026-03-01T10:00:00.123456Z", requestId="r2"),
        ],
    ),
    ("no time", [_line(timestamp=None)]),
    (
        "other lines between",
        [USER, _line(), {"type": "summary", "summary": "x"}, _line(uuid="u2"), {"type": 3}],
    ),
    (
        "calls interleaved",
        [_line(), _line(requestId="r2", message={"id": "msg_2"}), _line(uuid="u9")],
    ),
    ("a last line without its end", [_line(), "NO-NEWLINE"]),
    ("line ends of Windows", [_line(), "CRLF", _line(uuid="u2")]),
]

LEFT: list[tuple[str, list[Any]]] = [
    ("a blank line", [_line(), "", _line(uuid="u2")]),
    ("a line of spaces", [_line(), "   ", _line(uuid="u2")]),
    ("a line that is not JSON", [_line(), "{oops", _line(uuid="u2")]),
    ("a line that is not an object", [_line(), '["assistant"]']),
    ("no message id", [_line(message={"id": None})]),
    ("a message id that is a number", [_line(message={"id": 123})]),
    ("no message", [{k: v for k, v in _line().items() if k != "message"}]),
    ("a time with a zone", [_line(timestamp="2026-03-01T10:00:00+02:00")]),
    ("a time that is no day", [_line(timestamp="2026-02-30T10:00:00Z")]),
    ("a time as a number", [_line(timestamp=1767225600)]),
    ("an API error said as text", [_line(isApiErrorMessage="yes")]),
    (
        "a status in other digits",
        [_line(isApiErrorMessage=True, message={"content": "API Error: \u0664\u0662\u0669"})],
    ),
    ("sidechain said as text", [_line(isSidechain="true")]),
    ("a session that is a number", [_line(sessionId=42)]),
    (
        "another provider's usage",
        [_line(message={"usage": {"prompt_tokens": 5, "completion_tokens": 2}})],
    ),
    ("an argument of 21 digits", [_line(message={"content": [{**TOOL, "input": {"n": 1e21}}]})]),
    ("a key twice", ['{"type":"assistant","type":"user","message":{"id":"m"}}']),
    ("an unpaired surrogate", ['{"type":"assistant","message":{"id":"m\\ud800"}}']),
]


def _write(tmp_path: Path, lines: list[Any], where: str = "projects/app") -> Path:
    path = tmp_path / where / "sess-1.jsonl"
    path.parent.mkdir(parents=True)
    out = []
    for line in lines:
        out.append(line if isinstance(line, str) else json.dumps(line, ensure_ascii=False))
    text = "\n".join(out) + "\n"
    text = text.replace("\nNO-NEWLINE\n", "")
    if "\nCRLF\n" in text:
        text = text.replace("\nCRLF\n", "\n").replace("\n", "\r\n")
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.mark.parametrize("lines", [c[1] for c in TAKEN], ids=[c[0] for c in TAKEN])
def test_what_the_sql_reader_takes_it_reads_as_python_does(tmp_path, lines):
    path = _write(tmp_path, lines)
    read = claude_usage.read([path]).get(str(path))
    assert read is not None, "left to the Python reader"
    assert_same(path, read)


@pytest.mark.parametrize("lines", [c[1] for c in LEFT], ids=[c[0] for c in LEFT])
def test_what_the_sql_reader_cannot_say_it_leaves_to_python(tmp_path, lines):
    path = _write(tmp_path, lines)
    assert claude_usage.read([path]) == {}
    claude_code.read(
        LoadContext(None, _source(path), 0, IngestOptions(content=False), batched=True)
    )  # type: ignore[arg-type]


def test_a_file_outside_projects_takes_its_project_from_its_lines(tmp_path):
    path = _write(tmp_path, [_line(), _line(cwd=None, requestId="r2")], where="elsewhere")
    read = claude_usage.read([path])[str(path)]
    assert_same(path, read)
    assert read.calls.column("project").to_pylist() == ["/work/app", "elsewhere"]


def test_one_file_it_cannot_read_leaves_the_others_read(tmp_path):
    good = [_write(tmp_path / str(i), [_line()]) for i in range(3)]
    bad = _write(tmp_path / "bad", [_line(), "{oops"])
    done = claude_usage.read([good[0], bad, good[1], good[2]])
    assert set(done) == {str(p) for p in good}


def test_every_space_python_splits_on_is_a_space_to_the_sql():
    import duckdb

    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    con = duckdb.connect()
    sql = (REPO / "analyzer" / "sql" / "ingest" / "claude_usage.sql").read_text()
    start = sql.index("CREATE OR REPLACE TEMP MACRO lf_cu_visible")
    con.execute(sql[start : sql.index(";", start) + 1])
    (visible,) = con.execute("SELECT lf_cu_visible(?)", [text]).fetchone()
    assert visible == sum(map(len, text.split()))


def test_arguments_measure_as_orjson_writes_them(tmp_path):
    """What a tool call's arguments measure (``content.args_text``: orjson's compact JSON)
    comes out the same from DuckDB's JSON for every character a string may hold."""
    chars = "".join(chr(c) for c in range(0x3000) if not 0xD800 <= c <= 0xDFFF)
    args = {"all": chars, "n": [0.1, 100.0, 123456789012345678, -1, 3.14159265358979, True, None]}
    path = _write(tmp_path, [_line(message={"content": [{**TOOL, "input": args}]})])
    read = claude_usage.read([path])[str(path)]
    assert_same(path, read)
    estimate = read.calls.column("output_estimate_tokens").to_pylist()[0]
    assert estimate >= len(orjson.dumps(args).decode()) / 3  # (the arguments were measured)


def test_a_usage_view_reads_the_transcripts_by_the_sql_and_stores_what_python_would(
    runner, tmp_path, monkeypatch
):
    """``usage daily`` on a home of the real-world transcripts: every transcript but those
    named in ``LEFT_TO_PYTHON`` is read by the SQL reader (read ahead, all together), and the
    store holds what it holds when the Python reader reads them all."""
    from tests.ccusage_side import real_world_home
    from tests.test_usage_first import _run, same_stores

    python_reads: list[str] = []
    by_python = claude_code.read

    def counted(ctx):
        if not ctx.options.content:
            python_reads.append(Path(ctx.source.path).name)
        return by_python(ctx)

    monkeypatch.setattr(claude_code, "read", counted)
    home = real_world_home(tmp_path / "sql")
    shown = _run(runner, home, "usage", "daily", "--json")
    assert sorted(set(python_reads)) == sorted(LEFT_TO_PYTHON)

    monkeypatch.setattr(claude_usage, "load", lambda *_args: None)  # the Python reader alone
    python_home = real_world_home(tmp_path / "python")
    assert _run(runner, python_home, "usage", "daily", "--json") == shown
    assert same_stores(home, python_home)
