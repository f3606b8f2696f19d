"""Files this tool writes (reports, Parquet tables, manifests): whole or not at all, and a
disk that says no (full, read-only, no permission) said in one plain line naming the file."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from analyzer.errors import ForensicsError

# What the operating system's refusal means, in the user's words.
_PLAIN = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EFBIG: "the file would be larger than this system allows (ulimit -f)",
    errno.ENOENT: "no such folder",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EIO: "input/output error (the disk or its connection failed)",
}


def os_error(exc: OSError, path: str | Path | None, doing: str = "") -> ForensicsError:
    """``exc`` as the one-line error the user reads: ``path: cannot write: the disk is full``.
    ``path`` is the file the user named (the system may name a temporary one, or none)."""
    plain = _PLAIN.get(exc.errno or 0) or exc.strerror or str(exc) or type(exc).__name__
    where = path if path is not None else exc.filename
    return ForensicsError(f"{doing + ': ' if doing else ''}{plain}", path=where)


_ERRNO = re.compile(r'"errno"\s*:\s*"?(\d+)')


def copy_error(exc: Exception, path: str | Path, doing: str = "cannot write") -> ForensicsError:
    """A DuckDB ``COPY ... TO`` the disk refused (its message carries the system's errno), as
    :func:`os_error` says it; another database error in its own first line."""
    found = _ERRNO.search(str(exc))
    if found is not None:
        code = int(found.group(1))
        return os_error(OSError(code, os.strerror(code)), path, doing)
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ForensicsError(f"{doing}: {first}", path=path)


@contextmanager
def atomic_file(out: Path) -> Iterator[Path]:
    """A temporary path beside ``out`` to write: it becomes ``out`` when the block ends
    cleanly, and is removed when it does not (an error, Ctrl-C), so a reader never finds a
    half-written file and nothing is left behind. An ``OSError`` is said as
    ``out: cannot write: <why>``."""
    tmp = out.with_name(out.name + ".partial")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        tmp.replace(out)
    except OSError as exc:
        _remove(tmp)
        raise os_error(exc, out, "cannot write") from exc
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp: Path) -> None:
    # A folder we cannot write into holds no temporary file of ours to remove.
    with suppress(OSError):
        tmp.unlink(missing_ok=True)
