"""A process killed (SIGKILL) in the middle of ingesting a large file leaves the store exactly
as it was before that file, and running the same ingest again completes it.

The child is the real CLI (``python -m analyzer ingest``) with its stderr on a pseudo-terminal,
so it shows its own progress ("<file>: reading 40%", "... storing", "... done in 9.1s"). That
display lives inside the file's transaction (``ingest_file``), so a stage name on it proves the
child is inside that transaction and "done in" proves it has left the load. The kills:

* early: the first progress line ("reading"): the file is being read into temporary tables;
* midway, under a 100 MB memory limit: "de-duplicating", once DuckDB has spilled 16 MB to its
  temporary folder beside the store (``<store>.tmp``; the kill leaves those files behind);
* late: the "storing" stage, once the store file itself has grown by several MB. DuckDB writes
  the rows of a large uncommitted INSERT straight into the store file ("optimistic writes"),
  before any commit record reaches the WAL: the store file holds megabytes of data that no
  committed state refers to. After the kill the test checks the file is still that much bigger
  (the writes were really there) and the WAL is exactly as long as when the transaction began
  (no commit had started).

Each time the store must open (from another process: DuckDB's lock died with the child) and hold
exactly what it held before: every table's rows, the catalog, the sequence that numbers sources.
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
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import OFFLINE
from analyzer.load.flow import PROGRESS_MIN_BYTES
from tests.helpers import or_row, write_csv

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL and a pty")

ROWS = 300_000  # ~56 MB: over the progress threshold, and ~10 s to load on 2 cores
GROWN = 4 << 20  # store-file growth that shows optimistic writes are under way
SPILLED = 16 << 20  # spill-file bytes that show the child is past the memory limit
WAIT_S = 120  # the most to wait for a kill point (a loaded machine is slow, never this slow)


def write_big_export(path: Path, rows: int) -> Path:
    """An OpenRouter export of ``rows`` valid, distinct generations (written by DuckDB: fast).
    Ids end in ``-big<n>``, so none is in the sample data."""
    with duckdb.connect(config=OFFLINE) as con:
        con.execute(
            f"""COPY (
                SELECT
                    'gen-' || (1764547200 + i * 8) || '-big' || lpad(i::VARCHAR, 9, '0')
                        AS generation_id,
                    strftime(TIMESTAMP '2025-12-01' + to_milliseconds(i * 8000 + h % 7000),
                             '%Y-%m-%d %H:%M:%S.%g') AS created_at,
                    round((h % 5000) / 1e6, 8) AS cost_total,
                    0 AS cost_web_search, 0 AS cost_cache, 0 AS cost_file_processing,
                    0 AS byok_usage_inference,
                    1000 + h % 30000 AS tokens_prompt, 50 + h % 900 AS tokens_completion,
                    h % 50 AS tokens_reasoning, (h % 3) * 1024 AS tokens_cached,
                    ['openai/gpt-5-mini', 'anthropic/claude-sonnet-4.5',
                     'google/gemini-2.5-flash'][1 + h % 3] AS model_permaslug,
                    ['Azure', 'Anthropic', 'Google'][1 + h % 3] AS provider_name,
                    'standard' AS variant, false AS cancelled, true AS streamed,
                    'cust-' || lpad((h % 3000)::VARCHAR, 5, '0') AS "user",
                    'stop' AS finish_reason_raw, 'stop' AS finish_reason_normalized,
                    500 + h % 9000 AS generation_time_ms, 100 + h % 2000 AS time_to_first_token_ms,
                    false AS api_key_disabled, 'key-' || (h % 7) AS api_key_name,
                    'App ' || (h % 5) AS app_name
                FROM (SELECT i, (hash(i) % 1000000007)::BIGINT AS h FROM range({rows}) r(i))
            ) TO '{path}' (HEADER, DELIMITER ',')"""
        ).fetchall()
    return path


def snapshot(db: Path) -> dict[str, object]:
    """The store's whole logical content, order-independent: the catalog (tables, views,
    indexes, sequences with their current value) and every table's rows, sorted. Opened
    read-only by this process (so it also proves no other process holds the store's lock)."""
    con = duckdb.connect(str(db), read_only=True, config=OFFLINE)
    try:
        q = con.execute
        shot: dict[str, object] = {
            "tables": q(
                "SELECT schema_name, table_name, sql FROM duckdb_tables() "
                "WHERE NOT temporary ORDER BY ALL"
            ).fetchall(),
            "views": q(
                "SELECT schema_name, view_name, sql FROM duckdb_views() "
                "WHERE NOT internal AND NOT temporary ORDER BY ALL"
            ).fetchall(),
            "indexes": q(
                "SELECT schema_name, table_name, index_name, sql FROM duckdb_indexes() ORDER BY ALL"
            ).fetchall(),
            "sequences": q(
                "SELECT schema_name, sequence_name, start_value, last_value, sql "
                "FROM duckdb_sequences() WHERE NOT temporary ORDER BY ALL"
            ).fetchall(),
        }
        for schema, table, _sql in shot["tables"]:  # type: ignore[union-attr]
            shot[f"rows:{schema}.{table}"] = q(
                f'SELECT * FROM "{schema}"."{table}" ORDER BY ALL'
            ).fetchall()
        return shot
    finally:
        con.close()


def assert_same(after: dict[str, object], before: dict[str, object], when: str) -> None:
    assert after.keys() == before.keys(), f"{when}: tables differ"
    for name in before:
        if after[name] != before[name]:
            a, b = after[name], before[name]
            sizes = f"{len(a)} rows, was {len(b)}" if isinstance(a, list) else ""  # type: ignore[arg-type]
            pytest.fail(f"{when}: {name} is not as it was before the file ({sizes})")


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def spilled(folder: Path) -> int:
    """Bytes in DuckDB's temporary (spill) folder."""
    try:
        return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    except FileNotFoundError:  # not there (yet), or a file removed while we looked
        return 0


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_FORENSICS_")}
    env.update(extra)
    return env


def cli_args(db: Path, *paths: Path) -> list[str]:
    return [sys.executable, "-m", "analyzer", "ingest", "--db", str(db), "--json"] + [
        str(p) for p in paths
    ]


@dataclass
class Child:
    """The CLI ingesting, its stderr on a pseudo-terminal (so it shows progress), read here."""

    proc: subprocess.Popen[bytes]
    master: int
    label: str  # how the child names the file in its progress
    stderr: str = ""

    @classmethod
    def start(cls, args: list[str], cwd: Path, label: str, env: dict[str, str]) -> Child:
        master, slave = pty.openpty()
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=slave,
                cwd=cwd,
                env=env,
            )
        finally:
            os.close(slave)
        return cls(proc, master, label)

    def pump(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child's side is closed
            return
        self.stderr += data.decode("utf-8", "replace")

    @property
    def stage(self) -> str | None:
        """The last stage the progress display showed, or None before the first."""
        for line in reversed(self.stderr.replace("\r", "\n").splitlines()):
            if line.startswith(f"{self.label}: "):
                return line.removeprefix(f"{self.label}: ").strip()
        return None

    def kill_when(self, ready: Callable[[Child], bool], what: str) -> None:
        """SIGKILL the child once ``ready`` holds; fail if it ends or finishes the load first."""
        deadline = time.monotonic() + WAIT_S
        while True:
            self.pump(0.01)
            if "done in" in self.stderr:
                pytest.fail(f"the load finished before {what}: make the file bigger\n{self.stderr}")
            if self.proc.poll() is not None:
                pytest.fail(
                    f"the child exited ({self.proc.returncode}) before {what}\n{self.stderr}"
                )
            if ready(self):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {WAIT_S} s\n{self.stderr}")
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        while True:  # whatever it wrote before dying
            before = len(self.stderr)
            self.pump(0.05)
            if len(self.stderr) == before:
                break
        assert self.proc.returncode == -signal.SIGKILL, (self.proc.returncode, self.stderr)
        assert "done in" not in self.stderr, f"killed after the load ended\n{self.stderr}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        os.close(self.master)


def kill_mid_ingest(
    db: Path,
    big: Path,
    tmp_path: Path,
    ready: Callable[[Child], bool],
    what: str,
    env: dict[str, str] | None = None,
) -> tuple[int, int]:
    """Start ingesting ``big`` and SIGKILL the child when ``ready``; return the WAL's size when
    the transaction was under way and the store file's size at the kill."""
    child = Child.start(cli_args(db, big), tmp_path, str(big), env or child_env())
    wal = db.with_name(db.name + ".wal")
    wal_in_tx: list[int] = []

    def ready_and_note(c: Child) -> bool:
        if c.stage is not None and not wal_in_tx:
            wal_in_tx.append(size(wal))  # inside the transaction: nothing of it is in the WAL
        return ready(c)

    try:
        child.kill_when(ready_and_note, what)
    finally:
        child.close()
    assert wal_in_tx, child.stderr
    # No commit began: the WAL holds nothing the transaction wrote.
    assert size(wal) == wal_in_tx[0], f"{what}: the WAL grew during the transaction"
    return wal_in_tx[0], size(db)


@pytest.fixture(scope="module")
def big_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    big = write_big_export(tmp_path_factory.mktemp("big") / "openrouter_big.csv", ROWS)
    assert size(big) >= PROGRESS_MIN_BYTES  # so the child shows its progress (our signal)
    return big


# SIGKILL at three moments of a 300,000-row ingest: CI runs it; the default run interrupts ingests
# at the batch's commit in test_interrupts
@pytest.mark.slow
def test_sigkill_mid_ingest_leaves_the_store_as_it_was(
    runner: CliRunner, tmp_path: Path, big_export: Path, sample_db: Path
) -> None:
    db = sample_db
    # A store with something in every table: the sample data audited (calls, messages,
    # sources, incidents, cache, meta) and a file with a rejected row.
    bad = write_csv(tmp_path / "with_reject.csv", [or_row(1), or_row(2, tokens_prompt="lots")])
    result = runner.invoke(cli, ["ingest", "--db", str(db), str(bad)])
    assert result.exit_code == 0, result.output
    before = snapshot(db)
    assert all(
        before[f"rows:main.{t}"]
        for t in (
            "calls",
            "messages",
            "sources",
            "rejects",
            "meta",
            "cache",
            "incidents",
            "incident_calls",
        )
    )

    big = big_export
    base = size(db)

    # Early: the file is being read (into temporary tables) inside its transaction.
    kill_mid_ingest(db, big, tmp_path, lambda c: c.stage is not None, "the reading stage")
    assert_same(snapshot(db), before, "killed while reading")

    # Midway, with a small memory limit: the child is de-duplicating and has spilled to
    # DuckDB's temporary folder beside the store (the kill leaves those files behind).
    spill = db.with_name(db.name + ".tmp")
    kill_mid_ingest(
        db,
        big,
        tmp_path,
        lambda c: (c.stage or "").startswith("de-duplicating") and spilled(spill) >= SPILLED,
        "spilling to the temporary folder",
        env=child_env(LLM_FORENSICS_MEMORY_LIMIT="100MB"),
    )
    assert spilled(spill) >= SPILLED
    assert_same(snapshot(db), before, "killed while spilling")

    # Late: rows are being stored, and DuckDB has already written them into the store file.
    _, grown = kill_mid_ingest(
        db,
        big,
        tmp_path,
        lambda c: (c.stage or "").startswith("storing") and size(db) >= base + GROWN,
        "optimistic writes to the store file",
    )
    assert grown >= base + GROWN  # the uncommitted rows were on disk when the child died
    assert_same(snapshot(db), before, "killed while storing")

    # The same ingest again, to the end (another process: the dead child's lock is gone).
    done = subprocess.run(
        cli_args(db, big),
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (report,) = json.loads(done.stdout)
    assert report["status"] == "loaded", report
    assert (report["rows_read"], report["rows_loaded"]) == (ROWS, ROWS), report
    assert report["rows_rejected"] == report["rows_duplicate"] == report["rows_skipped"] == 0
    with duckdb.connect(str(db), read_only=True, config=OFFLINE) as con:
        count = {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]
            for t in ("sources", "calls", "rejects")
        }
        ((source_id, rows_loaded),) = con.execute(
            "SELECT source_id, rows_loaded FROM sources WHERE path = ?", [big.name]
        ).fetchall()
        assert rows_loaded == ROWS
        # The killed runs took no source number: the sequence went on from where it was.
        assert source_id == max(s[0] for s in before["rows:main.sources"]) + 1  # type: ignore[union-attr]
        assert con.execute(
            "SELECT count(*) FROM calls WHERE source_id = ?", [source_id]
        ).fetchall() == [(ROWS,)]
    assert count == {
        "sources": len(before["rows:main.sources"]) + 1,  # type: ignore[arg-type]
        "calls": len(before["rows:main.calls"]) + ROWS,  # type: ignore[arg-type]
        "rejects": len(before["rows:main.rejects"]),  # type: ignore[arg-type]
    }

    # And a third time: nothing to do.
    again = subprocess.run(
        cli_args(db, big),
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    (report,) = json.loads(again.stdout)
    assert (report["status"], report["source_id"]) == ("unchanged", source_id), report


# a 300,000-row export loading in a child while three others try the store: CI runs it; the
# default run has test_cli::test_database_in_use_by_another_process (the same one line, exit 3)
@pytest.mark.slow
def test_a_second_process_is_told_the_store_is_in_use(tmp_path: Path, big_export: Path) -> None:
    """While one llm-forensics process is writing (inside its load of a large file), another
    that opens the same store, to write or to read, gets one line and exit 3 - and the first
    finishes its load unharmed."""
    db = tmp_path / "busy.duckdb"
    small = write_csv(tmp_path / "small.csv", [or_row(1), or_row(2)])
    # Under a small memory limit the load spills to disk: slower, so it is surely still under
    # way while the other processes try the store.
    env = child_env(LLM_FORENSICS_MEMORY_LIMIT="100MB")
    writer = Child.start(cli_args(db, big_export), tmp_path, str(big_export), env)
    try:
        deadline = time.monotonic() + WAIT_S
        while writer.stage is None:  # the first progress line: inside the file's transaction
            writer.pump(0.05)
            assert writer.proc.poll() is None, writer.stderr
            assert time.monotonic() < deadline, f"no progress within {WAIT_S} s"
        expected = re.compile(
            rf"Error: {re.escape(db.name)}: the database is in use by another process "
            r"\(PID \d+\): run again when it has finished"
        )
        for args in (
            ["ingest", "--db", db.name, small.name],  # another writer
            ["report", "--db", db.name, "-o", "r.html"],  # a reader
            ["audit", "--db", db.name, small.name],
        ):
            second = subprocess.run(
                [sys.executable, "-m", "analyzer", *args],
                cwd=tmp_path,
                env=child_env(),
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert second.returncode == 3, (args, second.stderr)
            assert expected.fullmatch(second.stderr.strip()), (args, second.stderr)
            assert second.stdout == ""
            writer.pump(0.01)
            assert "done in" not in writer.stderr, "the first load ended: make the file bigger"
        assert writer.proc.stdout is not None
        out, _ = writer.proc.communicate(timeout=300)
        assert writer.proc.returncode == 0, writer.stderr
        (report,) = json.loads(out)
        assert (report["status"], report["rows_loaded"]) == ("loaded", ROWS), report
    finally:
        writer.close()
