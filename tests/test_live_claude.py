"""The live reader of a Claude Code transcript (``analyzer.guards.live_claude``): the calls it
reads are the replay's, field by field, read whole or in pieces as the transcript grows."""

from __future__ import annotations

import pickle
import random
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import orjson
import pytest

from analyzer.api import Forensics
from analyzer.formats.claude_code import sniff
from analyzer.guards import live_claude
from analyzer.guards.guard import Call
from analyzer.guards.live_claude import FIELDS, LiveTranscript
from analyzer.guards.replay import Replay
from analyzer.ingest.base import Head
from tests.helpers import REPO, SHARED_SAMPLES, shared_samples

CORPORA = ("real-world", "real-loops", "real-loops-3")


def _is_claude_code(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(65536)
    return sniff(Head(data=head, compression=None, encoding="utf-8"))


SAMPLES = sorted(
    str(p.relative_to(SHARED_SAMPLES))
    for corpus in CORPORA
    for p in (SHARED_SAMPLES / corpus / "claude_code").rglob("*.jsonl")
)
FIXTURES = sorted(
    str(p.relative_to(REPO))
    for p in (REPO / "tests" / "fixtures").rglob("*.jsonl")
    if _is_claude_code(p)
)


def _sample(name: str) -> Path:
    return shared_samples() / name


def _ended(path: Path, tmp: Path) -> Path:
    """``path``, or, when its last line has no line end (two hand-written samples), a copy in
    the same folder and file names with one: the live reader leaves an unended line for
    later, as a line still being written."""
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return path
    copy = tmp / path.parent.name / path.name
    copy.parent.mkdir(parents=True)
    copy.write_bytes(data + b"\n")
    return copy


def replayed(path: Path) -> list[Call]:
    """The calls the hook's replay feeds a guard, for ``path`` ingested alone (as
    ``claude_hook.judge`` ingests it), with every column."""
    with Forensics.open(":memory:") as lf:
        lf.ingest([path])
        with Replay(lf.store, None, None, live=True) as replay:
            return [Call.from_event(e) for e in replay.events()]


def read_whole(path: Path) -> LiveTranscript:
    live = LiveTranscript.start(path)
    with open(path, "rb") as fh:
        assert live.read_on(fh, path.stat().st_size) == 0
    return live


def _differences(want: list[Call], got: list[Call]) -> list[str]:
    out = [f"{len(want)} calls replayed, {len(got)} read"] if len(want) != len(got) else []
    for a, b in zip(want, got, strict=False):
        for f in fields(Call):
            if getattr(a, f.name) != getattr(b, f.name):
                out.append(
                    f"{a.call_id} {f.name}: {getattr(a, f.name)!r} != {getattr(b, f.name)!r}"
                )
    return out[:10]


def test_the_fields_are_those_of_call() -> None:
    assert tuple(f.name for f in fields(Call)) == FIELDS


@pytest.mark.parametrize("name", SAMPLES)
def test_a_real_transcript_read_whole_is_the_replay(name: str, tmp_path: Path) -> None:
    path = _ended(_sample(name), tmp_path)
    want = replayed(path)
    live = read_whole(path)
    assert _differences(want, live.calls()) == []
    assert len(live) == len(want)


@pytest.mark.parametrize("name", FIXTURES)
def test_a_fixture_read_whole_is_the_replay(name: str, tmp_path: Path) -> None:
    path = _ended(REPO / name, tmp_path)
    want = replayed(path)
    assert want, "a Claude Code fixture with calls"
    assert _differences(want, read_whole(path).calls()) == []


def grow(source: Path, tmp: Path, seed: int, pieces: int) -> tuple[list[Call], int]:
    """``source`` copied into ``tmp`` (same folder and file names) in ``pieces`` random cuts
    (at line ends and mid-line), read on after each, pickled and unpickled between reads;
    checks each answer of ``read_on`` (the calls before it unchanged, those after it the
    calls now). Returns the calls at the end and how many reads had to start again."""
    data = source.read_bytes()
    rng = random.Random(seed)
    ends = [i + 1 for i, b in enumerate(data) if b == 10]
    cuts = sorted(
        {
            rng.choice(ends) if rng.random() < 0.5 else rng.randrange(len(data))
            for _ in range(pieces)
        }
        | {len(data)}
    )
    copy = tmp / source.parent.name / source.name
    copy.parent.mkdir(parents=True)
    copy.write_bytes(b"")
    live, before, again = LiveTranscript.start(copy), [], 0
    done = 0
    for cut in cuts:
        with open(copy, "ab") as out:
            out.write(data[done:cut])
        done = cut
        live = pickle.loads(pickle.dumps(live))
        with open(copy, "rb") as fh:
            at = live.read_on(fh, cut)
            if at is None:  # a line changed a call let go of: read again
                again += 1
                live = LiveTranscript.start(copy)
                at = live.read_on(fh, cut)
                assert at == 0
        now = live.calls()
        assert 0 <= at <= len(now)
        assert now[:at] == before[:at], "a call before the index changed"
        assert live.calls(at) == now[at:]
        before = now
    return before, again


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    "name",
    [
        n
        for n in SAMPLES
        if "real-loops" in n
        or n.endswith(
            ("subagent.jsonl", "-five.jsonl", "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
        )
    ],
)
def test_a_transcript_read_as_it_grows_is_read_whole(
    name: str, seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(in chunks of 3 calls, with few calls kept open: every path of the state is taken)"""
    monkeypatch.setattr(live_claude, "CHUNK_CALLS", 3)
    monkeypatch.setattr(live_claude, "OPEN_CALLS", 2 + seed)
    monkeypatch.setattr(live_claude, "MAX_OPEN", 4 if seed == 2 else 256)
    path = _ended(_sample(name), tmp_path / "ended")
    got, again = grow(path, tmp_path, seed, pieces=40)
    assert _differences(read_whole(path).calls(), got) == []
    assert again <= 2


def test_a_fixture_read_line_by_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_claude, "CHUNK_CALLS", 1)
    for i, name in enumerate(FIXTURES):
        path = _ended(REPO / name, tmp_path / f"ended{i}")
        lines = path.read_bytes().count(b"\n")
        got, _ = grow(path, tmp_path / str(i), i, pieces=lines * 3)
        assert got == replayed(path)


def test_a_file_shortened_or_rewritten_is_read_again(tmp_path: Path) -> None:
    source = _sample("real-loops/claude_code/Strawhat404__TASK-31/sessions__session-2.jsonl")
    data = source.read_bytes()
    path = tmp_path / source.parent.name / source.name
    path.parent.mkdir()
    half = data.index(b"\n", len(data) // 2) + 1
    path.write_bytes(data[:half])
    live = read_whole(path)
    assert live.offset == half
    path.write_bytes(data[: half - 10])  # shortened
    with open(path, "rb") as fh:
        assert pickle.loads(pickle.dumps(live)).read_on(fh, half - 10) is None
    for at in (5, half - 100):  # a byte changed in the head, then near the end read
        changed = bytearray(data)
        changed[at] ^= 1
        path.write_bytes(changed)
        with open(path, "rb") as fh:
            assert pickle.loads(pickle.dumps(live)).read_on(fh, len(data)) is None
    path.write_bytes(data)  # grown as it was: read on
    before = live.calls()
    with open(path, "rb") as fh:
        at = live.read_on(fh, len(data))
    assert at is not None and live.calls()[:at] == before[:at]
    assert live.calls() == replayed(path)


def test_a_tail_is_read_as_the_hook_copies_it(tmp_path: Path) -> None:
    """``start(path, at)``: the transcript read from a line on, as the replay of the copy of
    that tail (``claude_hook.transcript_tail``) gives it."""
    source = _sample(
        "real-world/claude_code/marot__spotter/-home-marco-projects-spotter-worktrees-spotter-fum/"
        "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    )
    data = source.read_bytes()
    at = data.index(b"\n", len(data) // 3) + 1
    copy = tmp_path / source.parent.name / source.name
    copy.parent.mkdir()
    copy.write_bytes(data[at:])
    live = LiveTranscript.start(source, at)
    with open(source, "rb") as fh:
        assert live.read_on(fh, len(data)) == 0
    want = replayed(copy)
    assert 0 < len(want) < len(read_whole(source))
    assert _differences(want, live.calls()) == []


def test_the_reader_needs_no_store(tmp_path: Path) -> None:
    """Reading a transcript imports neither DuckDB nor pyarrow nor numpy (nor the engine);
    nor genai-prices once its prices are in the state. Its calls import what ``Call``'s own
    module imports, and nothing more."""
    source = _sample("real-loops/claude_code/Strawhat404__TASK-31/sessions__session-2.jsonl")
    priced = tmp_path / "state.pickle"
    priced.write_bytes(pickle.dumps(LiveTranscript.start(source)))
    heavy = "('duckdb', 'pyarrow', 'numpy', 'analyzer.engine', 'genai_prices')"
    script = f"""
import pickle, sys
from pathlib import Path
from analyzer.guards.live_claude import LiveTranscript
heavy = {heavy}
loaded = lambda: sorted(m for m in heavy if m in sys.modules)
print(loaded())
live = LiveTranscript.start(Path({str(source)!r}))
with open({str(source)!r}, "rb") as fh:
    live.read_on(fh, Path({str(source)!r}).stat().st_size)
print(loaded())
open({str(priced)!r}, "wb").write(pickle.dumps(live))
"""
    first = _run(script)
    assert first[0] == "[]"
    assert first[1] == "['genai_prices']"  # (priced the first time)
    again = f"""
import pickle, sys
from pathlib import Path
heavy = {heavy}
loaded = lambda: sorted(m for m in heavy if m in sys.modules)
live = pickle.loads(open({str(priced)!r}, "rb").read())
print(loaded())
fresh = type(live).start(Path({str(source)!r}))
fresh.prices = live.prices
with open({str(source)!r}, "rb") as fh:
    fresh.read_on(fh, Path({str(source)!r}).stat().st_size)
print(loaded())
calls = fresh.calls()
import analyzer.guards.guard
print(loaded())
"""
    second = _run(again)
    assert second[:2] == ["[]", "[]"]
    alone = _run(
        "import sys\nimport analyzer.guards.guard\n"
        f"print(sorted(m for m in {heavy} if m in sys.modules))"
    )
    assert second[2] == alone[0]  # the calls add nothing to what Call's module imports


def _run(script: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True
    )
    return done.stdout.splitlines()


def _assistant(
    msg: str, req: str, i: int, *, agent: str | None = None, **said: object
) -> dict[str, object]:
    """An assistant line of the call (msg, req), the ``i``-th line of the file: what it said
    (``tools``: tool_use ids, ``text``), its usage and stop reason, in the main session or
    (``agent``) a sub-agent's sidechain."""
    blocks: list[dict[str, object]] = [{"type": "text", "text": str(said.get("text", "ok"))}]
    for use in said.get("tools", ()):  # type: ignore[attr-defined]
        blocks.append({"type": "tool_use", "id": use, "name": "Bash", "input": {"cmd": use}})
    usage = {
        "input_tokens": 10 + i,
        "cache_creation_input_tokens": 300,
        "cache_read_input_tokens": 1000 * i,
        "output_tokens": 3,
        **said.get("usage", {}),  # type: ignore[dict-item]
    }
    line: dict[str, object] = {
        "type": "assistant",
        "sessionId": "s1",
        "uuid": f"u{i}",
        "timestamp": f"2026-01-02T10:00:{i:02d}.000Z",
        "requestId": req,
        "message": {
            "id": msg,
            "model": said.get("model", "claude-sonnet-4-5-20250929"),
            "role": "assistant",
            "stop_reason": said.get("stop"),
            "usage": usage,
            "content": blocks,
        },
    }
    if agent:
        line |= {"isSidechain": True, "agentId": agent}
    for key in ("costUSD", "isApiErrorMessage", "version"):
        if key in said:
            line[key] = said[key]
    return line


def _user(
    i: int,
    *,
    text: str | None = None,
    results: tuple[tuple[str, str, bool], ...] = (),
    agent: str | None = None,
    meta: bool = False,
) -> dict[str, object]:
    content: object = (
        text
        if text is not None
        else [
            {"type": "tool_result", "tool_use_id": use, "content": out, "is_error": err}
            for use, out, err in results
        ]
    )
    line: dict[str, object] = {
        "type": "user",
        "sessionId": "s1",
        "uuid": f"p{i}",
        "timestamp": f"2026-01-02T10:00:{i:02d}.500Z",
        "message": {"role": "user", "content": content},
    }
    if agent:
        line |= {"isSidechain": True, "agentId": agent}
    if meta:
        line["isMeta"] = True
    return line


def _settled_lines() -> list[dict[str, object]]:
    """A transcript that takes every rule of the settlement: replays left out (an original
    before them, an original after them, an earlier replay), a result long after its call and
    one given twice, a call whose lines come apart, stated costs, web searches, fast mode,
    a reply the CLI wrote itself, an API error, a meta line and a compaction."""
    fail = "bash: line 1: nope: command not found"
    return [
        _user(1, text="fix the build"),
        _assistant("m1", "q1", 2, tools=["t1"]),
        _assistant("m9", "q9b", 3, agent="A", tools=["ta"]),  # a replay before its original
        _user(4, results=(("ta", "done", False),), agent="A"),
        _assistant("m2", "q2", 5, tools=["t2", "t3"], usage={"speed": "fast"}),
        _assistant("m9", "q9", 6, model="claude-opus-4-6", usage={"speed": "fast"}),
        _assistant("m1", "q1c", 7, agent="A"),  # a replay of an original read
        _assistant("m5", "q5a", 8, agent="B", tools=["tb"]),
        _assistant("m5", "q5b", 9, agent="B", tools=["tb"]),  # a replay of a replay
        _user(10, results=(("t2", fail, True), ("t3", fail, True))),
        _assistant("m3", "q3", 11, usage={"server_tool_use": {"web_search_requests": 3}}),
        _user(12, results=(("t1", "ok", False),)),  # long after its call
        _assistant("m4", "q4", 13, costUSD=0.25, stop="end_turn", version="2.1.90"),
        _user(14, text="<command>", meta=True),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "sessionId": "s1",
            "timestamp": "2026-01-02T10:00:15.000Z",
        },
        _assistant("m6", "q6", 16, model="<synthetic>", text="limit reached"),
        _assistant("m7", "q7", 17, isApiErrorMessage=True, text="API Error: 529 overloaded"),
        _user(18, results=(("t1", "ok", False),)),  # the same result again
        _assistant("m1", "q1", 19, tools=["t4"]),  # a line of the first call, late
        _user(20, results=(("t4", fail, True),)),
        _user(21, text="and again"),
        _assistant("m8", "q8", 22, tools=["t5"], stop="tool_use"),
        _assistant("m8:q8", "", 23, tools=["t6"]),  # another call of the same native id
        _user(24, results=(("t6", "fine", False), ("t5", "fine", False))),
    ]


def test_every_settlement_rule_as_the_store_settles_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "projects" / "-home-dev-app" / "s1.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in _settled_lines()))
    want = replayed(path)
    kinds = {c.response_kind for c in want}
    assert {"tool_call", "text", "error"} <= kinds
    assert len(want) < 12  # (replays left out)
    assert _differences(want, read_whole(path).calls()) == []
    monkeypatch.setattr(live_claude, "CHUNK_CALLS", 1)
    monkeypatch.setattr(live_claude, "OPEN_CALLS", 1)
    lines = path.read_bytes().count(b"\n")
    for seed in range(6):
        # (from the fourth, a call waiting for a result is let go of past 2 open calls)
        monkeypatch.setattr(live_claude, "MAX_OPEN", 2 if seed > 3 else 256)
        got, again = grow(path, tmp_path / f"grown{seed}", seed, pieces=2 * lines)
        assert _differences(want, got) == []
        assert again >= 1  # (a late line of a call let go of: read again)
