"""The store and the files this tool writes, when the world is not as expected (issue 33,
"Faults and interrupts"): another program's DuckDB file given as the store, a report written
onto a full disk, a read-only file system or a folder that cannot be entered, and a read-only
command on a store the user may be checksumming.

Each command runs in its own process, as a user runs it. These machines run the tests as root,
who may write anywhere: the runs that need a refusal give up that power first
(``tests.helpers._as_an_ordinary_user``)."""

from __future__ import annotations

import hashlib
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from tests.helpers import _as_an_ordinary_user, or_row, write_csv


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def llm_forensics(
    cwd: Path, *args: str, limit_file_size: int | None = None
) -> subprocess.CompletedProcess[str]:
    """The command in its own process, as an ordinary user; ``limit_file_size`` is ``ulimit
    -f`` in bytes (with SIGXFSZ ignored, so a write past it fails with EFBIG as a full disk
    fails with ENOSPC)."""

    def child() -> None:
        _as_an_ordinary_user()
        if limit_file_size is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_size, limit_file_size))

    return subprocess.run(
        [sys.executable, "-m", "analyzer", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=child,
    )


def one_plain_line(result: subprocess.CompletedProcess[str], *said: str) -> None:
    """Exit 3 and one line on stderr saying each of ``said``: no traceback, nothing
    "unexpected", no bug of ours."""
    assert result.returncode == 3, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and all(s in lines[0] for s in said), lines[0]
    for wrong in ("Traceback", "unexpected", "a bug in llm-forensics"):
        assert wrong not in result.stderr


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with a bill and its incident (a loop of 22 calls)."""
    root = tmp_path_factory.mktemp("store")
    bill = write_csv(
        root / "activity.csv",
        [or_row(i, tokens_prompt="56065", tokens_completion="3") for i in range(22)],
    )
    db = root / "s.duckdb"
    result = CliRunner().invoke(cli, ["audit", "--db", str(db), str(bill)])
    assert result.exit_code == 0, result.output
    return db


# -- another program's DuckDB file ---------------------------------------------------------


@pytest.mark.parametrize(
    "tables",
    [
        ["CREATE TABLE calls (a INTEGER)"],  # a table of one of our names: a binder error before
        ["CREATE TABLE orders (id INTEGER, total DECIMAL(9, 2))", "CREATE VIEW v AS SELECT 1"],
    ],
    ids=["a-calls-table", "other-tables"],
)
def test_another_programs_duckdb_file_is_refused_untouched(
    tmp_path: Path, tables: list[str]
) -> None:
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    for sql in tables:
        con.execute(sql)
    con.close()
    before = digest(other)
    bill = write_csv(tmp_path / "activity.csv", [or_row(i) for i in range(3)])
    for args in (
        ["ingest", "--db", "other.duckdb", str(bill)],
        ["audit", "--db", "other.duckdb", str(bill)],
        ["usage", "daily", "--db", "other.duckdb"],
    ):
        result = llm_forensics(tmp_path, *args)
        one_plain_line(result, "other.duckdb", "not an llm-forensics store")
    assert digest(other) == before
    con = duckdb.connect(str(other), read_only=True)
    names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    con.close()
    assert "meta" not in names and "sources" not in names


# -- a report the disk will not take -------------------------------------------------------


def no_leftovers(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".partial")]


def test_a_report_past_the_file_size_limit_is_one_line_and_leaves_nothing(
    store: Path, tmp_path: Path
) -> None:
    """``ulimit -f``: the write fails part-way, as on a full disk."""
    out = tmp_path / "out"
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    result = llm_forensics(
        tmp_path, "report", "--db", str(store), "-o", "out/x.html", limit_file_size=4096
    )
    one_plain_line(result, "out/x.html: cannot write: the file would be larger")
    assert not (out / "x.html").exists()
    no_leftovers(out)


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A real full file system (a tmpfs of 8 KiB, filled) and a read-only one."""
    full, ro = tmp_path / "full", tmp_path / "ro"
    full.mkdir()
    ro.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8k,mode=777", "tmpfs", str(full)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip()}); ulimit -f case runs")
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=8k", "tmpfs", str(ro)], check=True)
        try:
            (full / "filler").write_bytes(b"\0" * 4096)
            yield full, ro
        finally:
            subprocess.run(["umount", str(ro)], check=False)
    finally:
        subprocess.run(["umount", str(full)], check=False)


def test_a_report_onto_a_full_or_read_only_file_system(
    store: Path, tmp_path: Path, mounts: tuple[Path, Path]
) -> None:
    full, ro = mounts
    result = llm_forensics(tmp_path, "report", "--db", str(store), "-o", "full/x.html")
    one_plain_line(result, "full/x.html: cannot write: the disk is full")
    assert not (full / "x.html").exists()
    no_leftovers(full)
    result = llm_forensics(tmp_path, "export", "--db", str(store), "--parquet", "full/t")
    one_plain_line(result, "full/t: cannot write the export: the disk is full")
    assert not [p for p in full.rglob("*") if ".partial" in p.name]
    assert not (full / "t" / "manifest.json").exists()
    result = llm_forensics(tmp_path, "report", "--db", str(store), "-o", "ro/x.md")
    one_plain_line(result, "ro/x.md: cannot write: the file system is read-only")
    assert list(ro.iterdir()) == []


@pytest.mark.parametrize("mode", [0o555, 0o644], ids=["read-only-folder", "not-enterable"])
def test_a_report_into_a_folder_that_refuses_it(store: Path, tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(mode)
    try:
        for fmt in ("html", "parquet"):
            result = llm_forensics(tmp_path, "report", "--db", str(store), "-o", f"locked/x.{fmt}")
            one_plain_line(result, f"locked/x.{fmt}: cannot write: permission denied")
    finally:
        folder.chmod(0o755)
    assert list(folder.iterdir()) == []


# -- a read-only command on a store being checksummed ---------------------------------------


def test_no_keep_cache_leaves_the_store_byte_for_byte(store: Path, tmp_path: Path) -> None:
    before = digest(store)
    run = CliRunner()
    export = ["export", "--parquet", str(tmp_path / "t")]
    reads = [
        ["report", "-o", str(tmp_path / "x.md")],
        ["backtest"],
        ["usage", "daily"],
        ["incidents"],
        ["show", "1"],
        export,
    ]
    for args in reads:
        result = run.invoke(cli, [*args, "--db", str(store), "--no-keep-cache"])
        assert result.exit_code == 0, (args, result.output)
        assert digest(store) == before, args
    # by default a page is kept for the next run, as docs/commands.md says: the bytes change
    kept = run.invoke(cli, ["report", "-o", str(tmp_path / "y.md"), "--db", str(store)])
    assert kept.exit_code == 0, kept.output
    con = duckdb.connect(str(store), read_only=True)
    assert con.execute("SELECT count(*) FROM cache WHERE name = 'report'").fetchone() == (1,)
    con.close()
