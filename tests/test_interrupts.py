"""Ctrl-C during ingest (issue 33, "Faults and interrupts"): whatever the moment, no traceback,
exit 130, and one line that says exactly what the store holds of the run.

Each test runs the real CLI (``python -m analyzer ingest``) on a folder of 500 small Claude
Code transcripts, read by two worker processes, in a process group of its own, and sends
SIGINT to that whole group, as a terminal's Ctrl-C does (so the workers get it too). The
moments are found, not guessed with a sleep:

* while the workers start: a worker process exists and has its Python signal handling in
  place (``/proc/<pid>/status``), so it is importing the package. Whether a worker that takes
  the signal then prints its traceback depends on whether the writer kills it first, so the
  test also checks, there, that the importing worker has SIGINT blocked or ignored;
* while the files are read: the child's own count of the files on its stderr, a terminal here
  (``reading files 250/500``), and the last file (the batch's commit comes next);
* inside a statement of the batch's transaction, and just after its ``COMMIT``: the child is
  the CLI with one function of the batch wrapped (``_DRIVER``) to say on stderr when it is
  there - in an insert that only Ctrl-C ends, on one thread so DuckDB sees the signal
  between two of its tasks, or in Python once the batch is committed.

Then: the exit code is 130, stderr has no traceback and no error, only the one line, and the
count in that line is the number of ``sources`` rows the store holds when opened afterwards.
Two more: exit 130 even when CPython would end a ``python -m`` run by SIGINT, and ``audit``
without --db (its store is in memory) saying nothing is kept.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from analyzer.engine.store import OFFLINE
from analyzer.load.workers import ENV as WORKERS_ENV
from tests.helpers import REPO

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc; process groups and a pty"
)

FILES = 500
EXCHANGES = 40  # calls per file: enough for a batch commit that takes a while
WAIT_S = 120  # the most to wait for a moment (a loaded machine is slow, never this slow)
LINE = re.compile(r"interrupted: this run stored ([\d,]+) of the ([\d,]+) files found(;.*)?")

# The CLI with the batch's insert of calls wrapped: after the real insert, inside the batch's
# transaction, an insert that only Ctrl-C ends (it inserts nothing, and never ends: Ctrl-C in a
# write aborts the transaction, as in a real insert; a filter DuckDB cannot prove false from
# its statistics, which would skip the scan), and a line on stderr once it runs.
_IN_A_STATEMENT = """
import sys, threading, time
import analyzer.load.batch as batch
real = batch.Sink.calls
def calls(self, *args):
    found = real(self, *args)
    con = self.engine.con
    con.execute("SET threads = 1")  # (DuckDB checks for signals between the tasks it runs)
    def say():
        while con.query_progress() < 0:
            time.sleep(0.001)
        sys.stderr.write("lf-test: in a statement of the batch\\n")
        sys.stderr.flush()
    threading.Thread(target=say, daemon=True).start()
    con.execute(
        "INSERT INTO rejects SELECT NULL, NULL, 'never', NULL "
        "FROM range(1000000000000000) t(i) WHERE i::VARCHAR = 'never'"
    )
    return found
batch.Sink.calls = calls
"""

# The CLI with the batch's commit wrapped: once it has committed, a line on stderr, and Python
# waits there for Ctrl-C (as if it came as ``COMMIT`` returned).
_AFTER_COMMIT = """
import sys, time
import analyzer.load.batch as batch
real = batch.Batch.commit
def commit(self, later=False):
    done = real(self, later)
    if done:
        sys.stderr.write("lf-test: the batch is committed\\n")
        sys.stderr.flush()
        while True:
            time.sleep(0.01)
    return done
batch.Batch.commit = commit
"""

_DRIVER = (
    "import sys; sys.path.insert(0, {root!r})\n{patch}\n"
    "from analyzer.cli.main import main\nmain()\n"
)


def _exchange(n: int, i: int) -> str:
    """One API call of session ``n`` as Claude Code logs it: the user's turn, the reply."""
    sid = f"{n:08x}-0000-4000-8000-{n:012x}"
    ts = f"2026-01-{1 + n % 28:02d}T{i // 60 % 24:02d}:{i % 60:02d}:00.000Z"
    lines = [
        {
            "type": "user",
            "sessionId": sid,
            "uuid": f"u{n}-{i}",
            "timestamp": ts,
            "message": {"role": "user", "content": f"step {i}"},
        },
        {
            "type": "assistant",
            "sessionId": sid,
            "uuid": f"a{n}-{i}",
            "timestamp": ts,
            "requestId": f"req_{n}_{i}",
            "message": {
                "model": "claude-sonnet-4-5-20250929",
                "id": f"msg_{n}_{i}",
                "role": "assistant",
                "stop_reason": "end_turn",
                "content": [{"type": "text", "text": "Done."}],
                "usage": {
                    "input_tokens": 3,
                    "cache_creation_input_tokens": 400,
                    "cache_read_input_tokens": 9000 + 40 * i,
                    "output_tokens": 4,
                },
            },
        },
    ]
    return "".join(json.dumps(x) + "\n" for x in lines)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """500 transcripts in 10 project folders, as ``~/.claude/projects`` holds them."""
    root = tmp_path_factory.mktemp("history")
    for n in range(FILES):
        path = root / f"project-{n % 10}" / f"session-{n:04d}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(_exchange(n, i) for i in range(EXCHANGES)), encoding="utf-8")
    return root


@dataclass
class Child:
    """The CLI ingesting in a process group of its own, its stderr read here (on a pty: the
    CLI then counts the files it reads there)."""

    proc: subprocess.Popen[bytes]
    err: int  # the read end of its stderr
    stderr: str = ""

    @classmethod
    def start(
        cls,
        tmp_path: Path,
        history: Path,
        patch: str | None = None,
        command: tuple[str, ...] = ("ingest", "--db", "store.duckdb"),
        pythonpath: Path | None = None,
    ) -> Child:
        args = ["-m", "analyzer"]
        if patch is not None:
            args = ["-c", _DRIVER.format(root=str(REPO), patch=patch)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_FORENSICS_")}
        env[WORKERS_ENV] = "2"  # two workers, whatever the machine's idle cores
        env["COLUMNS"] = "200"
        if pythonpath is not None:
            env["PYTHONPATH"] = str(pythonpath)
        master, slave = pty.openpty()
        try:
            proc = subprocess.Popen(
                [sys.executable, *args, *command, str(history)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=slave,
                cwd=tmp_path,
                env=env,
                start_new_session=True,
            )
        finally:
            os.close(slave)
        return cls(proc, master)

    def pump(self, timeout: float) -> None:
        ready, _, _ = select.select([self.err], [], [], timeout)
        if ready:
            try:
                data = os.read(self.err, 65536)
            except OSError:  # EIO: the child's side is closed
                return
            self.stderr += data.decode("utf-8", "replace")

    def wait_for(self, ready: Callable[[Child], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not ready(self):
            assert self.proc.poll() is None, f"the child ended before {what}\n{self.stderr}"
            assert time.monotonic() < deadline, f"no {what} within {WAIT_S} s\n{self.stderr}"
            self.pump(0.002)

    def ctrl_c(self) -> tuple[int, str]:
        """SIGINT to the child's process group, as a terminal's Ctrl-C; its exit code and
        stderr."""
        os.killpg(self.proc.pid, signal.SIGINT)
        deadline = time.monotonic() + WAIT_S
        while self.proc.poll() is None:  # (reading its stderr: it never waits for room there)
            assert time.monotonic() < deadline, f"still running {WAIT_S} s after Ctrl-C"
            self.pump(0.01)
        code = self.proc.returncode
        while True:  # whatever it wrote before it ended
            before = len(self.stderr)
            self.pump(0.05)
            if len(self.stderr) == before:
                break
        return code, self.stderr

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        os.close(self.err)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # (it ended while we looked)
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def sigint(pid: int) -> dict[str, bool] | None:
    """How process ``pid`` takes SIGINT (caught, ignored, blocked), from ``/proc``: None unless
    it is a worker (its command line says so, so it is past ``exec``) whose Python has set its
    handling up (caught or ignored): past the interpreter's start, in its imports."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    masks = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    bit = 1 << (signal.SIGINT - 1)
    how = {k: bool(int(masks[f"Sig{k.title()}"], 16) & bit) for k in ("cgt", "ign", "blk")}
    if b"serve()" not in command or not (how["cgt"] or how["ign"]):
        return None
    return how


def stored(db: Path) -> int:
    """The files the store holds (none when the run left no store behind)."""
    if not db.exists():
        return 0
    with duckdb.connect(str(db), read_only=True, config=OFFLINE) as con:
        return int(con.execute("SELECT count(*) FROM sources").fetchall()[0][0])


def said(stderr: str) -> list[str]:
    """The lines on stderr, without the file count redrawn in place."""
    lines = [line.strip() for line in re.split(r"[\r\n]", stderr)]
    return [line for line in lines if line and not line.startswith("reading files ")]


def assert_told_what_is_stored(code: int, stderr: str, db: Path) -> int:
    """Exit 130, no traceback nor error, and one line whose count is what the store holds."""
    lines = said(stderr)
    shown = "\n".join(lines)
    assert "Traceback" not in stderr, shown
    assert "unexpected" not in stderr and "Error" not in stderr, shown
    assert code == 130, (code, shown)
    assert len(lines) == 1, shown
    holds = stored(db)
    m = LINE.fullmatch(lines[0])
    assert m is not None, f"said {lines[0]!r}; the store holds {holds} files"
    count, found = (int(g.replace(",", "")) for g in m.group(1, 2))
    assert (count, found) == (holds, FILES), f"said {lines[0]!r}; the store holds {holds} files"
    return count


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_ctrl_c_while_the_workers_start(tmp_path: Path, history: Path) -> None:
    """The workers import the package for a second or so: Ctrl-C then reaches them too, and
    none may print a traceback (each ignores SIGINT from its first instruction), while the
    writer says it stored nothing and stops them."""
    child = Child.start(tmp_path, history)
    try:
        workers: dict[int, dict[str, bool]] = {}

        def started(c: Child) -> bool:
            workers.update((p, how) for p in children(c.proc.pid) if (how := sigint(p)))
            return bool(workers)

        child.wait_for(started, "a worker importing")
        code, stderr = child.ctrl_c()
    finally:
        child.close()
    # Importing, a worker does not take SIGINT: blocked, or ignored. (Taken, it is a
    # KeyboardInterrupt with a traceback of the import, printed unless the writer happens to
    # kill the worker first.)
    assert all(how["ign"] or how["blk"] for how in workers.values()), workers
    assert assert_told_what_is_stored(code, stderr, tmp_path / "store.duckdb") == 0
    assert all(gone(p) for p in workers)  # stopped (and waited for) by the writer
    assert not (tmp_path / "store.duckdb").exists()  # a first ingest that stored nothing


# three moments while the files are read: CI runs them; the default run keeps Ctrl-C while the
# workers start, in a statement of the batch's commit and just after it
@pytest.mark.slow
@pytest.mark.parametrize("at", [1, FILES // 2, FILES - 1])
def test_ctrl_c_while_the_files_are_read(tmp_path: Path, history: Path, at: int) -> None:
    """At the second file, at the middle, and at the last one (the batch's commit follows it):
    the count said is the count stored, whatever was under way when the signal came."""
    child = Child.start(tmp_path, history)
    try:
        child.wait_for(lambda c: f"reading files {at:,}/{FILES:,}" in c.stderr, f"file {at}")
        code, stderr = child.ctrl_c()
    finally:
        child.close()
    assert_told_what_is_stored(code, stderr, tmp_path / "store.duckdb")


def test_ctrl_c_in_a_statement_of_the_batch_commit(tmp_path: Path, history: Path) -> None:
    """A statement Ctrl-C stops aborts the batch's transaction, and the statements after it (an
    ``unregister`` in a ``finally``) fail with "Current transaction is aborted": it is still
    Ctrl-C (exit 130), never "Error: database: ..." (exit 3); nothing of the batch is stored."""
    child = Child.start(tmp_path, history, patch=_IN_A_STATEMENT)
    try:
        child.wait_for(lambda c: "lf-test: in a statement" in c.stderr, "the batch's statement")
        code, stderr = child.ctrl_c()
    finally:
        child.close()
    stderr = stderr.replace("lf-test: in a statement of the batch", "")
    assert assert_told_what_is_stored(code, stderr, tmp_path / "store.duckdb") == 0


def test_ctrl_c_just_after_the_batch_commit(tmp_path: Path, history: Path) -> None:
    """Ctrl-C as the batch's ``COMMIT`` returns: all 500 files are stored, and the line says so
    (it said "nothing from ... nor from the 499 files read with it")."""
    child = Child.start(tmp_path, history, patch=_AFTER_COMMIT)
    try:
        child.wait_for(lambda c: "lf-test: the batch is committed" in c.stderr, "the commit")
        code, stderr = child.ctrl_c()
    finally:
        child.close()
    stderr = stderr.replace("lf-test: the batch is committed", "")
    assert assert_told_what_is_stored(code, stderr, tmp_path / "store.duckdb") == FILES


def test_ctrl_c_exits_130_whatever_cpython_saw_before(tmp_path: Path, history: Path) -> None:
    """Once a KeyboardInterrupt was raised inside code that exec() ran (a dataclass or named
    tuple an import was creating when Ctrl-C came), and no exec() ran after it, CPython ends a
    ``python -m`` run by SIGINT (-2) whatever exit code it asked for, even if that
    KeyboardInterrupt was caught. The tests above met it about once in 40 runs. Here a
    ``sitecustomize`` puts CPython in that state as the process ends (an ``atexit`` function
    raises and catches one so), and Ctrl-C comes at the middle file: still exit 130."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import atexit\n"
        "def caught():\n"
        "    try:\n"
        "        exec('raise KeyboardInterrupt')\n"
        "    except KeyboardInterrupt:\n"
        "        pass\n"
        "atexit.register(caught)\n",
        encoding="utf-8",
    )
    child = Child.start(tmp_path, history, pythonpath=site)
    try:
        half = f"reading files {FILES // 2:,}/{FILES:,}"
        child.wait_for(lambda c: half in c.stderr, "the middle file")
        code, stderr = child.ctrl_c()
    finally:
        child.close()
    assert_told_what_is_stored(code, stderr, tmp_path / "store.duckdb")


def test_ctrl_c_in_an_audit_without_a_store(tmp_path: Path, history: Path) -> None:
    """Without --db the store lives in memory and goes with the process: the line says nothing
    is kept (not that some files were, or that the one under way was not)."""
    child = Child.start(tmp_path, history, command=("audit",))
    try:
        half = f"reading files {FILES // 2:,}/{FILES:,}"
        child.wait_for(lambda c: half in c.stderr, "the middle file")
        code, stderr = child.ctrl_c()
    finally:
        child.close()
    assert "Traceback" not in stderr
    assert (code, said(stderr)) == (
        130,
        ["interrupted: nothing is kept (without --db the store is temporary)"],
    )
    assert list(tmp_path.iterdir()) == []
