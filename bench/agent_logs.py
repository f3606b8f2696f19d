"""The agent-log half of the benchmark: a synthetic Claude Code history, ccusage on the same
files, and the fixed cost of a file.

* ``write_history`` writes ``ROOT/projects/<project>/<session>.jsonl`` (Claude Code's own
  layout, so ``CLAUDE_CONFIG_DIR=ROOT`` points ccusage at it): one big session file and the rest
  in files of ``small_mb``. The issue's history is 300 MiB: one file of 100 MiB and 80 of 2.5.
* ``ccusage`` installs ccusage from npm (pinned: ``CCUSAGE``) into the bench's work folder and
  gives the command ``ccusage session --offline --json``; when it cannot be installed, it says
  why, and the benchmark compares with the figure recorded in
  ``shared/reference/ccusage-comparison.md`` instead.
* ``write_files`` writes the same lines twice, as ``n`` small files and as one file: loading
  both, (many - one) / (n - 1) is what a file costs beyond its lines.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

# ccusage 20 is the native (Rust) binary behind the npm launcher; 20.0.24 is the last release
# with a linux-x64 binary in the registry (the comparison in shared/reference measured it).
CCUSAGE = "ccusage@20.0.24"
# That comparison's figure, for a run that cannot install it: 300 MiB in 1.84 s (163 MiB/s).
RECORDED_CCUSAGE_MIB_S = 163.0


def _lines(n: int, i: int, filler: str) -> str:
    """One exchange of session ``n`` (the ``i``-th): two assistant lines of one API call (a text
    block and a tool_use block, as Claude Code writes them), its tool result, a progress line."""
    sid = f"{n:08x}-0000-4000-8000-{n:012x}"
    hms = f"{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}"
    ts = f"2026-01-{1 + n % 28:02d}T{hms}.000Z"
    usage = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 400,
        "cache_read_input_tokens": 9000 + 40 * i,
        "output_tokens": 4,
    }
    lines = [
        {
            "type": "assistant",
            "sessionId": sid,
            "uuid": f"a{i}",
            "timestamp": ts,
            "requestId": f"req_{n}_{i}",
            "message": {
                "model": "claude-sonnet-4-5-20250929",
                "id": f"msg_{n}_{i}",
                "role": "assistant",
                "stop_reason": None,
                "usage": usage,
                "content": [{"type": "text", "text": "Checking the next file."}],
            },
        },
        {
            "type": "assistant",
            "sessionId": sid,
            "uuid": f"b{i}",
            "timestamp": ts,
            "requestId": f"req_{n}_{i}",
            "message": {
                "model": "claude-sonnet-4-5-20250929",
                "id": f"msg_{n}_{i}",
                "role": "assistant",
                "stop_reason": None,
                "usage": usage,
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"t{n}_{i}",
                        "name": "Read",
                        "input": {"file_path": f"/src/m{i % 400}.py"},
                    }
                ],
            },
        },
        {
            "type": "user",
            "sessionId": sid,
            "uuid": f"u{i}",
            "timestamp": ts,
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{n}_{i}", "content": filler}],
            },
        },
        {"type": "progress", "sessionId": sid, "data": {"type": "hook_progress"}},
    ]
    return "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines)


def _session(path: Path, target: int, n: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    filler = "x" * 2400
    size = i = 0
    with open(path, "w", encoding="utf-8") as fh:
        while size < target:
            text = _lines(n, i, filler)
            fh.write(text)
            size += len(text)
            i += 1
    return size


def write_history(root: Path, total_mb: float, big_mb: float, small_mb: float) -> tuple[int, int]:
    """(bytes, files) of a history of ``total_mb``: one file of ``big_mb``, the rest in files of
    ``small_mb``, in 20 project folders."""
    projects = root / "projects"
    total, big, small = (int(x * 2**20) for x in (total_mb, big_mb, small_mb))
    written = _session(projects / "big-project" / "session-big.jsonl", big, 0)
    files, n = 1, 1
    while written < total:
        path = projects / f"project-{n % 20:02d}" / f"session-{n:05d}.jsonl"
        written += _session(path, min(small, total - written), n)
        files += 1
        n += 1
    return written, files


def write_files(root: Path, n: int, kib: int) -> tuple[Path, Path]:
    """The same lines as ``n`` files of about ``kib`` KiB (``root/many``) and as one file
    (``root/one``); each file is one session."""
    many, one = root / "many" / "projects" / "p", root / "one" / "projects" / "p"
    many.mkdir(parents=True, exist_ok=True)
    one.mkdir(parents=True, exist_ok=True)
    filler = "y" * 600
    with open(one / "all.jsonl", "w", encoding="utf-8") as whole:
        for k in range(1, n + 1):
            size, i, parts = 0, 0, []
            while size < kib * 1024:
                text = _lines(k, i, filler)
                parts.append(text)
                size += len(text)
                i += 1
            (many / f"session-{k:05d}.jsonl").write_text("".join(parts), encoding="utf-8")
            whole.write("".join(parts))
    return root / "many", root / "one"


def ccusage(work: Path) -> tuple[list[str] | None, str]:
    """(the command, ``CCUSAGE``) or (None, why it cannot run here)."""
    prefix = work / "ccusage"
    exe = prefix / "node_modules" / ".bin" / "ccusage"
    if not exe.exists():
        npm = shutil.which("npm")
        if npm is None:
            return None, "npm is not installed"
        prefix.mkdir(parents=True, exist_ok=True)
        try:
            proc = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), CCUSAGE],
                capture_output=True,
                text=True,
                timeout=600,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"npm install {CCUSAGE} failed ({exc})"
        if proc.returncode != 0 or not exe.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"npm install {CCUSAGE} failed: {tail[0]}"
    try:
        version = subprocess.run(
            [str(exe), "--version"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{CCUSAGE} does not run here ({exc})"
    if not version:
        return None, f"{CCUSAGE} does not run here (no linux binary for this machine?)"
    return [str(exe), "session", "--offline", "--json"], version


def ccusage_env(history: Path) -> dict[str, str]:
    """ccusage reads ``$CLAUDE_CONFIG_DIR/projects``; nothing of the user's own history."""
    return {**os.environ, "CLAUDE_CONFIG_DIR": str(history), "HOME": str(history)}
