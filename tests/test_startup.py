"""What a command loads before it does its work (issue 48): each command imports only what it
uses, so ``--version`` loads nothing of the library and a view of a store named with ``--db``
loads neither pyarrow, numpy, the detectors nor the formats. Times are the bench's
(``bench/run.py``: ``start-up: --version`` and ``usage daily --db STORE``); here, what is
imported, which does not depend on the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from analyzer.cli.main import COMMANDS, cli
from tests.helpers import REPO, env_of, shared_samples
from tests.test_own_data import fake_home

# What a command that only reads a store must not load.
HEAVY = (
    "pyarrow",
    "numpy",
    "pandas",
    "jinja2",
    "analyzer.detect.detectors",
    "analyzer.ingest.sink",
)
# Of the formats, a command that reads a store may load only the registry and the places.
REGISTRY = {"analyzer.formats", "analyzer.formats.places"}


def _no_format(loaded: dict) -> bool:
    return {m for m in loaded["analyzer"] if m.startswith("analyzer.formats")} <= REGISTRY


def _loaded(
    args: list[str], tmp_path: Path, env: dict[str, str | None] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run the command line in a fresh interpreter as the installed script does; what it
    printed, and which of the modules of interest were loaded when it ended."""
    report = tmp_path / "loaded.json"
    script = (
        "import atexit, json, sys\n"
        f"def said():\n"
        f"    names = [m for m in sys.modules if m.startswith('analyzer')]\n"
        f"    heavy = [m for m in {[*HEAVY, 'duckdb']!r} if m in sys.modules]\n"
        f"    open({str(report)!r}, 'w').write(json.dumps({{'analyzer': names, 'heavy': heavy}}))\n"
        "atexit.register(said)\n"
        "from analyzer.cli.main import main\n"
        f"sys.argv = ['llm-forensics', *{args!r}]\n"
        "main()\n"
    )
    run_env = {k: v for k, v in os.environ.items() if k not in (env or {})}
    run_env.update({k: v for k, v in (env or {}).items() if v is not None})
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env=run_env,
    )
    return done, json.loads(report.read_text())


def test_version_loads_nothing_of_the_library(tmp_path: Path) -> None:
    done, loaded = _loaded(["--version"], tmp_path)
    assert done.returncode == 0 and "llm-forensics, version" in done.stdout
    assert loaded["heavy"] == []  # not even DuckDB
    assert len(loaded["analyzer"]) <= 10, loaded["analyzer"]


@pytest.mark.parametrize("view", ["daily", "session", "bills", "reconcile"])
def test_a_view_of_a_named_store_loads_no_pyarrow(
    ingested_sample_db: Path, tmp_path: Path, view: str
) -> None:
    done, loaded = _loaded(["usage", view, "--db", str(ingested_sample_db), "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert loaded["heavy"] == ["duckdb"] and _no_format(loaded), loaded
    shown = json.loads(done.stdout)
    assert shown["view"] == view if isinstance(shown, dict) else isinstance(shown, list)


def test_every_command_is_where_the_group_says() -> None:
    """The group imports a command only when it is asked for: each name it lists is a click
    command of that name, and ``--help`` lists them all."""
    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert isinstance(command, click.Command) and command.name == name, name
    assert cli.get_command(ctx, "no-such-command") is None
    shown = CliRunner().invoke(cli, ["--help"]).output
    assert all(f"  {name}" in shown for name in COMMANDS)


def test_a_warm_default_store_loads_no_pyarrow(tmp_path: Path) -> None:
    """``usage daily`` as a user types it, the second time: the refresh finds nothing new
    without the load's machinery (``load/unchanged.py``), and the view reads the store."""
    env = env_of(fake_home(tmp_path))
    first, loaded = _loaded(["usage", "daily", "--json"], tmp_path, env)
    assert first.returncode == 0, first.stderr
    assert "pyarrow" in loaded["heavy"]  # the first run reads the files
    again, loaded = _loaded(["usage", "daily", "--json"], tmp_path, env)
    assert again.returncode == 0, again.stderr
    assert again.stderr.startswith("refresh: nothing new in 2 files")
    assert loaded["heavy"] == ["duckdb"] and _no_format(loaded), loaded
    assert json.loads(again.stdout)["totals"] == json.loads(first.stdout)["totals"]


def test_a_warm_view_never_opens_the_default_store_for_writing(tmp_path: Path) -> None:
    """With nothing new in the default places, the view opens the store once, read-only
    (``home.unchanged_reading``): the store, its copy for readers and its spend ledger are
    left as they were (opening a store for writing and closing it rewrote its file, and the
    copy was made again at every run). Something new is still read."""
    from analyzer.engine.default_store import default_store
    from analyzer.guards.spend import ledger_path

    home = fake_home(tmp_path)
    env = env_of(home)
    store = default_store({k: v for k, v in env.items() if v is not None}, home)
    first, _ = _loaded(["usage", "daily", "--json"], tmp_path, env)
    assert first.returncode == 0, first.stderr
    kept = [store, Path(f"{store}.last"), ledger_path(store)]
    before = [(p.stat().st_mtime_ns, p.read_bytes()) for p in kept]
    again, _ = _loaded(["usage", "session", "--json"], tmp_path, env)
    assert again.returncode == 0 and again.stderr.startswith("refresh: nothing new"), again
    assert [(p.stat().st_mtime_ns, p.read_bytes()) for p in kept] == before
    assert not Path(f"{store}.wal").exists()
    grown = next((home / ".claude" / "projects").rglob("*.jsonl"))
    grown.write_bytes(grown.read_bytes() + grown.read_bytes().splitlines(keepends=True)[-1])
    then, _ = _loaded(["usage", "daily", "--json"], tmp_path, env)
    assert then.returncode == 0 and "nothing new" not in then.stderr, then.stderr


# What Claude Code's hook does not load at its start, even when it reads new lines (issue 49:
# the hook runs at every tool call, in a new process): the reading of a whole file (base,
# jsonl, lowering, resume and their gzip and base64), the registry's places, the policies'
# TOML, and what only the store's lock and the first read's copies use.
OFF_THE_HOOK = (
    "analyzer.ingest.base",
    "analyzer.ingest.jsonl",
    "analyzer.ingest.lowering",
    "analyzer.ingest.resume",
    "analyzer.formats.places",
    "gzip",
    "base64",
    "tomllib",
    "tempfile",
    "socket",
)
SPOTTER = (
    "real-world/claude_code/marot__spotter/-home-marco-projects-spotter-worktrees-spotter-a0y/"
    "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
)


def test_the_hook_reading_new_lines_loads_no_more_than_it_uses(tmp_path: Path) -> None:
    """The hook on a real transcript, then on it grown: the second call reads the new lines
    from the state the first kept, and stops the session at its cost cap, without loading the
    modules above; a third, with nothing new, compiles none of the rules of ``ingest.meaning``
    either (what a tool gave back is read with them: they are compiled when first used)."""
    lines = (shared_samples() / SPOTTER).read_bytes().splitlines(keepends=True)
    path = tmp_path / "t.jsonl"
    report = tmp_path / "loaded.json"
    script = (
        "import atexit, json, sys\n"
        "def said():\n"
        "    from analyzer.ingest import meaning\n"
        f"    off = [m for m in {OFF_THE_HOOK!r} if m in sys.modules]\n"
        "    rules = [f.cache_info().currsize for f in (meaning._masking, meaning._says_error)]\n"
        f"    open({str(report)!r}, 'w').write(json.dumps({{'off': off, 'rules': rules}}))\n"
        "atexit.register(said)\n"
        "from analyzer.cli.entry import main\n"
        "sys.argv = ['llm-forensics', 'guard', 'claude-hook', '--policy', 'session_cost_cap']\n"
        "main()\n"
    )
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    payload = json.dumps({"transcript_path": str(path), "hook_event_name": "PostToolUse"})
    answers = []
    for upto in (1000, len(lines), len(lines)):  # (the cap of $5 is passed after line 1000)
        path.write_bytes(b"".join(lines[:upto]))
        done = subprocess.run(
            [sys.executable, "-c", script],
            input=payload,
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        answers.append((done.stdout, json.loads(report.read_text())))
    (first, _built), (then, loaded), (again, idle) = answers  # (the first builds the state)
    assert "stopReason" not in first and "stopReason" in then and again == then, answers
    assert loaded["off"] == [] and idle == {"off": [], "rules": [0, 0]}, answers
