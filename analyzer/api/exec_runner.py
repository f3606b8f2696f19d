"""``watch --exec``: the user's program run for each alert, without holding up the polls.

One program at a time, in the order of the alerts, on a thread of its own (the polls go on
meanwhile). Each run:

* gets the alert's JSON on its standard input (a temporary file, unlinked: nothing to block
  on, nothing left behind); its standard output is not read (it would mix with the watch's
  lines); its standard error is read as it comes, keeping only its last ``STDERR_KEPT`` bytes
  and counting the rest, so a program that writes 500 MB costs the watch 4 KB;
* runs in a session (and process group) of its own: the terminal's Ctrl-C is the watch's,
  and the watch ends the whole group, children and grandchildren too;
* is over when the program itself exits (not when its pipes close: a child it left holding
  them changes nothing). Whatever it left running in its group may run on until the timeout,
  counted from the program's start; then the group is ended, said in one line;
* still running at the timeout: its group gets SIGTERM, and SIGKILL ``KILL_GRACE`` seconds
  later if anything of it is left; said in one line.

The program is reaped only once its group is done: until then its zombie keeps the group's id
from being given to another process, so a signal to the group never reaches a stranger. Only
the runner's thread starts, signals and reaps.

Alerts that come while a program runs wait their turn, up to ``MAX_WAITING`` of them; past that
an alert is not handed to the program (its line was printed all the same), said once until
there is room again. When the watch ends, a running program's group and every group left
behind are ended, and the alerts still waiting are dropped (said in one line).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from analyzer.model.formatting import cut, printable

# How long a program run with --exec may take before its group is ended (seconds).
EXEC_TIMEOUT = 30.0
# Between SIGTERM and SIGKILL to a group being ended (seconds).
KILL_GRACE = 1.0
# The bytes of a program's standard error kept (its last ones: the line saying why it failed).
STDERR_KEPT = 4096
# Alerts waiting for the program while it runs; more are not handed to it.
MAX_WAITING = 20
# How often a running program is looked at while its standard error is quiet (seconds).
TICK = 0.05
# The most of a program's last line of standard error said (characters).
LINE_WIDTH = 200
# Where a process's group is found (Linux).
PROC = Path("/proc")


class Tail:
    """The last ``kept`` bytes of a pipe, read without blocking, and how many bytes came."""

    def __init__(self, pipe: IO[bytes], kept: int = STDERR_KEPT) -> None:
        self.pipe: IO[bytes] | None = pipe
        self.kept = kept
        self.data = b""
        self.total = 0
        os.set_blocking(pipe.fileno(), False)

    def read(self) -> bool:
        """Whatever the pipe holds now; True at its end (the pipe then closed)."""
        while self.pipe is not None:
            try:
                chunk = os.read(self.pipe.fileno(), 65536)
            except BlockingIOError:
                return False
            if not chunk:
                self.pipe.close()
                self.pipe = None
                break
            self.total += len(chunk)
            self.data = (self.data + chunk)[-self.kept :]
        return True

    def hand_over(self) -> None:
        """The pipe is still open (something the program left holds it): read to its end and
        thrown away on a thread, so that its writer never blocks nor gets SIGPIPE."""
        pipe, self.pipe = self.pipe, None
        if pipe is not None:
            os.set_blocking(pipe.fileno(), True)
            threading.Thread(target=_drain, args=(pipe,), daemon=True).start()

    def last_line(self) -> str:
        """Its last line, as one line of ours, saying how much was not kept."""
        lines = self.data.decode(errors="replace").strip().splitlines()
        said = f": {cut(printable(lines[-1]), LINE_WIDTH)}" if lines else ""
        if self.total > len(self.data):
            said += f" (its last {len(self.data):,} bytes of stderr kept of {self.total:,})"
        return said


def _drain(pipe: IO[bytes]) -> None:
    with pipe:
        while pipe.read(65536):
            pass


def _exited(proc: subprocess.Popen[bytes]) -> int | None:
    """The program's exit status once it exited (minus the signal that ended it), without
    reaping it: its zombie keeps its group's id ours."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # (reaped elsewhere: SIGCHLD ignored)
        return proc.wait()
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _others(group: int) -> bool | None:
    """Whether a process of ``group`` other than its leader (the program) runs; None where
    this cannot be seen (no /proc)."""
    if not PROC.is_dir():
        return None
    for entry in os.scandir(PROC):
        if not entry.name.isdigit() or int(entry.name) == group:
            continue
        try:
            stat = (PROC / entry.name / "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # (gone meanwhile)
        state, _parent, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == group and state not in ("Z", "X"):
            return True
    return False


def _signal(group: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _done(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the program exited and nothing else of its group runs (where this is seen)."""
    return _exited(proc) is not None and _others(proc.pid) is False


def end_groups(procs: list[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGTERM to every process of the programs' groups, SIGKILL to what is left of them after
    ``grace`` seconds, then the programs reaped (last: until then their groups' ids are
    ours)."""
    for proc in procs:
        _signal(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not all(_done(p) for p in procs):
        time.sleep(TICK / 2)
    for proc in procs:
        if not _done(proc):
            _signal(proc.pid, signal.SIGKILL)
    for proc in procs:
        proc.wait()


@dataclass
class Left:
    """A program that exited leaving processes in its group: the group ended at ``deadline``
    (the program, not reaped yet, keeps the group's id)."""

    proc: subprocess.Popen[bytes]
    deadline: float


class ExecRunner:
    """``argv`` run for each alert submitted, one at a time in order (see the module's
    docstring); how a run failed is handed to ``tell`` in one line."""

    def __init__(
        self,
        argv: list[str],
        tell: Callable[[str], None],
        timeout: float = EXEC_TIMEOUT,
        grace: float = KILL_GRACE,
        waiting: int = MAX_WAITING,
        kept: int = STDERR_KEPT,
    ) -> None:
        self.argv, self.tell = argv, tell
        self.timeout, self.grace, self.max_waiting, self.kept = timeout, grace, waiting, kept
        self.name = Path(argv[0]).name
        self.skipped = 0  # alerts not handed to the program since the queue was last full
        self._waiting: deque[str] = deque()
        self._left: list[Left] = []  # (the runner's thread's alone)
        self._busy = False  # a payload taken, its run not over
        self._closing = threading.Event()
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._work, name="watch --exec", daemon=True)
        self._thread.start()

    def __enter__(self) -> ExecRunner:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def submit(self, payload: str) -> None:
        """Hand ``payload`` to the program once those before it are done (never blocks)."""
        with self._cond:
            if self._closing.is_set():
                return
            if len(self._waiting) >= self.max_waiting:
                if not self.skipped:
                    self.tell(
                        f"--exec {self.name}: {self.max_waiting} alerts already wait for it: "
                        "the next ones are not handed to it until it catches up"
                    )
                self.skipped += 1
                return
            if self.skipped:
                self.tell(f"--exec {self.name}: {self.skipped:,} alerts were not handed to it")
                self.skipped = 0
            self._waiting.append(payload)
            self._cond.notify_all()

    def idle(self, timeout: float) -> bool:
        """Wait until no alert waits and no program runs (groups left behind aside)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._waiting and not self._busy, timeout)

    def close(self) -> None:
        """Drop the alerts waiting; the runner's thread ends the running program's group and
        every group left behind, and is waited for."""
        with self._cond:
            if self._closing.is_set():
                return
            self._closing.set()
            dropped = len(self._waiting) + self.skipped
            self._waiting.clear()
            self._cond.notify_all()
        if dropped:
            self.tell(f"--exec {self.name}: {dropped:,} alerts not handed to it (the watch ends)")
        self._thread.join(3 * self.grace + 1)

    def _work(self) -> None:
        while True:
            self._end_left()
            with self._cond:
                if self._closing.is_set():
                    break
                if not self._waiting:
                    self._cond.wait(self._until_next())
                    continue
                payload = self._waiting.popleft()
                self._busy = True
            try:
                failed = self._run(payload)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
            if failed:
                self.tell(failed)
        end_groups([x.proc for x in self._left], self.grace)  # (the watch ends)

    def _until_next(self) -> float | None:
        """Seconds until a group left behind is due to be ended (None: none is)."""
        if not self._left:
            return None
        return max(0.0, min(x.deadline for x in self._left) - time.monotonic())

    def _end_left(self) -> None:
        """The groups left behind: those done reaped, those whose time is up ended."""
        now = time.monotonic()
        for x in list(self._left):
            others = _others(x.proc.pid)
            if others is False:
                x.proc.wait()
                self._left.remove(x)
            elif now >= x.deadline and not self._closing.is_set():
                self._left.remove(x)
                end_groups([x.proc], self.grace)
                if others:  # (None: no /proc to tell)
                    self.tell(
                        f"--exec {self.name}: what it left running was ended, "
                        f"{self.timeout:g} s after it started"
                    )

    def _start(self, payload: str) -> subprocess.Popen[bytes]:
        """The program started in a session of its own, ``payload`` on its standard input."""
        with tempfile.TemporaryFile() as stdin:
            stdin.write(payload.encode())
            stdin.seek(0)
            return subprocess.Popen(
                self.argv,
                stdin=stdin,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )

    def _run(self, payload: str) -> str | None:
        """Run the program once with ``payload``; None when it exited 0, else one line."""
        try:
            proc = self._start(payload)
        except OSError as exc:
            return f"--exec {self.name}: could not run it: {exc.strerror or exc}"
        assert proc.stderr is not None
        tail = Tail(proc.stderr, self.kept)
        code = self._wait(proc, tail, time.monotonic() + self.timeout)
        tail.read()
        tail.hand_over()
        if code is None:
            if self._closing.is_set():
                return f"--exec {self.name}: still running as the watch ends: ended"
            return f"--exec {self.name}: still running after {self.timeout:g} s: ended"
        if _others(proc.pid) is False:
            proc.wait()
        else:  # (what it left running, or no /proc to tell)
            self._left.append(Left(proc, time.monotonic() + self.timeout))
        if code == 0:
            return None
        how = f"exit {code}" if code > 0 else f"ended by {_signal_name(-code)}"
        return f"--exec {self.name}: {how}{tail.last_line()}"

    def _wait(self, proc: subprocess.Popen[bytes], tail: Tail, deadline: float) -> int | None:
        """The program's exit status (it is not reaped), its stderr read meanwhile; None when
        it was still running at ``deadline`` or as the watch ended (its group then ended)."""
        with selectors.DefaultSelector() as watched:
            pipe = tail.pipe
            assert pipe is not None
            watched.register(pipe, selectors.EVENT_READ)
            while (code := _exited(proc)) is None:
                left = deadline - time.monotonic()
                if left <= 0 or self._closing.is_set():
                    end_groups([proc], self.grace)
                    return None
                if tail.pipe is None:
                    self._closing.wait(min(left, TICK))
                elif watched.select(min(left, TICK)) and tail.read():
                    watched.unregister(pipe)  # (its end: closed)
            return code
