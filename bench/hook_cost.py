"""What the Claude Code hook costs on a large transcript (issue 45, cause 10: it read the whole
transcript at each call, 7 s at 200 MB and 66 s at 2 GB, past Claude Code's 60 s hook timeout).

    python bench/hook_cost.py                    # a 200 MiB transcript, the whole and the tail
    python bench/hook_cost.py --mib 2048 --repeat 1
    python bench/hook_cost.py --tails -          # as a version without --tail-mib runs it

The transcript is generated in the shape of the sample's Claude Code session
(``sample_data/claude-code``): turns of a user's prompt and exchanges (an assistant line of
text and one of a tool call, of one API call, as Claude Code writes them; the tool's result,
2.4 KB), the last turn ending in the sample's loop (the same Bash command three times), so
that the hook has a stop to find at the end of any tail.

Each run is the hook as Claude Code runs it: ``llm-forensics guard claude-hook --policy
opencode_doom_loop`` in its own process, the documented JSON on stdin. For each ``--tail-mib``
of ``--tails`` (``0``: the whole transcript, as before the bound; ``-``: the option left out,
for a version without it) it prints the median wall time of ``--repeat`` runs and the largest
peak RSS (``wait4``), and checks the answer is the stop (a benchmark of wrong answers is
useless: exit 1). Then a payload over the 64 MiB input bound: the hook's answer and its time.
Figures, not a test: the machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = [sys.executable, "-m", "analyzer", "guard", "claude-hook", "--policy", "opencode_doom_loop"]
MIB = 2**20
SESSION = "5f0c2a9e-8d41-4b7a-9c3e-1a2b3c4d5e6f"
EXCHANGES_PER_TURN = 40


def _line(kind: str, uuid: str, at: str, message: dict[str, object], request: str = "") -> str:
    obj: dict[str, object] = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/koda",
        "sessionId": SESSION,
        "version": "2.1.38",
        "gitBranch": "main",
        "type": kind,
        "uuid": uuid,
        "timestamp": at,
        "message": message,
    }
    if request:
        obj["requestId"] = request
    return json.dumps(obj, separators=(",", ":")) + "\n"


def _exchange(i: int, command: str, filler: str) -> str:
    """The ``i``-th call: its two assistant lines (text, then the tool call) and the result."""
    day, hms = 1 + (i // 86400) % 28, f"{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}"
    at = f"2025-12-{day:02d}T{hms}.000Z"
    usage = {
        "input_tokens": 4,
        "cache_creation_input_tokens": 600,
        "cache_read_input_tokens": 18430 + 40 * (i % 2000),
        "output_tokens": 2,
    }

    def reply(content: list[dict[str, object]]) -> dict[str, object]:
        return {
            "model": "claude-sonnet-4-5-20250929",
            "id": f"msg_{i:08d}",
            "type": "message",
            "role": "assistant",
            "content": content,
            "stop_reason": None,
            "usage": usage,
        }

    tool = {"type": "tool_use", "id": f"toolu_{i:08d}", "name": "Bash"}
    result = {"type": "tool_result", "tool_use_id": f"toolu_{i:08d}", "content": filler}
    return (
        _line("assistant", f"a{i}", at, reply([{"type": "text", "text": "Checking."}]), f"r{i}")
        + _line("assistant", f"b{i}", at, reply([{**tool, "input": {"command": command}}]), f"r{i}")
        + _line("user", f"c{i}", at, {"role": "user", "content": [result]})
    )


def write_transcript(path: Path, mib: float) -> int:
    """A session of about ``mib`` MiB ending in a loop; its calls."""
    target, size, i = int(mib * MIB), 0, 0
    filler = "x" * 2400
    with open(path, "w", encoding="utf-8") as fh:
        while True:
            looping = size >= target
            if i % EXCHANGES_PER_TURN == 0 or (looping and i % EXCHANGES_PER_TURN != 0):
                prompt = {"role": "user", "content": f"step {i // EXCHANGES_PER_TURN}"}
                text = _line("user", f"p{i}", "2025-12-01T00:00:00.000Z", prompt)
                fh.write(text)
                size += len(text)
            if looping:
                for k in range(3):
                    fh.write(_exchange(i + k, "cargo test", filler))
                return i + 3
            text = _exchange(i, f"ls src/m{i % 400}", filler)
            fh.write(text)
            size += len(text)
            i += 1


def run_hook(payload: bytes, extra: list[str]) -> tuple[float, float, int, str, str]:
    """One run: (wall seconds, CPU seconds, peak RSS in MB, stdout, stderr)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([*CLI, *extra], stdin=subprocess.PIPE, stdout=out, stderr=err)
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # (the hook read to its bound, went on)
            proc.stdin.write(payload)
        proc.stdin.close()
        _pid, _status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        said = out.read().decode(errors="replace")
        cpu = usage.ru_utime + usage.ru_stime
        return seconds, cpu, int(usage.ru_maxrss / 1024), said, err.read().decode(errors="replace")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=float, default=200.0, help="the transcript's size")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tails", default="0,32", help="--tail-mib values (0: whole; -: none)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lf-hook-bench-") as tmp:
        path = Path(tmp) / "projects" / "-home-dev-koda" / f"{SESSION}.jsonl"
        path.parent.mkdir(parents=True)
        calls = write_transcript(path, args.mib)
        size = path.stat().st_size
        print(f"transcript: {size / MIB:,.1f} MiB, {calls:,} calls, ending in a loop")
        payload = json.dumps(
            {"transcript_path": str(path), "hook_event_name": "PreToolUse", "tool_name": "Bash"}
        ).encode()
        figures: dict[str, object] = {"transcript_mib": round(size / MIB, 1), "calls": calls}
        wrong = False
        for tail in args.tails.split(","):
            extra = [] if tail == "-" else ["--tail-mib", tail]
            runs = [run_hook(payload, extra) for _ in range(args.repeat)]
            seconds = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            rss = max(r[2] for r in runs)
            stops = all('"continue": false' in r[3] for r in runs)
            wrong |= not stops
            label = "whole (--tail-mib 0)" if tail == "0" else f"--tail-mib {tail}"
            label = "no --tail-mib" if tail == "-" else label
            note = runs[0][4].strip().splitlines()[-1:] or ["(nothing on stderr)"]
            print(
                f"{label:>22}: {seconds:6.2f} s (CPU {cpu:.2f} s), median of {args.repeat}; "
                f"peak {rss:,} MB; {'stops' if stops else 'NO STOP'}\n{'':>24}{note[0]}"
            )
            figures[label] = {
                "median_s": round(seconds, 2),
                "median_cpu_s": round(cpu, 2),
                "peak_rss_mb": rss,
                "stops": stops,
            }
        big = json.dumps(
            {"transcript_path": str(path), "tool_response": {"stdout": "x" * 65 * MIB}}
        ).encode()
        seconds, cpu, rss, _said, err = run_hook(big, [])
        print(f"{'a 65 MiB payload':>22}: {seconds:6.2f} s (CPU {cpu:.2f} s); peak {rss:,} MB")
        print(f"{'':>24}{err.strip()}")
        figures["payload_65_mib"] = {
            "s": round(seconds, 2),
            "peak_rss_mb": rss,
            "said": err.strip(),
        }
        print(json.dumps(figures))
        if wrong:
            sys.exit("bench: the hook did not stop the loop at the end of the transcript")


if __name__ == "__main__":
    main()
