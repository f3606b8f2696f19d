"""What the commands Claude Code runs at every step keep between their runs (the hook's state,
``analyzer.api.hook_state``; the status line's, ``analyzer.api.statusline``): where the files
live, their names, their lock and their atomic writes. Light: both start in milliseconds."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from analyzer import __version__
from analyzer.engine.default_store import FOLDER, data_home

# What a state file holds changes with the program: a state of another version is started again.
STATE_VERSION = f"{__version__}/1"


def state_folder(env: dict[str, str] | None = None) -> Path:
    """Where the hook's states live: ``hooks`` beside the default store's folder."""
    return data_home(dict(os.environ) if env is None else env, Path.home()) / FOLDER / "hooks"


def said_files(folder: Path, transcript: Path) -> list[Path]:
    """What the hooks on ``transcript`` last said, one file per policy (``Said``)."""
    return sorted(folder.glob(f"{digest_of(str(transcript))}-*.said"))


def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of the state ``path`` (a ``.lock`` file beside it)."""
    try:
        import fcntl
    except ImportError:  # (Windows: no lock; the state is still written by an atomic rename)
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (closing releases the lock)


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # (tempfile's import costs more)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
