"""Reading small agent logs in worker processes while this one writes the store.

A history of many small transcripts is mostly Python reading JSON lines. When there is enough
of it (``MIN_BYTES``) and cores to spare (up to two workers, as many as the cores idle when
ingest starts; ``$LLM_FORENSICS_INGEST_WORKERS`` says how many instead, 0 for none),
a few worker processes read the files ahead of the one that writes the store: each hashes a
file, checks its bytes and, for a small file of a format that is loaded in batches, reads it
into Arrow tables (``analyzer.load.staged``), exactly as this process would
(``analyzer.load.prepare``). The writer takes the results in file order and decides
everything else as before (unchanged files, duplicates, batches, errors), so the store's
contents and the order files are written in do not depend on the workers' timing; a result it
cannot use (the file changed since it was asked for, a worker that died) is computed here
instead.

The workers are fresh interpreters (``python -c``, importing this very package), never forks of a
process whose DuckDB or Arrow threads are running; they ignore Ctrl-C from their first
instruction on (this process stops them: no traceback of theirs reaches the terminal), and one
whose writer is gone ends at the end of its input.
"""

from __future__ import annotations

import os
import pickle
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from analyzer.engine.arrow_setup import skip_pandas
from analyzer.errors import ForensicsError
from analyzer.ingest.base import Head, IngestOptions, SourceFile

ENV = "LLM_FORENSICS_INGEST_WORKERS"
MIN_BYTES = 24 << 20  # input of small files that pays for starting the workers
AHEAD_BYTES = 256 << 20  # input asked for and not yet taken, at most (results ~40% of it)
AHEAD_FILES = 512
_FRAME = struct.Struct("<Q")


@dataclass(frozen=True)
class Job:
    path: str
    display: str
    explicit: bool
    size: int
    mtime_ns: int
    small: bool  # small enough for a batch: read it, not only hash it


@dataclass
class Prepared:
    """What a worker found: the sniffed format, the head it sniffed, the fingerprint, and the
    staged rows (bytes of ``staged.to_wire``), or that the file cannot be batched, or the
    error reading it raised (its class, message, file and line)."""

    stat: tuple[int, int]  # the file's size and modification time when it was read
    fmt: str
    head: Head
    digest: str
    damage: str | None
    checked_head: Head
    mixed: bool
    staged: bytes | None = None
    unbatchable: bool = False
    error: tuple[type[ForensicsError], str, str | None, int | None] | None = None

    def raise_error(self) -> None:
        if self.error is not None:
            cls, message, path, line = self.error
            raise cls(message, path, line)


def prepare(job: Job, options: IngestOptions) -> Prepared | None:
    """A file read as ``flow.ingest_file`` reads it; None when there is nothing to give (the
    writer then does it all itself)."""
    from analyzer.ingest.reading import read_head
    from analyzer.load.prepare import fingerprint, read_staged, sniff
    from analyzer.load.staged import to_wire

    path = Path(job.path)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode) or (st.st_size, st.st_mtime_ns) != (
            job.size,
            job.mtime_ns,
        ):
            return None
        head = read_head(path, job.display)
        src = SourceFile(path, job.display, job.size, head, job.explicit)
        fmt = sniff(src, options)
        if fmt is None:
            return None
        digest, damage, checked, mixed = fingerprint(path, head)
    except (ForensicsError, OSError):
        return None
    out = Prepared((job.size, job.mtime_ns), fmt.name, head, digest, damage, checked, mixed)
    if job.small and fmt.batch and head.compression is None:
        src.head, src.mixed_line_ends = checked, mixed
        try:
            staged = read_staged(fmt, src, options)
        except ForensicsError as exc:
            out.error = (type(exc), exc.message, exc.path, exc.line)
            return out
        if staged is None:
            out.unbatchable = True
        else:
            out.staged = to_wire(staged)
    return out


def _send(fh: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(_FRAME.pack(len(data)) + data)
    fh.flush()


def _receive(fh: IO[bytes]) -> Any:
    size = fh.read(_FRAME.size)
    if len(size) < _FRAME.size:
        raise EOFError
    data = fh.read(_FRAME.unpack(size)[0])
    return pickle.loads(data)


def serve() -> None:
    """A worker: jobs from stdin, results to stdout, until stdin ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the writer stops the workers
    skip_pandas()  # (pyarrow would import pandas, 0.2 s, at its first conversion)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # (nothing else may write to the results)
    try:
        options = _receive(stdin)
        while True:
            number, job = _receive(stdin)
            try:
                result = prepare(job, options)
            except Exception:  # the writer does this file itself, and meets it there
                result = None
            _send(stdout, (number, result))
    except (EOFError, BrokenPipeError):
        return


@contextmanager
def _sigint_held() -> Iterator[None]:
    """SIGINT blocked in this thread while the block runs (a Ctrl-C meanwhile is taken by
    another of this process's threads, or once unblocked; not on Windows: no such signals)."""
    block = getattr(signal, "pthread_sigmask", None)
    old = block(signal.SIG_BLOCK, {signal.SIGINT}) if block is not None else None
    try:
        yield
    finally:
        if block is not None and old is not None:
            block(signal.SIG_SETMASK, old)


def _start() -> subprocess.Popen[bytes]:
    """A worker process that never sees Ctrl-C. The terminal sends it to the whole process
    group, the workers too, and a worker still importing (before ``serve`` ignores it) would
    print a traceback: so it is started with SIGINT blocked (a child inherits the mask of the
    thread that started it, ``_sigint_held`` by its caller), and ignores it before it lets it
    through (``_START``)."""
    return subprocess.Popen(
        [sys.executable, "-c", _START], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )


class _Worker:
    def __init__(self, options: IngestOptions, results: dict[int, Any], cv: threading.Condition):
        self.proc = _start()
        self.pending: dict[int, int] = {}  # job -> bytes
        self.dropped: set[int] = set()  # jobs whose results are not wanted
        self.alive = True
        self.results, self.cv = results, cv
        assert self.proc.stdin is not None
        _send(self.proc.stdin, options)
        self.reader = threading.Thread(target=self._read, name="llm-forensics-worker", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                number, result = _receive(self.proc.stdout)
                with self.cv:
                    if number in self.dropped:
                        self.dropped.discard(number)
                    else:
                        self.results[number] = result
                    self.pending.pop(number, None)
                    self.cv.notify_all()
        except BaseException:  # the worker ended (or sent what cannot be read)
            with self.cv:
                self.alive = False
                self.cv.notify_all()

    def submit(self, number: int, job: Job) -> bool:
        assert self.proc.stdin is not None
        with self.cv:
            if not self.alive:
                return False
            self.pending[number] = job.size
        try:
            _send(self.proc.stdin, (number, job))
        except OSError:
            with self.cv:
                self.pending.pop(number, None)
            return False
        return True


class Workers:
    """Worker processes reading files ahead of the writer (see the module's docstring)."""

    def __init__(self, count: int, options: IngestOptions) -> None:
        self.cv = threading.Condition()
        self.results: dict[int, Any] = {}
        self.workers: list[_Worker] = []
        try:
            for _ in range(count):
                # (a Ctrl-C waits until the worker started is in the list that ``close`` stops:
                # taken between its start and then, it would leave the process running)
                with _sigint_held():
                    self.workers.append(_Worker(options, self.results, self.cv))
        except BaseException:  # (no process to be had: the caller reads the files itself)
            self.close()
            raise
        self.asked: dict[int, _Worker] = {}
        self.ahead = 0  # bytes asked for and not yet taken
        self.sizes: dict[int, int] = {}

    def room(self) -> bool:
        return self.ahead < AHEAD_BYTES and len(self.asked) < AHEAD_FILES

    def ask(self, number: int, job: Job) -> None:
        """Have file ``number`` read (by the worker with the least input waiting)."""
        with self.cv:
            alive = [w for w in self.workers if w.alive]
        for w in sorted(alive, key=lambda w: sum(w.pending.values())):
            if w.submit(number, job):
                self.asked[number] = w
                self.sizes[number] = job.size
                self.ahead += job.size
                return

    def take(self, number: int) -> Prepared | None:
        """What was found of file ``number`` (waiting for it), or None."""
        w = self.asked.pop(number, None)
        if w is None:
            return None
        self.ahead -= self.sizes.pop(number)
        with self.cv:
            while number not in self.results and w.alive:
                self.cv.wait()
            result: Prepared | None = self.results.pop(number, None)
        return result

    def drop(self, number: int) -> None:
        """File ``number`` needs nothing more (it was unchanged, or taken)."""
        w = self.asked.pop(number, None)
        if w is None:
            return
        self.ahead -= self.sizes.pop(number)
        with self.cv:
            if number in self.results:
                del self.results[number]
            elif w.alive:
                w.dropped.add(number)

    def close(self) -> None:
        for w in self.workers:
            try:
                if w.proc.stdin is not None:
                    w.proc.stdin.close()
            except OSError:
                pass
            w.proc.kill()
            w.proc.wait()
            if w.proc.stdout is not None:
                w.proc.stdout.close()


def count(total_small: int, spare: float | None = None) -> int:
    """How many workers ``total_small`` bytes of small files get (0: none), with ``spare``
    cores (default: measured, ``spare_cores``)."""
    wanted = os.environ.get(ENV, "").strip()
    if wanted:
        if not wanted.isdigit():
            raise ForensicsError(f"${ENV} = {wanted!r} is not a number of workers (0 for none)")
        return int(wanted) if total_small else 0
    if total_small < MIN_BYTES:
        return 0
    # Workers pay only with cores to spare: on a machine busy with other work they add their
    # start-up and the results' passing to what the writer does alone.
    return max(0, min(2, int((spare_cores() if spare is None else spare) + 0.5)))


def spare_cores(window: float = 0.05) -> float:
    """The cores idle now: measured over ``window`` seconds from ``/proc/stat`` (Linux), else
    the cores less the 1-minute load average."""
    cpus = os.cpu_count() or 1
    try:
        total, idle = _cpu_ticks()
        time.sleep(window)
        total2, idle2 = _cpu_ticks()
        if total2 > total:
            return cpus * (idle2 - idle) / (total2 - total)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return cpus - os.getloadavg()[0]
    except (AttributeError, OSError):  # (no load average on this system)
        return float(cpus)


def _cpu_ticks() -> tuple[int, int]:
    """All CPUs' time so far, and the idle part of it (idle and waiting for I/O), in ticks."""
    with open("/proc/stat") as fh:
        ticks = [int(v) for v in fh.readline().split()[1:9]]
    return sum(ticks), ticks[3] + ticks[4]


_ROOT = str(Path(__file__).resolve().parents[2])  # where this ``analyzer`` package lies
_START = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "hasattr(signal, 'pthread_sigmask') and "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
    f"import sys; sys.path.insert(0, {_ROOT!r}); from analyzer.load.workers import serve; serve()"
)
