"""The default store (issue 35): a new user's first command is `usage daily`, with no store made
by hand; the store lives in the data folder, is refreshed from the agents' default places before
a command given no input (new and grown files read, unchanged ones not), keeps the calls of
files the agents deleted, holds several machines' histories without counting a file twice, and
a store another process holds, a newer or damaged store, Ctrl-C and a full disk each end in one
clear line with nothing lost. Run as a user runs it: the CLI, with a fake home."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner, Result

from analyzer.api import home as home_store
from analyzer.cli.main import cli
from analyzer.engine.default_store import this_machine
from analyzer.engine.store import OFFLINE
from analyzer.load import flow
from tests.helpers import SAMPLE_DATA, env_of, shared_samples
from tests.test_own_data import CC_SAMPLE, fake_home

OTHER_CC = "oneryalcin__fasthooks__sample_main_transcript.jsonl"


def store_of(home: Path) -> Path:
    return home / ".local" / "share" / "llm-forensics" / "forensics.duckdb"


def run(runner: CliRunner, home: Path, *args: str, **env: str | None) -> Result:
    return runner.invoke(cli, list(args), env=env_of(home, **env), catch_exceptions=False)


def daily(runner: CliRunner, home: Path, *args: str) -> dict[str, Any]:
    result = run(runner, home, "usage", "daily", "--json", *args)
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    data["stderr"] = result.stderr
    return data


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return fake_home(tmp_path)


def test_usage_daily_is_the_first_and_only_command(runner: CliRunner, home: Path) -> None:
    result = run(runner, home, "usage", "daily")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        "refresh: read 2 new files (0 unchanged) from ~/.claude/projects, ~/.codex/sessions, "
        # (usage first: analyzer.load.usage_first; tests/test_usage_first.py)
        "154 records loaded (usage first: 40 lines left for a command that needs their content)"
    )
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["date", "calls", "models", "input"]
    assert lines[-len(lines) + 1].startswith("2025-")
    total = next(line for line in lines if line.startswith("Total"))
    assert total.split()[1] == "65"  # 30 Claude Code calls and 35 Codex calls
    assert store_of(home).exists()
    # (kept beside it: the copy a reader uses while another process writes the store)
    assert store_of(home).with_name("forensics.duckdb.last").exists()


def test_a_second_run_reads_no_file(
    runner: CliRunner, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = daily(runner, home)

    def no_reading(*args: object) -> None:
        raise AssertionError(f"a file was read: {args}")

    monkeypatch.setattr(flow, "read_head", no_reading)
    monkeypatch.setattr(flow, "fingerprint", no_reading)
    again = daily(runner, home)
    assert again["stderr"].splitlines()[0] == (
        "refresh: nothing new in 2 files from ~/.claude/projects, ~/.codex/sessions"
    )
    assert again["totals"] == first["totals"]


def test_no_refresh_shows_the_store_as_it_is(runner: CliRunner, home: Path) -> None:
    first = daily(runner, home)
    project = home / ".claude" / "projects" / "-home-me-app"
    (project / "a-new-session.jsonl").write_bytes((shared_samples() / OTHER_CC).read_bytes())
    kept = daily(runner, home, "--no-refresh")
    assert "refresh" not in kept["stderr"]
    assert kept["totals"]["calls"] == first["totals"]["calls"]
    fresh = daily(runner, home)
    assert fresh["stderr"].startswith("refresh: read 1 new file (2 unchanged)")
    assert fresh["totals"]["calls"] > first["totals"]["calls"]


def test_a_grown_file_is_read_again_and_counted_once(runner: CliRunner, home: Path) -> None:
    first = daily(runner, home)
    [transcript] = (home / ".claude" / "projects").rglob("*.jsonl")
    lines = transcript.read_bytes().splitlines(keepends=True)
    transcript.write_bytes(b"".join(lines[: len(lines) // 2]))  # as it was, half written
    store_of(home).unlink()
    half = daily(runner, home)
    transcript.write_bytes(b"".join(lines))  # the agent wrote the rest
    grown = daily(runner, home)
    assert grown["stderr"].startswith("refresh: read 1 grown (1 unchanged)")
    assert half["totals"]["calls"] < grown["totals"]["calls"] == first["totals"]["calls"]
    assert grown["totals"]["usd"] == first["totals"]["usd"]


def test_a_file_deleted_from_the_home_still_counts(runner: CliRunner, home: Path) -> None:
    first = daily(runner, home)
    for rollout in (home / ".codex").rglob("*.jsonl"):
        rollout.unlink()  # as an agent deletes its old logs
    after = daily(runner, home)
    assert after["totals"]["calls"] == first["totals"]["calls"] == 65
    assert after["totals"]["usd"] == first["totals"]["usd"]
    assert after["totals"]["calls_from_deleted_files"] == 35
    gone = [r for r in after["daily"] if r["calls_from_deleted_files"]]
    assert gone and all(r["models"] == ["gpt-5-codex"] for r in gone)
    text = run(runner, home, "usage", "daily").stdout
    assert "from files no longer on disk: 35 calls, in 2025-09-25 (35)" in text


def test_two_machines_one_history(runner: CliRunner, home: Path, tmp_path: Path) -> None:
    first = daily(runner, home)
    # A copy of another laptop's agent folder: another session, and one the two share.
    other = tmp_path / "laptop2" / ".claude" / "projects" / "-home-me-app"
    other.mkdir(parents=True)
    (other / "s3.jsonl").write_bytes((shared_samples() / OTHER_CC).read_bytes())
    (other / "same.jsonl").write_bytes((shared_samples() / CC_SAMPLE).read_bytes())
    loaded = run(runner, home, "ingest", "--machine", "laptop2", str(tmp_path / "laptop2"))
    assert loaded.exit_code == 0, loaded.output
    both = daily(runner, home)
    mine, theirs = this_machine(), "laptop2"
    assert both["totals"]["machines"] == sorted([mine, theirs])
    extra = both["totals"]["calls"] - first["totals"]["calls"]
    only_other = daily(runner, home)  # (the same again: nothing read twice)
    assert only_other["totals"] == both["totals"]
    by_machine: dict[str, int] = {}
    for row in both["daily"]:
        for part in row["breakdown"]:
            by_machine[part["key"]] = by_machine.get(part["key"], 0) + part["calls"]
    assert by_machine == {mine: first["totals"]["calls"], theirs: extra}
    # The transcript both machines hold is counted once, under the machine read first.
    with duckdb.connect(str(store_of(home)), read_only=True, config=OFFLINE) as con:
        calls = con.execute("SELECT count(*), count(DISTINCT call_id) FROM calls").fetchone()
    assert calls is not None and calls[0] == calls[1] == both["totals"]["calls"]
    text = run(runner, home, "usage", "monthly").stdout
    assert f"  └ {theirs}" in text and f"  └ {mine}" in text
    incidents = run(runner, home, "incidents", "--json")
    assert incidents.exit_code == 0, incidents.output
    assert all(i["machine"] in (mine, theirs) for i in json.loads(incidents.stdout))


def test_views_work_as_first_commands(runner: CliRunner, home: Path, tmp_path: Path) -> None:
    listed = run(runner, home, "incidents")
    assert listed.exit_code == 0, listed.output
    assert listed.stderr.startswith("refresh: read 2 new files")
    assert run(runner, home, "backtest", "--recommend").exit_code == 0
    page = tmp_path / "x.html"
    assert run(runner, home, "report", "-o", str(page)).exit_code == 0 and page.exists()


def test_audit_of_a_file_keeps_its_throwaway_store(runner: CliRunner, home: Path) -> None:
    transcript = next((home / ".claude").rglob("*.jsonl"))
    result = run(runner, home, "audit", str(transcript))
    assert result.exit_code == 0, result.output
    assert not store_of(home).exists()


def test_no_store_and_no_agent_logs_is_no_usage_data(runner: CliRunner, tmp_path: Path) -> None:
    """A new machine (no agent logs anywhere, no store): a view says in one line that it
    found no usage data and where it looked, and exits 0 (as ccusage does); as JSON or CSV,
    the view's own empty document (the line on stderr). A command that must write the store
    (``detect``), or one that writes a file of it (``report``), still says it cannot, exit 3.
    Nothing is written. (Until issue 50 a view exited 3 here.)"""
    empty = tmp_path / "empty-home"
    empty.mkdir()
    result = run(runner, empty, "usage", "daily")
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    assert line.startswith("No usage data found: no agent logs in their default places (")
    assert "~/.claude/projects, " in line and "~/.codex/sessions, " in line
    assert line.endswith(
        f"not there), and no store yet at ~/{store_of(empty).relative_to(empty)}; for logs "
        "kept elsewhere: "
        "`llm-forensics ingest PATH`"
    )
    assert result.stderr == ""
    for args in (["incidents"], ["backtest"], ["usage", "session"], ["rejects"], ["audit"]):
        said = run(runner, empty, *args)
        assert said.exit_code == 0 and said.stdout.splitlines() == [line], args
    as_json = run(runner, empty, "usage", "daily", "--json")
    assert as_json.exit_code == 0 and as_json.stderr.splitlines() == [line]
    document = json.loads(as_json.stdout)
    assert document["daily"] == [] and document["totals"]["calls"] == 0
    listed = run(runner, empty, "incidents", "--json")
    assert listed.exit_code == 0 and json.loads(listed.stdout) == []
    audited = run(runner, empty, "audit", "--json")
    assert audited.exit_code == 0 and audited.stderr.splitlines() == [line]
    summary = json.loads(audited.stdout)
    assert summary["calls"] == 0 and summary["incidents"] == [] and summary["total_usd"] == 0
    as_csv = run(runner, empty, "usage", "monthly", "--csv")
    assert as_csv.exit_code == 0 and as_csv.stdout.splitlines()[-1].startswith("Total,")
    for must_write in (["detect"], ["report", "-o", str(tmp_path / "r.html")]):
        refused = run(runner, empty, *must_write)
        assert refused.exit_code == 3, must_write
        [error] = refused.stderr.splitlines()
        assert "no store yet, and no agent logs in their default places" in error
        assert "llm-forensics ingest PATH" in error
    assert not store_of(empty).exists() and not (tmp_path / "r.html").exists()


def test_the_store_lives_where_the_variables_say(runner: CliRunner, home: Path) -> None:
    named = home / "elsewhere" / "team.duckdb"
    named.parent.mkdir()
    assert run(runner, home, "usage", "daily", LLM_FORENSICS_DB=str(named)).exit_code == 0
    assert named.exists() and not store_of(home).exists()
    xdg = home / "xdg"
    assert run(runner, home, "usage", "daily", XDG_DATA_HOME=str(xdg)).exit_code == 0
    assert (xdg / "llm-forensics" / "forensics.duckdb").exists()


@pytest.fixture
def held(home: Path, runner: CliRunner) -> Iterator[Path]:
    """The default store, made by a first run, then held open for writing by another process
    (as a refresh of another command holds it)."""
    assert daily(runner, home)["totals"]["calls"] == 65
    store = store_of(home)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); "
            "print('held', flush=True); time.sleep(60)",
            str(store),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield store
    finally:
        holder.kill()
        holder.wait()


def test_a_store_being_written_is_read_from_its_last_refresh(
    runner: CliRunner, home: Path, held: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(home_store, "READER_WAIT", 0.3)
    result = run(runner, home, "usage", "daily", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["calls"] == 65
    said = result.stderr.splitlines()
    assert said[0].startswith("refresh skipped: ~/.local/share/llm-forensics/forensics.duckdb ")
    assert "in use by another process (PID " in said[0]
    assert "showing its copy of the last refresh" in said[1]


def test_a_second_writer_waits_then_says_why_not(
    runner: CliRunner, home: Path, held: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(home_store, "WRITER_WAIT", 0.6)
    started = time.monotonic()
    result = run(runner, home, "ingest")
    assert time.monotonic() - started >= 0.6
    assert result.exit_code == 3
    assert "waiting for another process (PID " in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("Error: ") and "is in use by another process (PID " in last
    assert "run again when it has finished" in last


@pytest.mark.parametrize("damage", ["newer", "damaged"])
def test_a_newer_or_damaged_store_is_left_untouched(
    runner: CliRunner, home: Path, damage: str
) -> None:
    daily(runner, home)
    store = store_of(home)
    if damage == "newer":
        with duckdb.connect(str(store), config=OFFLINE) as con:
            con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    else:
        store.write_bytes(b"not a database, whatever it was " * 200)
    before = sha(store)
    result = run(runner, home, "usage", "daily")
    assert result.exit_code == 3
    [line] = result.stderr.splitlines()
    assert line.startswith(f"Error: {store}: ")
    if damage == "newer":
        assert "a newer version of llm-forensics" in line and "upgrade llm-forensics" in line
    else:
        assert "not a usable llm-forensics database" in line and "move it away" in line
    assert "left untouched" in line
    assert sha(store) == before


def _third_file_fails(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """Loading stops at the third file with ``error`` (Ctrl-C, a full disk)."""
    real = flow.ingest_file
    seen: list[Path] = []

    def ingest_file(store: Any, path: Path, *args: Any, **kwargs: Any) -> Any:
        seen.append(path)
        if len(seen) == 3:
            raise error
        return real(store, path, *args, **kwargs)

    monkeypatch.setattr(flow, "ingest_file", ingest_file)


@pytest.mark.parametrize(
    ("error", "code", "said"),
    [
        (KeyboardInterrupt(), 130, "interrupted"),
        (OSError(errno.ENOSPC, "No space left on device"), 3, "the disk is full"),
    ],
)
def test_a_refresh_stopped_midway_keeps_what_it_stored(
    runner: CliRunner,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: BaseException,
    code: int,
    said: str,
) -> None:
    rollout = next((home / ".codex").rglob("*.jsonl"))
    kept = rollout.read_bytes()
    rollout.unlink()
    daily(runner, home)  # the store holds the Claude Code transcript
    rollout.write_bytes(kept)  # then two files to read: the rollout, and (last) a transcript
    (rollout.parent / "zz-transcript.jsonl").write_bytes((shared_samples() / OTHER_CC).read_bytes())
    _third_file_fails(monkeypatch, error)
    result = run(runner, home, "usage", "daily")
    assert result.exit_code == code, result.output
    assert said in result.stderr.splitlines()[-1]
    monkeypatch.undo()
    with duckdb.connect(str(store_of(home)), read_only=True, config=OFFLINE) as con:
        paths = [p for (p,) in con.execute("SELECT path FROM sources ORDER BY path").fetchall()]
    # The transcript from before, and the rollout read first this time; nothing of the file
    # being read when it stopped.
    assert len(paths) == 2 and any("rollout" in p for p in paths), paths
    again = daily(runner, home)  # the next refresh reads what was left
    assert again["stderr"].startswith("refresh: read 1 new file (2 unchanged)")


def test_a_symlinked_project_folder_is_read_once(
    runner: CliRunner, home: Path, tmp_path: Path
) -> None:
    """A project folder kept elsewhere and linked into ~/.claude/projects is read as a
    project of its own, by the link's name; a second link to it, and a link back up (a loop),
    add nothing."""
    first = daily(runner, home)
    elsewhere = tmp_path / "disk2" / "-home-me-lib"
    elsewhere.mkdir(parents=True)
    (elsewhere / "s3.jsonl").write_bytes((shared_samples() / OTHER_CC).read_bytes())
    projects = home / ".claude" / "projects"
    (projects / "-home-me-lib").symlink_to(elsewhere, target_is_directory=True)
    (projects / "-home-me-lib-again").symlink_to(elsewhere, target_is_directory=True)
    (projects / "-home-me-app" / "up").symlink_to("..", target_is_directory=True)
    linked = daily(runner, home)
    assert linked["stderr"].startswith("refresh: read 1 new file (2 unchanged)")
    with duckdb.connect(str(store_of(home)), read_only=True, config=OFFLINE) as con:
        paths = [p for (p,) in con.execute("SELECT path FROM sources ORDER BY path").fetchall()]
        lib = con.execute("SELECT count(*) FROM calls WHERE project = '-home-me-lib'").fetchone()
    assert paths[0] == "~/.claude/projects/-home-me-app/2d984148-cddb-4605-aac1-13e720fe613c.jsonl"
    assert paths[1] == "~/.claude/projects/-home-me-lib/s3.jsonl" and len(paths) == 3
    assert lib is not None and linked["totals"]["calls"] == first["totals"]["calls"] + lib[0] > 65


def test_a_copy_of_an_earlier_format_while_the_store_is_written_is_one_line(
    runner: CliRunner, home: Path, held: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy of the last refresh was made by an earlier version (store format 9): it cannot
    be read, so the command says in one line why it shows nothing (not that it shows the copy,
    then that the copy is of an earlier format, to be upgraded by an ingest into it)."""
    monkeypatch.setattr(home_store, "READER_WAIT", 0.3)
    copy = held.with_name(held.name + ".last")
    with duckdb.connect(str(copy), config=OFFLINE) as con:
        con.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    result = run(runner, home, "usage", "daily")
    assert result.exit_code == 3
    [line] = result.stderr.splitlines()
    assert line.startswith(f"Error: {held}: another process (PID ")
    assert line.endswith(
        "is writing this store, and there is no copy of an earlier refresh that this version "
        "can read to read meanwhile: run the command again when it has finished"
    )


def _counting_refresh(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The full refresh, counted: each call adds the first of its default places."""
    from analyzer import pipeline

    full = pipeline.refresh
    calls: list[str] = []

    def counted(store: Any, inputs: Any, *args: Any) -> Any:
        calls.append(inputs.paths[0])
        return full(store, inputs, *args)

    monkeypatch.setattr(pipeline, "refresh", counted)
    return calls


def test_nothing_new_is_told_without_the_full_refresh(
    runner: CliRunner, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48: when every file of the default places is in the store as it is now, the
    refresh says so from a walk and the store (``load/unchanged.py``), the line the full
    refresh says; a new file, a grown one, or a store not linked since it changed is the full
    refresh's."""
    calls = _counting_refresh(monkeypatch)
    first = daily(runner, home)
    assert len(calls) == 1  # (a new store: read in full)
    again = daily(runner, home)
    assert len(calls) == 1
    assert again["stderr"].splitlines()[0] == (
        "refresh: nothing new in 2 files from ~/.claude/projects, ~/.codex/sessions"
    )
    assert again["totals"] == first["totals"]

    [transcript] = (home / ".claude" / "projects").rglob("*.jsonl")
    with transcript.open("ab") as f:
        f.write(transcript.read_bytes().splitlines(keepends=True)[-1])  # a line read again
    grown = daily(runner, home)
    assert len(calls) == 2 and grown["stderr"].startswith("refresh: read 1 grown")

    with duckdb.connect(str(store_of(home)), config=OFFLINE) as con:
        con.execute("DELETE FROM meta WHERE key = 'linked_version'")  # stopped before linking
    daily(runner, home)
    assert len(calls) == 3
    daily(runner, home)
    assert len(calls) == 3  # linked again by the full refresh: nothing new from then on


def test_incidents_after_a_refresh_take_the_full_refresh(
    runner: CliRunner, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command that reads incidents runs the detectors after the refresh (reused when
    nothing changed): that is the full refresh's step."""
    calls = _counting_refresh(monkeypatch)
    daily(runner, home)
    result = run(runner, home, "incidents", "--json")
    assert result.exit_code == 0, result.output
    assert len(calls) == 2


def test_a_file_touched_is_hashed_once_then_known_by_its_stat(
    runner: CliRunner, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same bytes with a new modification time (``touch``, a copy, an agent writing what
    it had): read once to find it is known, its row's stat brought up to date, and from then
    on known by its stat (the refresh with nothing new, ``load/unchanged.py``)."""
    calls = _counting_refresh(monkeypatch)
    first = daily(runner, home)
    [transcript] = (home / ".claude" / "projects").rglob("*.jsonl")
    later = transcript.stat().st_mtime_ns + 5_000_000_000
    os.utime(transcript, ns=(later, later))
    touched = daily(runner, home)
    assert len(calls) == 2  # read in full: the stat is new
    assert touched["stderr"].splitlines()[0].startswith("refresh: nothing new in 2 files")
    again = daily(runner, home)
    assert len(calls) == 2  # known by its stat now
    assert again["totals"] == touched["totals"] == first["totals"]


def test_a_store_of_ingested_files_on_a_machine_without_agent_logs(tmp_path: Path) -> None:
    """A default store filled by ``ingest PATH`` on a machine where no agent keeps logs: the
    refresh says there were none to read (not ``nothing new in 0 files from``)."""
    home = tmp_path / "home"
    home.mkdir()
    runner = CliRunner()
    env = env_of(home)
    loaded = runner.invoke(cli, ["ingest", "-q", str(SAMPLE_DATA / "claude-code")], env=env)
    assert loaded.exit_code == 0, loaded.output
    shown = runner.invoke(cli, ["usage", "daily"], env=env)
    assert shown.exit_code == 0, shown.output
    assert shown.stderr.splitlines()[0] == (
        "refresh: no agent logs in their default places; the store holds what was read into it"
    )
    assert "Total" in shown.stdout
