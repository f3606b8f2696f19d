"""What the Claude Code hook and the status line cost per call, as Claude Code runs them (issue 49).

    python bench/hook.py                 # transcripts of 10 and 100 MiB, 200 timed calls each
    python bench/hook.py --mib 10 --calls 50

Claude Code runs the hook in a new process after every tool call, with the transcript as it
is so far. Here a transcript in the shape of bench/hook_cost.py's (turns of 40 exchanges: an
assistant line of text and one of a tool call, of one API call, then the tool's 2.4 KB
result) grows as a session does: up to its size less the timed part in steps of about 1 MiB,
the hook called after each step (untimed: it keeps its state, so each call reads only what is
new), then one exchange at a time with the hook called after each (timed: wall time of the
whole process, start-up included, its input written to its stdin). The last three timed
exchanges repeat one command (the loop ``opencode_doom_loop`` stops); the hook's last answer
must be that stop, and must equal the full replay's (the transcript ingested into a store and
replayed, ``analyzer.api.claude_hook.judge``), or the run fails (exit 1): a benchmark of wrong
answers is useless.

It prints, per transcript, the median and 99th percentile of the timed calls against the
target (p99 <= 100 ms), met or MISSED, the first call on the transcript without a state (the
whole read), and the same for ``llm-forensics statusline`` run after each timed call. The
last line is the figures as JSON (``bench/run.py`` reads it). Figures, not a test: the
machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hook_cost import EXCHANGES_PER_TURN, MIB, SESSION, _exchange, _line

POLICY = "opencode_doom_loop"
TARGET_P99_S = 0.100
FILLER = "x" * 2400


def command() -> list[str]:
    """The installed command beside this Python (the entry point Claude Code runs)."""
    installed = Path(sys.executable).parent / "llm-forensics"
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "analyzer"]


class Session:
    """A transcript growing as Claude Code writes it."""

    def __init__(self, path: Path) -> None:
        self.path, self.i, self.size = path, 0, 0
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")

    def exchange(self, command: str) -> None:
        text = ""
        if self.i % EXCHANGES_PER_TURN == 0:
            prompt = {"role": "user", "content": f"step {self.i // EXCHANGES_PER_TURN}"}
            text += _line("user", f"p{self.i}", "2025-12-01T00:00:00.000Z", prompt)
        text += _exchange(self.i, command, FILLER)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(text)
        self.size += len(text)
        self.i += 1


def call(cmd: list[str], payload: bytes, env: dict[str, str]) -> tuple[float, str, str]:
    """One process: (wall seconds, stdout, stderr)."""
    started = time.perf_counter()
    done = subprocess.run(cmd, input=payload, capture_output=True, env=env, check=False)
    seconds = time.perf_counter() - started
    return seconds, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def full_replay(path: Path) -> str:
    """The whole path's answer (the transcript ingested and replayed), as the hook prints it."""
    from analyzer.api.claude_hook import answer_json, judge
    from analyzer.guards.guard import Guard

    said = answer_json(judge(path, Guard.load(POLICY), 0), "PostToolUse")
    return json.dumps(said) if said is not None else ""


def run_one(root: Path, mib: float, calls: int, env: dict[str, str]) -> dict[str, object]:
    cmd = [*command(), "guard", "claude-hook", "--policy", POLICY]
    line_cmd = [*command(), "statusline"]
    session = Session(root / "projects" / "-home-dev-koda" / f"{SESSION}.jsonl")
    payload = json.dumps(
        {"transcript_path": str(session.path), "hook_event_name": "PostToolUse"}
    ).encode()
    line_payload = json.dumps(
        {"session_id": SESSION, "transcript_path": str(session.path), "cost": {}}
    ).encode()
    untimed = int(mib * MIB) - calls * 7_700  # (an exchange is about 7.7 KB)
    first = None
    step = MIB
    while session.size < untimed:
        goal = min(untimed, (session.size // step + 1) * step)  # (the next MiB)
        while session.size < goal:
            session.exchange(f"ls src/m{session.i % 400}")
        seconds, _out, err = call(cmd, payload, env)
        if first is None:
            first = seconds
        if err.strip():
            sys.exit(f"bench: the hook said on stderr: {err.strip()}")
    catch_up = call(cmd, payload, env)[0]
    call(line_cmd, line_payload, env)  # (the status line's own state, read up to here)
    times: list[float] = []
    line_times: list[float] = []
    answer = line = ""
    for k in range(calls):
        looping = k >= calls - 3
        session.exchange("cargo test" if looping else f"ls src/m{session.i % 400}")
        seconds, answer, err = call(cmd, payload, env)
        times.append(seconds)
        if err.strip():
            sys.exit(f"bench: the hook said on stderr: {err.strip()}")
        seconds, line, err = call(line_cmd, line_payload, env)
        line_times.append(seconds)
        if err.strip() or line.startswith("llm-forensics:"):
            sys.exit(f"bench: the status line said: {line.strip()} {err.strip()}")
    replayed = full_replay(session.path)
    p50, p99 = statistics.median(times), percentile(times, 0.99)
    met = "met" if p99 <= TARGET_P99_S else "MISSED"
    print(
        f"hook, {session.size / MIB:,.1f} MiB ({session.i:,} calls): p50 {p50 * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, max {max(times) * 1000:.0f} ms over {calls} calls "
        f"(target p99 <= {TARGET_P99_S * 1000:.0f} ms: {met}); a read of the last ~1 MiB "
        f"{catch_up * 1000:.0f} ms; the first call (1 MiB, no state) {(first or 0) * 1000:.0f} ms"
    )
    if '"continue": false' not in answer.strip() or answer.strip() != replayed:
        print(f"  the hook said: {answer.strip()!r}\n  the full replay: {replayed!r}")
        sys.exit("bench: the hook's last answer is not the full replay's stop")
    print("  its last answer is the full replay's: the stop")
    l50, l99 = statistics.median(line_times), percentile(line_times, 0.99)
    line_met = "met" if l99 <= TARGET_P99_S else "MISSED"
    print(
        f"statusline, the same transcript after each call: p50 {l50 * 1000:.0f} ms, p99 "
        f"{l99 * 1000:.0f} ms (target p99 <= {TARGET_P99_S * 1000:.0f} ms: {line_met}); it "
        f"said {line.strip()!r}"
    )
    return {
        "mib": round(session.size / MIB, 1),
        "calls": session.i,
        "p50_ms": round(p50 * 1000, 1),
        "p99_ms": round(p99 * 1000, 1),
        "first_call_ms": round((first or 0) * 1000, 1),
        "statusline_p50_ms": round(l50 * 1000, 1),
        "statusline_p99_ms": round(l99 * 1000, 1),
        "met": met == "met" and line_met == "met",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", default="10,100", help="transcript sizes in MiB")
    ap.add_argument("--calls", type=int, default=200, help="timed calls per transcript")
    args = ap.parse_args()
    import analyzer  # (its bytecode compiled first, as `pip install` does)

    compileall.compile_dir(str(Path(analyzer.__file__).parent), quiet=1)
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="lf-hook-") as tmp:
        env = {**os.environ, "XDG_DATA_HOME": str(Path(tmp) / "data"), "HOME": tmp}
        for mib in args.mib.split(","):
            root = Path(tmp) / f"t{mib}"
            figures[f"hook_{mib}_mib"] = run_one(root, float(mib), args.calls, env)
    if not all(isinstance(f, dict) and f["met"] for f in figures.values()):
        print("bench: a target was MISSED (figures above)")
    print(json.dumps(figures))  # (the last line: bench/run.py reads it)


if __name__ == "__main__":
    main()
