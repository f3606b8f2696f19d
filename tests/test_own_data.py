"""A new user's own data: the logs found where agents keep them (a fake home: ``HOME``,
``CLAUDE_CONFIG_DIR`` and ``CODEX_HOME`` pointed at temporary folders), nothing found is exit 3,
the outputs by extension, and a clear line for every way a run ends (Ctrl-C, --fail-on, a store
another process holds read-only)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import OFFLINE
from tests.helpers import SAMPLE_DATA, env_of, or_row, shared_samples, write_csv
from tests.test_atomicity import Child, child_env, write_big_export

CC_SAMPLE = "jnarowski__agentcmd__full-session-four.jsonl"
CODEX_SAMPLE = (
    "jnarowski__agentcmd__rollout-2025-09-25T15-12-14-019982b8-3422-79e0-8b3b-05abaf4f3c3e.jsonl"
)


def fake_home(root: Path) -> Path:
    """A home folder with one Claude Code transcript and one Codex rollout where the agents
    keep them, and a hidden folder that is no agent's."""
    samples = shared_samples()
    home = root / "home"
    project = home / ".claude" / "projects" / "-home-me-app"
    project.mkdir(parents=True)
    (project / "2d984148-cddb-4605-aac1-13e720fe613c.jsonl").write_bytes(
        (samples / CC_SAMPLE).read_bytes()
    )
    day = home / ".codex" / "sessions" / "2025" / "09" / "25"
    day.mkdir(parents=True)
    (day / CODEX_SAMPLE.split("__")[-1]).write_bytes((samples / CODEX_SAMPLE).read_bytes())
    (home / ".cache").mkdir()
    (home / ".cache" / "junk.json").write_text("{}\n")
    return home


def test_audit_with_no_path_reads_the_default_places(runner: CliRunner, tmp_path: Path) -> None:
    home = fake_home(tmp_path)
    result = runner.invoke(cli, ["audit", "--json"], env=env_of(home))
    assert result.exit_code == 0, result.output
    assert "reading 1 file from ~/.claude/projects, 1 from ~/.codex/sessions" in result.stderr
    data = json.loads(result.stdout)
    assert data["calls_by_format"] == {"codex": 35, "claude_code": 30}
    # Named in the store as the user knows them, never by the machine's home path.
    paths = [s["path"] for s in data["sources"]]
    assert paths == [
        "~/.claude/projects/-home-me-app/2d984148-cddb-4605-aac1-13e720fe613c.jsonl",
        "~/.codex/sessions/2025/09/25/" + CODEX_SAMPLE.split("__")[-1],
    ]


def test_claude_config_dir_is_a_comma_separated_list(runner: CliRunner, tmp_path: Path) -> None:
    home = fake_home(tmp_path)
    other = tmp_path / "elsewhere"
    (other / "projects" / "p").mkdir(parents=True)
    (other / "projects" / "p" / "s.jsonl").write_bytes(
        (shared_samples() / "marot__spotter__agent-afc096d.jsonl").read_bytes()
    )
    codex_home = tmp_path / "codex-home"
    result = runner.invoke(
        cli,
        ["audit", "--json"],
        env=env_of(
            home, CLAUDE_CONFIG_DIR=f"{home / '.claude'}, {other}", CODEX_HOME=str(codex_home)
        ),
    )
    assert result.exit_code == 0, result.output
    # Both Claude folders; $CODEX_HOME has no sessions, so ~/.codex is not read either.
    assert "reading 1 file from ~/.claude/projects, 1 from " in result.stderr
    assert json.loads(result.stdout)["calls_by_format"] == {"claude_code": 48}


def test_walking_a_home_folder_enters_agent_folders_and_says_what_it_skipped(
    runner: CliRunner, tmp_path: Path
) -> None:
    home = fake_home(tmp_path)
    result = runner.invoke(cli, ["audit", str(home), "--json"], env=env_of(tmp_path))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["calls_by_format"] == {"codex": 35, "claude_code": 30}
    assert f"skipped hidden folders: {home / '.cache'} (name one to read it)" in result.stderr


def test_nothing_found_is_said_naming_what_was_looked_at(runner: CliRunner, tmp_path: Path) -> None:
    """``audit`` on a new machine (no agent logs, no store): no usage data, said in one line
    naming where it looked, exit 0 (until issue 50: exit 3). Asked for a report file of it, or
    given a folder with nothing recognised in it: exit 3, naming what was looked at."""
    empty_home = tmp_path / "empty"
    empty_home.mkdir()
    result = runner.invoke(cli, ["audit"], env=env_of(empty_home))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        "No usage data found: no agent logs in their default places "
        "(~/.config/claude/projects, ~/.claude/projects, ~/.codex/sessions, ~/.nexus3/logs, "
        "~/.gemini/tmp, ~/.local/share/opencode/storage/message, "
        "~/.local/share/opencode/storage/part, ~/.cline/data/sessions, "
        "~/.config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks, "
        "~/.config/Code/User/globalStorage/rooveterinaryinc.roo-cline/tasks, "
        "~/.openhands/conversations: not there), and no store yet at "
        "~/.local/share/llm-forensics/forensics.duckdb; for logs kept elsewhere: "
        "`llm-forensics ingest PATH`"
    )
    result = runner.invoke(cli, ["audit", "-o", str(tmp_path / "r.html")], env=env_of(empty_home))
    assert result.exit_code == 3
    assert result.stderr.strip() == (
        "Error: no input given, and no agent logs in their default places "
        "(~/.config/claude/projects, ~/.claude/projects, ~/.codex/sessions, ~/.nexus3/logs, "
        "~/.gemini/tmp, ~/.local/share/opencode/storage/message, "
        "~/.local/share/opencode/storage/part, ~/.cline/data/sessions, "
        "~/.config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks, "
        "~/.config/Code/User/globalStorage/rooveterinaryinc.roo-cline/tasks, "
        "~/.openhands/conversations: not there); give a "
        "file or folder, e.g. `llm-forensics audit exports/`"
    )
    folder = tmp_path / "notes"
    (folder / ".git").mkdir(parents=True)
    (folder / "README.txt").write_text("hello\n")
    result = runner.invoke(cli, ["audit", str(folder), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 3
    assert result.stderr.strip() == (
        f"Error: no recognised input in {folder}: 1 not a recognised format "
        f"({folder / 'README.txt'}); hidden folders skipped ({folder / '.git'})"
    )
    assert not (tmp_path / "r.html").exists()  # never a report of zero calls


def test_a_failed_ingest_into_a_new_store_leaves_no_file(runner: CliRunner, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    db = tmp_path / "new.duckdb"
    result = runner.invoke(cli, ["ingest", "--db", str(db), str(notes)])
    assert result.exit_code == 3
    assert not db.exists() and not Path(str(db) + ".wal").exists()
    # An existing store is never removed, whatever fails.
    good = write_csv(tmp_path / "a.csv", [or_row(0)])
    assert runner.invoke(cli, ["ingest", "--db", str(db), str(good)]).exit_code == 0
    assert runner.invoke(cli, ["ingest", "--db", str(db), str(notes)]).exit_code == 3
    assert db.exists()


def test_format_openrouter_on_another_csv_names_the_missing_columns(
    runner: CliRunner, tmp_path: Path
) -> None:
    other = tmp_path / "orders.csv"
    other.write_text("order_id,customer,total\n1,ann,9.50\n")
    result = runner.invoke(
        cli,
        ["ingest", "--db", str(tmp_path / "s.duckdb"), "--format", "openrouter_csv", str(other)],
    )
    assert result.exit_code == 3
    assert result.stderr.strip() == (
        f"Error: {other}:1: missing required columns generation_id, created_at, tokens_prompt, "
        "tokens_completion, model_permaslug: the first line (order_id, customer, total) has none "
        "of the columns of an OpenRouter activity export (CSV)"
    )


@pytest.mark.parametrize("ext", ["html", "md", "json", "csv", "parquet"])
def test_output_is_written_by_its_extension(
    runner: CliRunner, tmp_path: Path, sample_db: Path, ext: str
) -> None:
    out = tmp_path / f"out.{ext}"
    result = runner.invoke(cli, ["report", "--db", str(sample_db), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == f"wrote {out} ({ext})"
    if ext == "html":
        assert out.read_text().startswith("<!DOCTYPE html>")
    elif ext == "md":
        assert out.read_text().startswith("# ")
    elif ext == "json":
        assert len(json.loads(out.read_text())["incidents"]) == 10
    else:
        if ext == "csv":
            import csv

            rows = list(csv.DictReader(out.open()))
        else:
            rows = pq.read_table(out).to_pylist()
        assert len(rows) == 10
        top = rows[0]
        assert top["detector"] == "constant_input_low_output"
        assert str(top["app"]) == "Penguin" and str(top["api_key"]) == "penguin-personal"
        assert float(top["wasted_usd"]) == pytest.approx(6.16)
        assert {int(r["number"]) for r in rows} == set(range(1, 11))


def test_an_unknown_extension_is_a_usage_error(runner: CliRunner, sample_db: Path) -> None:
    result = runner.invoke(cli, ["report", "--db", str(sample_db), "-o", "out.txt"])
    assert result.exit_code == 2
    assert "unknown extension .txt (known: .html, .htm, .md, .markdown, .json, .csv, .parquet" in (
        result.stderr
    )


def test_dash_writes_to_stdout(runner: CliRunner, sample_db: Path) -> None:
    result = runner.invoke(cli, ["report", "--db", str(sample_db), "-o", "-"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# ") and "(constant_input_low_output)" in result.stdout
    as_json = runner.invoke(cli, ["report", "--db", str(sample_db), "-o", "-", "--format", "json"])
    assert json.loads(as_json.stdout)["incidents"]
    audit = runner.invoke(cli, ["audit", str(SAMPLE_DATA), "-o", "-", "--report-format", "csv"])
    assert audit.exit_code == 0
    assert audit.stdout.splitlines()[0].startswith("number,incident_id,detector,severity")
    assert len(audit.stdout.splitlines()) == 11  # the header and the 10 incidents, nothing else


def test_fail_on_says_why_it_exits_1(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["audit", str(SAMPLE_DATA), "--fail-on", "high", "-q"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "exit 1: 6 incident(s) at severity high or higher (--fail-on high)"
    )
    result = runner.invoke(cli, ["audit", str(SAMPLE_DATA), "--fail-on-waste", "10", "-q"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "exit 1: the incidents wasted $12.11, at least --fail-on-waste 10"
    )


def test_colour_on_a_terminal_only_and_never_with_no_color(
    runner: CliRunner, sample_db: Path
) -> None:
    args = ["incidents", "--db", str(sample_db)]
    coloured = runner.invoke(cli, args, color=True)
    assert "\x1b[31m\x1b[1mhigh" in coloured.stdout  # high severity in bold red
    assert "\x1b[" not in runner.invoke(cli, args).stdout  # piped: plain
    plain = runner.invoke(cli, args, color=True, env={"NO_COLOR": "1"})
    assert "\x1b[" not in plain.stdout


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_readers_open_the_store_read_only(tmp_path: Path, sample_db: Path) -> None:
    """Another process holds the store read-only (as on a read-only disk: DuckDB then refuses a
    writer): every reading command still runs, and the file is left as it was."""
    db = tmp_path / "ro.duckdb"
    db.write_bytes(sample_db.read_bytes())
    before = _sha(db)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1], read_only=True); "
            "print('ready', flush=True); time.sleep(120)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        for args in (
            ["report", "-o", str(tmp_path / "r.html")],
            ["usage", "daily"],
            ["incidents"],
            ["show", "1"],
            ["backtest"],
            ["rejects"],
            ["export", "--parquet", str(tmp_path / "tables")],
        ):
            done = subprocess.run(
                [sys.executable, "-m", "analyzer", args[0], "--db", str(db), *args[1:]],
                capture_output=True,
                text=True,
                env=child_env(),
                timeout=300,
            )
            assert done.returncode == 0, (args, done.stderr)
        # A writer is refused while the reader holds it: the readers above were not writers.
        refused = subprocess.run(
            [sys.executable, "-m", "analyzer", "detect", "--db", str(db)],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=300,
        )
        assert refused.returncode == 3
    finally:
        holder.kill()
        holder.wait()
    assert _sha(db) == before


def test_ctrl_c_while_loading_stores_nothing_of_that_file(tmp_path: Path) -> None:
    """A real child process, sent SIGINT while it reads a large export: one line saying this
    run stored none of its one file, exit 130, and the store holds what it held before (here:
    the small file only)."""
    small = write_csv(tmp_path / "small.csv", [or_row(i) for i in range(3)])
    big = write_big_export(tmp_path / "big.csv", 300_000)
    db = tmp_path / "s.duckdb"
    first = subprocess.run(
        [sys.executable, "-m", "analyzer", "ingest", "--db", str(db), str(small)],
        capture_output=True,
        env=child_env(),
        timeout=120,
    )
    assert first.returncode == 0, first.stderr
    child = Child.start(
        [sys.executable, "-m", "analyzer", "ingest", "--db", str(db), str(big)],
        tmp_path,
        str(big),
        child_env(),
    )
    deadline = time.monotonic() + 120
    while child.stage is None and child.proc.poll() is None and time.monotonic() < deadline:
        child.pump(0.2)
    assert child.stage is not None, f"the load never showed progress: {child.stderr!r}"
    child.proc.send_signal(signal.SIGINT)
    code = child.proc.wait(timeout=120)
    for _ in range(20):
        child.pump(0.05)
    os.close(child.master)
    assert code == 130, child.stderr
    last = child.stderr.replace("\r", "\n").strip().splitlines()[-1].strip()
    assert last == (
        "interrupted: this run stored 0 of the 1 file found; the same command again reads the rest"
    )
    assert "a bug in llm-forensics" not in child.stderr
    con = duckdb.connect(str(db), read_only=True, config=OFFLINE)
    try:
        assert con.execute("SELECT count(*) FROM calls").fetchone() == (3,)
        assert con.execute("SELECT path FROM sources").fetchall() == [("small.csv",)]
    finally:
        con.close()


def test_the_recommendation_is_a_policy_file_that_reads_back(
    runner: CliRunner, tmp_path: Path, sample_db: Path
) -> None:
    result = runner.invoke(cli, ["backtest", "--db", str(sample_db), "--recommend", "--json"])
    assert result.exit_code == 0, result.output
    rec = json.loads(result.stdout)
    assert rec["result"]["false_trips"] == 0  # the default budget: no false trip
    assert rec["result"]["waste_prevented_usd"] > 0 and rec["result"]["net_usd"] > 0
    text = runner.invoke(cli, ["backtest", "--db", str(sample_db), "--recommend"]).stdout
    table = text[text.index("[policy.") : text.index("\n\n# Run it in Claude Code")] + "\n"
    assert table == rec["toml"].split("\n", 1)[1]  # the same table, after its comment line
    policy_file = tmp_path / "mine.toml"
    policy_file.write_text(rec["toml"])
    name = next(iter(tomllib.loads(rec["toml"])["policy"]))
    assert name == f"{rec['policy']}_at_{rec['stop']:g}".replace(".", "_")
    again = runner.invoke(
        cli,
        [
            "backtest",
            "--db",
            str(sample_db),
            "--policies",
            str(policy_file),
            "--only",
            name,
            "--json",
        ],
    )
    assert again.exit_code == 0, again.output
    [replayed] = json.loads(again.stdout)
    for key in ("waste_prevented_usd", "false_trips", "harm_usd", "incidents_stopped"):
        assert replayed[key] == rec["result"][key], key
    # A wider budget can only do as well or better.
    wider = json.loads(
        runner.invoke(
            cli,
            ["backtest", "--db", str(sample_db), "--recommend", "--max-false-trips", "2", "--json"],
        ).stdout
    )
    assert wider["result"]["false_trips"] <= 2
    assert wider["result"]["net_usd"] >= rec["result"]["net_usd"]
    tight = json.loads(
        runner.invoke(
            cli,
            ["backtest", "--db", str(sample_db), "--recommend", "--max-false-usd", "0", "--json"],
        ).stdout
    )
    assert tight["result"]["usd_false_trips"] == 0


def test_a_sweep_shows_the_swept_policy_only(runner: CliRunner, sample_db: Path) -> None:
    result = runner.invoke(
        cli,
        [
            "backtest",
            "--db",
            str(sample_db),
            "--sweep",
            "netclaw_cumulative_per_turn.stop=2..6",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {r["policy"] for r in rows} == {"netclaw_cumulative_per_turn"}
    assert [r["params"]["stop"] for r in rows] == [2, 3, 4, 5, 6]


def test_the_recommendation_says_how_to_run_it(
    runner: CliRunner, tmp_path: Path, sample_db: Path
) -> None:
    """``backtest --recommend`` ends with the Claude Code settings and the three lines of
    Python that run the policy it recommends: saved as it says, both run that policy."""
    rec = json.loads(
        runner.invoke(cli, ["backtest", "--db", str(sample_db), "--recommend", "--json"]).stdout
    )
    name = next(iter(tomllib.loads(rec["toml"])["policy"]))
    (tmp_path / "guards.toml").write_text(rec["toml"])
    [entry] = rec["claude_code_settings"]["hooks"]["PostToolUse"]
    command = entry["hooks"][0]["command"]
    # The installed command by its absolute path: Claude Code runs a hook with the PATH it
    # was started with, which need not hold the venv.
    program, rest = command.split(" ", 1)
    assert entry["matcher"] == "*" and rest.startswith("guard claude-hook")
    assert Path(program).is_absolute() and Path(program).name == "llm-forensics"
    assert os.access(program, os.X_OK)
    assert f"--policy {name} " in command
    # As Claude Code runs it: a shell, in the project, the hook's JSON on stdin, no venv on PATH.
    transcript = next((SAMPLE_DATA / "claude-code").rglob("*.jsonl"))
    payload = {"transcript_path": str(transcript), "hook_event_name": "PostToolUse"}
    done = subprocess.run(
        ["bash", "-c", command],
        input=json.dumps(payload),
        env={**os.environ, "CLAUDE_PROJECT_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = rec["python"]
    assert len(lines) == 3 and lines[0] == "from analyzer.api import Call, Guard"
    here: dict[str, Any] = {}
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        exec("\n".join(lines[:2]), here)  # the import and the load, as printed
    finally:
        os.chdir(cwd)
    assert here["guard"].policy.name == name and here["guard"].policy.stop == rec["stop"]
    text = runner.invoke(cli, ["backtest", "--db", str(sample_db), "--recommend"]).stdout
    assert json.dumps(rec["claude_code_settings"]) in text and lines[2] in text
