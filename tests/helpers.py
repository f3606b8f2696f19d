"""Helpers the tests share: sample files written exactly as a test needs them, rows for the
canonical tables, and a command run in its own process. (Fixtures are in ``conftest.py``.)"""

from __future__ import annotations

import csv
import ctypes
import fcntl
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import Store
from analyzer.formats.bills.openrouter_csv import KNOWN_COLUMNS
from analyzer.load.flow import FileReport

if TYPE_CHECKING:
    from tests.corpus import Case

REPO = Path(__file__).resolve().parent.parent
SAMPLE_DATA = REPO / "sample_data"
SHARED_SAMPLES = REPO.parent / "shared" / "samples"
SHARED_TOOLS = REPO.parent / "shared" / "tools"
DOCS = REPO / "docs"


def doc_text(page: str) -> str:
    """The text of a page of the reference, ``docs/<page>`` (``"guards.md"``)."""
    return (DOCS / page).read_text(encoding="utf-8")


def shared_samples() -> Path:
    """../shared/samples, the real public transcripts. Under CI their absence is a failure,
    not a skip: the tests that read them must run there."""
    if not SHARED_SAMPLES.is_dir():
        if os.environ.get("CI"):
            pytest.fail(
                f"{SHARED_SAMPLES} is missing: CI must run with ../shared beside the checkout"
            )
        pytest.skip("../shared/samples is not beside this checkout")
    return SHARED_SAMPLES


def shared_tool(name: str) -> Path:
    """``../shared/tools/<name>``, a scoring tool kept beside the samples (spans_check.py:
    bench/recall.py loads it at run time). As for ``shared_samples``: absent, a failure under
    CI, else a skip that names it."""
    path = SHARED_TOOLS / name
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing: CI must run with ../shared beside the checkout")
        pytest.skip(f"{path} is not beside this checkout")
    return path


def truth_at_collection(corpus: str) -> dict[str, Any]:
    """The ``files`` of ``../shared/samples/<corpus>/truth.json``, to parametrize tests by when
    they are collected; {} where ../shared is not beside the checkout (the tests that read the
    corpus then skip, or under CI fail, through ``shared_samples``)."""
    path = SHARED_SAMPLES / corpus / "truth.json"
    if not path.is_file():
        return {}
    files: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["files"]
    return files


@dataclass
class SampleStores:
    """The stores of ``sample_data/`` a run shares (``conftest.sample_stores``), each built the
    first time a test asks for it, under ``root``; a test gets its own copy (a file copy:
    milliseconds, not an ingest or an audit), so that no test sees another's writes. The
    processes of one run (pytest-xdist's workers) may share ``root``: a store is built by one of
    them, under a lock, and moved into place whole; the others wait for it and copy it."""

    root: Path
    built: dict[str, Path] = field(default_factory=dict)

    def ingested(self, to: Path) -> Path:
        """At ``to``, what ``ingest --db`` of the sample leaves."""
        return self._copy(["ingest"], to)

    def audited(self, to: Path) -> Path:
        """At ``to``, what ``audit --db -q`` of the sample leaves: ingested, detected, the
        guards replayed and kept."""
        return self._copy(["audit", "-q"], to)

    def _copy(self, command: list[str], to: Path) -> Path:
        name = command[0]
        if name not in self.built:
            self.built[name] = self._build(command)
        shutil.copyfile(self.built[name], to)
        return to

    def _build(self, command: list[str]) -> Path:
        """The store ``command`` leaves, built unless another process of the run built it."""
        db = self.root / f"{command[0]}.duckdb"
        with open(self.root / f"{command[0]}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if db.exists():
                return db
            building = self.root / f"{command[0]}.{os.getpid()}.duckdb"
            result = CliRunner().invoke(cli, [*command, "--db", str(building), str(SAMPLE_DATA)])
            assert result.exit_code == 0, result.output
            wal = building.with_name(building.name + ".wal")
            assert not wal.exists(), "the store was not closed"
            os.replace(building, db)
        return db


# The variables that move an agent's default place: cleared for a test with a fake home, so the
# machine's own settings never leak into it.
AGENT_HOME_VARIABLES = (
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "GEMINI_CLI_HOME",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "CLINE_DIR",
    "CLINE_DATA_DIR",
    "CLINE_SESSION_DATA_DIR",
    "LLM_FORENSICS_DB",
    "LLM_FORENSICS_ROOTS",
    "OPENHANDS_PERSISTENCE_DIR",
    "OPENHANDS_CONVERSATIONS_DIR",
)


def env_of(home: Path, **extra: str | None) -> dict[str, str | None]:
    """The environment of a run with ``home`` as the home folder and no agent variable set."""
    env: dict[str, str | None] = {"HOME": str(home)}
    env.update(dict.fromkeys(AGENT_HOME_VARIABLES))
    env.update(extra)
    return env


def q(store: Store, sql: str, params: list[object] | None = None) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` over the store."""
    return store.con.execute(sql, params or []).fetchall()


def counts(r: FileReport) -> tuple[int, int, int, int, int]:
    """A file's accounting: read, loaded, rejected, duplicate, skipped."""
    return (r.rows_read, r.rows_loaded, r.rows_rejected, r.rows_duplicate, r.rows_skipped)


def assert_accounted(store: Store) -> None:
    """Every file in the store keeps ``rows_read = loaded + rejected + duplicate + skipped``."""
    for read, loaded, rejected, dup, skipped in q(
        store,
        "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate, rows_skipped FROM sources",
    ):
        assert read == loaded + rejected + dup + skipped


HEADER = list(KNOWN_COLUMNS)
T0 = datetime(2025, 12, 13, 6, 0, 0)


def or_row(i: int, **overrides: object) -> dict[str, object]:
    """A valid export row; ``i`` makes its id and time unique (one call every 10 s)."""
    row: dict[str, object] = {
        "generation_id": f"gen-{1765605600 + i}-row{i:05d}",
        "created_at": (T0 + timedelta(seconds=10 * i)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
        "cost_total": "0.0123",
        "cost_web_search": "0",
        "cost_cache": "0",
        "cost_file_processing": "0",
        "byok_usage_inference": "0",
        "tokens_prompt": str(1000 + 10 * i),
        "tokens_completion": "120",
        "tokens_reasoning": "0",
        "tokens_cached": "0",
        "model_permaslug": "anthropic/claude-sonnet-4.5",
        "provider_name": "Anthropic",
        "variant": "standard",
        "cancelled": "false",
        "streamed": "true",
        "user": "u1",
        "finish_reason_raw": "end_turn",
        "finish_reason_normalized": "stop",
        "generation_time_ms": "2100",
        "time_to_first_token_ms": "800",
        "api_key_disabled": "false",
        "api_key_name": "key-a",
        "app_name": "App A",
    }
    row.update(overrides)
    return row


def csv_text(
    rows: list[dict[str, object]], columns: list[str] | None = None, newline: str = "\n"
) -> str:
    columns = columns or HEADER
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator=newline)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([row.get(c, "") for c in columns])
    return buf.getvalue()


def write_csv(
    path: Path,
    rows: list[dict[str, object]],
    columns: list[str] | None = None,
    newline: str = "\n",
    bom: bool = False,
    gz: bool = False,
) -> Path:
    data = csv_text(rows, columns, newline).encode("utf-8")
    if bom:
        data = b"\xef\xbb\xbf" + data
    if gz:
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return path


def csv_total(path: Path) -> Decimal:
    """The sum of an export's cost_total column, exactly."""
    with open(path, newline="", encoding="utf-8") as fh:
        return sum((Decimal(r["cost_total"]) for r in csv.DictReader(fh)), Decimal(0))


# -- rows of the canonical tables (the golden cases' "given") --------------------------------


def fill_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seqs: dict[str, int] = {}
    out = []
    for i, given in enumerate(calls, 1):
        row = dict(given)
        row.setdefault("call_id", f"c{i}")
        row.setdefault("stream_key", "s")
        row.setdefault("session_id", row["stream_key"])
        seqs[row["stream_key"]] = seqs.get(row["stream_key"], 0) + 1
        row.setdefault("seq", seqs[row["stream_key"]])
        t = row.pop("t", 10 * (i - 1))
        row.setdefault("ts", (T0 + timedelta(seconds=t)).isoformat(sep=" "))
        row.setdefault("format", "test")
        row.setdefault("source_id", 1)
        row.setdefault("output_final", True)
        out.append(row)
    return out


def fill_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, given in enumerate(messages, 1):
        row = dict(given)
        row.setdefault("source_id", 1)
        row.setdefault("session_id", "s")
        row.setdefault("idx", i)
        out.append(row)
    return out


def fill_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of a golden case: ``session_id`` given, ``stream_key`` "s", ``seq`` by position."""
    out = []
    for i, given in enumerate(runs, 1):
        row = dict(given)
        row.setdefault("source_id", 1)
        row.setdefault("stream_key", "s")
        row.setdefault("seq", i)
        out.append(row)
    return out


def insert(store: Store, table: str, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        cols = ", ".join(row)
        marks = ", ".join("?" * len(row))
        store.con.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", list(row.values()))


# -- guard cases: calls by pattern, incidents by their waste -----------------------------------

KINDS = {"T": "tool_call", "S": "thinking_only", "E": "empty", "W": "whitespace", "X": "text"}


def expand_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in calls:
        if "pattern" not in c:
            out.append(c)
            continue
        extra = {k: v for k, v in c.items() if k not in ("pattern", "times")}
        for _ in range(int(c.get("times", 1))):
            for letter in c["pattern"].split():
                out.append({"response_kind": KINDS[letter], **extra})
    return out


def load_guard_case(store: Store, given: dict[str, Any]) -> list[dict[str, Any]]:
    """Calls (patterns expanded) and incidents of a guard case (tests/test_guard_cases.py)."""
    rows = fill_calls(expand_calls(given["calls"]))
    insert(store, "calls", rows)
    order = [r["call_id"] for r in rows]
    for inc in given.get("incidents", []):
        waste = inc["waste"]
        span = order[order.index(inc["first_call_id"]) : order.index(inc["last_call_id"]) + 1]
        if isinstance(waste, str):
            kinds = {r["call_id"]: r.get("response_kind") for r in rows}
            waste = [c for c in span if kinds[c] == waste]
        cost = sum(float(r.get("cost_usd") or 0) for r in rows if r["call_id"] in waste)
        first = next(r for r in rows if r["call_id"] == inc["first_call_id"])
        store.con.execute(
            """INSERT INTO incidents (incident_id, detector, severity, stream_key, session_id,
                   first_call_id, last_call_id, wasted_usd, n_calls)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [
                inc["incident_id"],
                inc["detector"],
                inc.get("severity", "high"),
                first["stream_key"],
                first["session_id"],
                inc["first_call_id"],
                inc["last_call_id"],
                cost,
                len(span),
            ],
        )
        store.con.executemany(
            "INSERT INTO incident_calls VALUES (?, ?)", [[inc["incident_id"], c] for c in waste]
        )
    return rows


# -- a command in its own process --------------------------------------------------------------

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2


def _as_an_ordinary_user() -> None:
    """In the child, before exec: give up root's power to read any file, so a file without
    read permission is unreadable here too (these machines run the tests as root)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run_ingest(root: Path, case: Case, as_json: bool = True) -> subprocess.CompletedProcess[str]:
    """``llm-forensics ingest`` of one case, in its own process, into its own store."""
    return subprocess.run(
        [sys.executable, "-m", "analyzer", "ingest", "--db", f"{case.name}.duckdb"]
        + (["--json"] if as_json else [])
        + [case.path],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_as_an_ordinary_user,
    )
