"""Memory that follows what is kept, not what is read (issue 45, cause 11): a history of many
small transcripts costs the memory of a batch of them, not of every file read; and the names a
refresh compares files by are computed without a system call per folder of each file.

Memory is measured as the peak RSS of a child process (``os.wait4``: that child's own), as in
``tests/test_bombs.py``. ``bench/scale.py`` runs the issue's sizes (100,000 transcripts, a dense
1 GB transcript) and prints time and peak RSS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from analyzer.engine.store import open_new_or_existing
from analyzer.ingest.batch import SourceIndex
from analyzer.ingest.discovery import discover

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


# A child that writes a batch every BATCH_FILES files (2,000 by default): at test size, many
# batches, as 100,000 files make 50.
_CHILD = (
    "import sys; import analyzer.ingest.batch as b; b.BATCH_FILES = int(sys.argv[1]); "
    "from analyzer.cli.main import main; sys.argv[1:2] = []; main()"
)


def _peak_rss(tmp_path: Path, args: list[str]) -> tuple[int, str]:
    """(peak RSS in bytes, what it said) of ``llm-forensics ARGS`` run in a child that batches every
    250 files, read by that process alone (no workers: their number depends on idle cores)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_FORENSICS_")}
    env["LLM_FORENSICS_INGEST_WORKERS"] = "0"
    said = tmp_path / "child.out"
    with open(said, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, "250", *args],
            stdout=out,
            stderr=out,
            env=env,
        )
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = code = os.waitstatus_to_exitcode(status)  # (reaped here)
    assert code == 0, said.read_text()
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, else KiB
    return usage.ru_maxrss * scale, said.read_text()


def test_thousands_of_small_transcripts_take_the_memory_of_a_batch(tmp_path: Path) -> None:
    # Before: every batch's Arrow tables stayed referenced from the index of files read (about
    # 90 KB a file), so memory grew with the files read: 455 MB here, 7.24 GB for the issue's
    # 100,000 first refresh. Now 210 MB here (and 0.9 GB for 100,000, bench/scale.py).
    history = _transcripts(tmp_path / "claude", 4000)
    db = tmp_path / "store.duckdb"
    peak, said = _peak_rss(tmp_path, ["ingest", "--db", str(db), str(history)])
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
