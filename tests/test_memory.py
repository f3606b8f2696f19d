"""Memory that follows what is kept, not what is read (issue 45, cause 11): a history of many
small transcripts costs the memory of a batch of them, not of every file read; and the names a
refresh compares files by are computed without a system call per folder of each file.

Memory is measured as the peak RSS of a child process, its own high-water mark (``VmHWM``,
which the child writes as it ends: see ``_PEAK``). ``bench/scale.py`` runs the issue's sizes
(100,000 transcripts, a dense 1 GB transcript) and prints time and peak RSS.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from analyzer.engine.store import open_new_or_existing
from analyzer.formats import claude_code
from analyzer.ingest import lowering
from analyzer.ingest.base import IngestOptions
from analyzer.load import flow
from analyzer.load.batch import SourceIndex
from analyzer.load.discovery import discover
from analyzer.pipeline import ingest_paths
from tests.helpers import REPO

MB = 2**20


def _transcripts(root: Path, n: int) -> Path:
    """``n`` one-call Claude Code transcripts in Claude Code's layout, 500 a project folder."""
    for k in range(n):
        folder = root / "projects" / f"p{k // 500:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        sid = f"{k:08x}-0000-4000-8000-{k:012x}"
        line = {
            "type": "assistant",
            "sessionId": sid,
            "timestamp": "2026-01-02T03:04:05.000Z",
            "requestId": f"req_{k}",
            "message": {
                "model": "claude-sonnet-4-5-20250929",
                "id": f"msg_{k}",
                "role": "assistant",
                "usage": {"input_tokens": 3, "output_tokens": 4},
                "content": [{"type": "text", "text": "ok"}],
            },
        }
        prompt = {
            "type": "user",
            "sessionId": sid,
            "uuid": f"u{k}",
            "timestamp": "2026-01-02T03:04:04.000Z",
            "message": {"role": "user", "content": "go on"},
        }
        (folder / f"{sid}.jsonl").write_text(json.dumps(prompt) + "\n" + json.dumps(line) + "\n")
    return root / "projects"


# The child writes its own peak RSS (VmHWM) to the file named first, when it ends: ``wait4``'s
# ru_maxrss would count what this process held when it forked the child (Linux keeps the
# high-water mark of the forked copy across the exec), and a pytest worker holds hundreds of MB.
_PEAK = """\
import atexit, sys
peak_file = sys.argv.pop(1)
def _peak():
    with open("/proc/self/status") as f, open(peak_file, "w") as out:
        out.write(next(line for line in f if line.startswith("VmHWM")).split()[1])
atexit.register(_peak)
"""
# A batch written every BATCH_FILES files (2,000 by default): at test size, many batches, as
# 100,000 files make 50.
_BATCHES = "import analyzer.load.batch as b\nb.BATCH_FILES = int(sys.argv.pop(1))\n"
_MAIN = "from analyzer.cli.main import main\nmain()\n"
needs_proc = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="reads the peak RSS from /proc"
)


def _peak_rss(tmp_path: Path, code: str, args: list[str]) -> tuple[int, str]:
    """(its own peak RSS in bytes, what it said) of a child running ``code`` with ``args``
    (the command line of ``llm-forensics``), read by that process alone (no workers: their
    number depends on idle cores)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_FORENSICS_")}
    env["LLM_FORENSICS_INGEST_WORKERS"] = "0"
    said, peak = tmp_path / "child.out", tmp_path / "child.peak"
    with open(said, "wb") as out:
        done = subprocess.run(
            [sys.executable, "-c", _PEAK + code, str(peak), *args], stdout=out, stderr=out, env=env
        )
    assert done.returncode == 0, said.read_text()
    return int(peak.read_text()) * 1024, said.read_text()


@needs_proc
def test_thousands_of_small_transcripts_take_the_memory_of_a_batch(tmp_path: Path) -> None:
    # Before: every batch's Arrow tables stayed referenced from the index of files read (about
    # 90 KB a file), so memory grew with the files read: 455 MB here, 7.24 GB for the issue's
    # 100,000 first refresh. Now 210 MB here (and 0.9 GB for 100,000, bench/scale.py).
    history = _transcripts(tmp_path / "claude", 4000)
    db = tmp_path / "store.duckdb"
    command = ["250", "ingest", "--db", str(db), str(history)]  # (a batch every 250 files)
    peak, said = _peak_rss(tmp_path, _BATCHES + _MAIN, command)
    assert "4,000 loaded" in said, said
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM calls").fetchone() == (4000,)
    assert peak < 320 * MB, f"peak RSS {peak / MB:.0f} MB"


def test_a_file_is_named_by_its_resolved_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``sources.file_stat`` names a file by ``path.resolve()``; the index resolves each folder
    # once (100,000 resolutions took seconds of every warm command), to the same text.
    real = tmp_path / "real" / "projects" / "p"
    real.mkdir(parents=True)
    (real / "a.jsonl").write_text("{}\n")
    (tmp_path / "linked").symlink_to(tmp_path / "real")  # a folder that is a link
    (real / "b.jsonl").symlink_to(real / "a.jsonl")  # a file that is a link
    monkeypatch.chdir(tmp_path)
    paths = [
        real / "a.jsonl",
        tmp_path / "linked" / "projects" / "p" / "a.jsonl",
        tmp_path / "linked" / "projects" / "p" / "b.jsonl",
        Path("linked/projects/p/a.jsonl"),  # relative
        tmp_path / "real" / "projects" / ".." / "projects" / "p" / "a.jsonl",
    ]
    with open_new_or_existing(tmp_path / "store.duckdb") as store:
        index = SourceIndex(store)
        for p in paths * 2:  # (the second time from what it resolved already)
            assert index.stat_key(p, 3, 7) == f"{p.resolve()}|3|7", p


def _names_by_pathlib(arg: str, label: str | None) -> list[tuple[str, str, str]]:
    """(path, display, name) of each file under folder ``arg``, as pathlib makes them (how
    ``discover`` named them before it made them as text)."""
    top = Path(arg)
    named = Path(label) if label else Path(top.name) if top.is_absolute() else top
    out = []
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        within = Path(root).relative_to(top)
        for name in sorted(f for f in files if not f.startswith(".")):
            f = Path(root) / name
            shown = str(Path(label) / within / name) if label else str(f)
            out.append((str(f), shown, str(named / within / name)))
    return out


def test_the_files_found_are_named_as_pathlib_names_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in ("a", "a/b", "a/b/c"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "x.jsonl").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    for arg in (".", "a", "./a/", "a//b", "a/b/../b", str(tmp_path / "a")):
        for label in (None, "~/.claude/projects"):
            found = discover([arg], labels={arg: label} if label else None).files
            got = [(str(f.path), f.display, f.name) for f in found]
            assert got == _names_by_pathlib(arg, label), (arg, label)


# -- a long transcript written in parts --------------------------------------------------------


def _said(k: int, msg: str, req: str, text: str, sidechain: bool = False) -> dict[str, Any]:
    """An assistant line of call (``msg``, ``req``), session S (a sub-agent's with
    ``sidechain``): a text or a tool call, with its usage."""
    block: dict[str, Any] = (
        {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"file_path": text}}
        if text.startswith("/")
        else {"type": "text", "text": text}
    )
    return {
        "type": "assistant",
        "sessionId": "S",
        "uuid": f"a{k}",
        "timestamp": f"2026-01-02T03:{k // 60 % 60:02d}:{k % 60:02d}.000Z",
        "requestId": req,
        **({"isSidechain": True, "agentId": "A"} if sidechain else {}),
        "message": {
            "model": "claude-sonnet-4-5-20250929",
            "id": msg,
            "role": "assistant",
            "usage": {"input_tokens": 3 + k, "output_tokens": 4, "cache_read_input_tokens": 9},
            "content": [block],
        },
    }


def _result(k: int) -> dict[str, Any]:
    return {
        "type": "user",
        "sessionId": "S",
        "uuid": f"u{k}",
        "timestamp": f"2026-01-02T03:{k // 60 % 60:02d}:{k % 60:02d}.500Z",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": f"r{k}"}],
        },
    }


def _long(n: int, start: int = 0) -> list[dict[str, Any]]:
    """The lines of ``n`` calls (numbered from ``start``) of two lines and a tool result each;
    every 7th one replayed at once by a sub-agent (a ``/btw`` side question: its message id
    again, a new request id)."""
    out: list[dict[str, Any]] = []
    for k in range(start, start + n):
        out += [_said(k, f"m{k}", f"r{k}", "looking"), _said(k, f"m{k}", f"r{k}", f"/f{k}.py")]
        out.append(_result(k))
        if k % 7 == 3:
            out.append(_said(k, f"m{k}", f"btw{k}", "again", sidechain=True))
    return out


def _stored(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """What a store holds of its one file, but for where and when it was read."""
    with duckdb.connect(str(db), read_only=True) as con:
        return {
            "calls": con.execute(
                "SELECT * EXCLUDE (source_id) FROM calls ORDER BY call_id"
            ).fetchall(),
            "messages": con.execute(
                "SELECT * EXCLUDE (source_id) FROM messages ORDER BY session_id, idx, kind"
            ).fetchall(),
            "sources": con.execute(
                "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate, rows_skipped "
                "FROM sources"
            ).fetchall(),
        }


def _ingest_lines(
    tmp_path: Path, name: str, lines: list[dict[str, Any]], open_calls: int, messages: int
) -> dict[str, list[tuple[Any, ...]]]:
    """The store of the transcript ``lines`` read with ``open_calls`` calls open at most (a
    part of half of them written when there are as many) and its messages written
    ``messages`` at a time, and how it was read (``reads``)."""
    path = tmp_path / name / "projects" / "p" / "t.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    db = tmp_path / f"{name}.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(claude_code, "OPEN_CALLS", open_calls)
        mp.setattr(claude_code, "PART_CALLS", open_calls // 2)
        mp.setattr(flow, "BATCH_FILE_BYTES", 0)  # (loaded on its own, as a long file is)
        mp.setattr(lowering, "MESSAGE_BATCH", messages)
        reads = _count_reads(mp)
        with open_new_or_existing(db) as store:
            ingest_paths(store, [str(path)], IngestOptions())
    found = _stored(db)
    found["reads"] = [(tuple(reads),)]
    return found


def _count_reads(mp: pytest.MonkeyPatch) -> list[bool]:
    """Each read of a file loaded on its own in this context, as its ``whole``."""
    reads: list[bool] = []
    real = flow._load

    def load(*args: Any, whole: bool = False) -> Any:
        reads.append(whole)
        return real(*args, whole=whole)

    mp.setattr(flow, "_load", load)
    return reads


def test_a_long_transcript_written_in_parts_stores_what_reading_it_whole_stores(
    tmp_path: Path,
) -> None:
    # A dense 1 GB transcript held every call until its end (5.5 GB); now its calls are
    # written in parts as they close (0.9 GB, bench/scale.py). Here parts of 4 calls.
    lines = _long(60)
    whole = _ingest_lines(tmp_path, "whole", lines, open_calls=10**9, messages=10**9)
    assert whole.pop("reads") == [((False,),)]
    # Messages written before their calls (a replay's among them: taken out again), and after
    # several parts (a replay's left out as they are written).
    for messages in (10, 50):
        parts = _ingest_lines(tmp_path, f"parts{messages}", lines, open_calls=8, messages=messages)
        assert parts.pop("reads") == [((False,),)]  # (read once, in parts)
        assert parts == whole
    assert len(whole["calls"]) == 60 and whole["sources"] == [(60 * 3 + 9, 60 * 3, 0, 9, 0)]


def test_parts_that_depend_on_one_another_read_the_file_again_whole(tmp_path: Path) -> None:
    calls = _long(40)
    late = _said(100, "m2", "r2", "/late.py")  # a line of call m2, after its part was written
    replay_first = [_said(101, "m90", "btw", "asked", sidechain=True)]  # its original: later
    original = _said(102, "m90", "r90", "answered")
    for name, lines in (
        ("late", [*calls, late]),
        ("original", [*replay_first, *calls, original]),
    ):
        whole = _ingest_lines(tmp_path, f"{name}-whole", lines, open_calls=10**9, messages=10)
        parts = _ingest_lines(tmp_path, f"{name}-parts", lines, open_calls=8, messages=10)
        assert whole.pop("reads") == [((False,),)]
        assert parts.pop("reads") == [((False, True),)], name  # in parts, then whole
        assert parts == whole, name


# 100 MB in a child process (about 10 s): CI runs it; the default run has the parts' tests above
# and the many small transcripts' memory
@pytest.mark.slow
@needs_proc
def test_a_dense_transcript_takes_the_memory_of_a_part(tmp_path: Path) -> None:
    # Before: its 86,000 calls were held until its end, then settled at once through
    # temporary tables its transaction kept, and every part it registered stayed referenced
    # until the commit: 800 MB here, 5.5 GB for the 1 GB transcript. Now 440 MB here
    # (0.9 GB for 1 GB, bench/scale.py).
    spec = importlib.util.spec_from_file_location("agent_logs", REPO / "bench" / "agent_logs.py")
    assert spec is not None and spec.loader is not None
    agent_logs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agent_logs)
    path = tmp_path / "projects" / "p" / "dense.jsonl"
    _size, calls = agent_logs.write_dense(path, 100)
    db = tmp_path / "store.duckdb"
    peak, _said = _peak_rss(tmp_path, _MAIN, ["ingest", "--db", str(db), str(path)])
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM calls").fetchone() == (calls,)
    assert peak < 600 * MB, f"peak RSS {peak / MB:.0f} MB"


def test_a_transcript_read_in_parts_then_grown_reads_on_as_one_read(tmp_path: Path) -> None:
    # The calls a read wrote in parts are let go as the calls before its resume point are
    # (analyzer.ingest.resume): a line of the grown file adding to one reads the file whole.
    first = "".join(json.dumps(x) + "\n" for x in _long(60))
    more = [_said(200, "m2", "r2", "/late.py"), *_long(10, start=60)]  # (m2: in a part)
    whole = first + "".join(json.dumps(x) + "\n" for x in more)
    path = tmp_path / "grown" / "projects" / "p" / "t.jsonl"
    path.parent.mkdir(parents=True)
    once = tmp_path / "once" / "projects" / "p" / "t.jsonl"
    once.parent.mkdir(parents=True)
    once.write_text(whole)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(flow, "BATCH_FILE_BYTES", 0)  # (loaded on its own, as a long file is)
        with open_new_or_existing(tmp_path / "once.duckdb") as store:
            ingest_paths(store, [str(once)], IngestOptions())
        mp.setattr(claude_code, "OPEN_CALLS", 8)
        mp.setattr(claude_code, "PART_CALLS", 4)
        with open_new_or_existing(tmp_path / "grown.duckdb") as store:
            for text in (first, whole):
                path.write_text(text)
                ingest_paths(store, [str(path)], IngestOptions())
    grown, one = _stored(tmp_path / "grown.duckdb"), _stored(tmp_path / "once.duckdb")
    assert grown["calls"] == one["calls"] and grown["messages"] == one["messages"]
