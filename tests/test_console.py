"""The console is an object a run owns (quiet, verbose, colour, width, what it said, where it
writes): two runs in one process never share what was said, and no test resets anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.console import Console, current, note, use, warn
from analyzer.engine.store import open_store


def test_a_warning_is_said_once_per_console(capsys: pytest.CaptureFixture[str]) -> None:
    first, second = Console(), Console()
    for console in (first, second, first):
        console.warn("disk full")
    assert capsys.readouterr().err == "warning: disk full\n" * 2
    assert first.warnings == second.warnings == ["disk full"]


def test_quiet_drops_notes_not_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = Console(quiet=True)
    quiet.note("reading 3 files")
    quiet.warn("x: skipped")
    assert capsys.readouterr().err == "warning: x: skipped\n"
    assert not quiet.live()


def test_a_silent_console_writes_nothing_and_keeps_what_was_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    silent = Console.silent()
    with use(silent):
        note("reading 3 files")
        warn("x: skipped")
        warn("x: skipped")
    assert capsys.readouterr() == ("", "")
    assert (silent.notes, silent.warnings) == (["reading 3 files"], ["x: skipped"])


def test_the_console_in_use_is_the_runs_and_a_store_carries_it(tmp_path: Path) -> None:
    mine = Console(width=77)
    with use(mine):
        assert current() is mine and current().columns() == 77
        with open_store(tmp_path / "a.duckdb") as store:
            assert store.console is mine
    assert current() is not mine  # outside the run: a console of its own each time
    with open_store(tmp_path / "b.duckdb") as store:
        assert store.console is not mine and store.console.warnings == []


def test_two_command_runs_in_one_process_each_say_their_warnings(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 10}
    doc = {"messages": [{"role": "assistant", "content": "a", "model": "acme/x", "usage": usage}]}
    f = tmp_path / "c.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    said = []
    for n in (1, 2):
        result = CliRunner().invoke(
            cli, ["ingest", "-q", str(f), "--db", str(tmp_path / f"{n}.db")]
        )
        assert result.exit_code == 0, result.output
        said.append(result.stderr)
    assert said == ["warning: no price known for model 'acme/x': its calls are left unpriced\n"] * 2
