"""Where Aider's chat histories are found (issue 52, "Discovery"): Aider writes
``.aider.chat.history.md`` into each project folder it runs in and keeps no central folder. A
walk of a folder reads that hidden file (and no other hidden file of Aider's); the default
refresh reads those under the roots the user named once (``config add-root``, or
``$LLM_FORENSICS_ROOTS``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import analyzer.formats as registry
from analyzer.cli.main import cli
from analyzer.engine import roots
from analyzer.formats import places
from analyzer.ingest.base import IngestOptions
from analyzer.load.flow import find_files
from analyzer.load.inputs import default_inputs
from tests.helpers import env_of, shared_samples
from tests.test_own_data import fake_home
from tests.test_startup import _loaded, _no_format

CHAT = ".aider.chat.history.md"
AIDER_SAMPLE = (
    Path("more-formats") / "aider" / "AFI-Protocol__afi-core__59f2649__.aider.chat.history.md"
)


def _project(folder: Path, history: str = "# aider chat started at 2025-07-15 11:38:00\n") -> Path:
    """A project folder as Aider leaves it: its chat history, its input history and its tags
    cache (a hidden folder), beside the project's own files."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CHAT).write_text(history, encoding="utf-8")
    (folder / ".aider.input.history").write_text("\n# 2025-07-15 11:38:00\n+fix it\n")
    (folder / ".aider.tags.cache.v4").mkdir()
    (folder / ".aider.tags.cache.v4" / "cache.db").write_bytes(b"SQLite format 3\x00")
    (folder / ".env").write_text("KEY=1\n")
    (folder / "main.py").write_text("print('hi')\n")
    return folder


def _env(home: Path, tmp_path: Path, **extra: str | None) -> dict[str, str | None]:
    """A fake home's environment, its data folder (where roots.json is kept) in ``tmp_path``."""
    return env_of(home, XDG_DATA_HOME=str(tmp_path / "data"), **extra)


def _run(home: Path, tmp_path: Path, *args: str, **extra: str | None) -> Result:
    return CliRunner().invoke(cli, list(args), env=_env(home, tmp_path, **extra))


def _plain(env: dict[str, str | None]) -> dict[str, str]:
    return {k: v for k, v in env.items() if v is not None}


# -- the walk of a folder ----------------------------------------------------------------------


def test_the_walk_of_a_project_reads_its_chat_history_and_no_other_hidden_file(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path / "app")
    _project(project / "sub")
    walk = find_files([str(project)], IngestOptions())
    found = sorted(str(f.path.relative_to(project)) for f in walk.files)
    assert found == [CHAT, "main.py", f"sub/{CHAT}", "sub/main.py"]
    assert all(not f.explicit for f in walk.files)  # (found in a folder: a failure is a warning)
    # The tags cache is a hidden folder passed over, and said as such; hidden files are not.
    assert walk.hidden_skipped == [
        str(project / ".aider.tags.cache.v4"),
        str(project / "sub" / ".aider.tags.cache.v4"),
    ]
    assert registry.agent_files() == {CHAT}


def test_audit_of_a_project_folder_reads_its_chat_history(tmp_path: Path) -> None:
    project = _project(tmp_path / "app", (shared_samples() / AIDER_SAMPLE).read_text())
    result = CliRunner().invoke(cli, ["audit", str(project), "--json"], env=env_of(tmp_path))
    assert result.exit_code == 0, result.output  # (main.py: no agent log, passed over)
    data = json.loads(result.stdout)
    assert {s["path"]: s["format"] for s in data["sources"]} == {f"app/{CHAT}": "aider_chat"}
    assert data["calls_by_format"]["aider_chat"] > 0
    assert ".aider.input.history" not in result.stderr
    assert f"skipped hidden folders: {project / '.aider.tags.cache.v4'}" in result.stderr


# -- the roots, named once -----------------------------------------------------------------------


def test_add_root_keeps_its_absolute_path_and_roots_counts_the_histories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    code = home / "code"
    _project(code / "app")
    _project(code / "web")
    (code / "notes").mkdir()
    data = tmp_path / "data" / "llm-forensics" / "roots.json"

    result = _run(home, tmp_path, "config", "roots")
    assert result.exit_code == 0 and result.stdout == ""
    assert "no roots: add a folder of your projects" in result.stderr

    monkeypatch.chdir(home)  # a relative DIR is relative to where the command runs
    result = _run(home, tmp_path, "config", "add-root", "code")
    monkeypatch.chdir(tmp_path)
    assert result.exit_code == 0, result.output
    assert (
        result.stdout
        == f"added root {code}: 2 Aider chat histories, read by every command given no input\n"
    )
    assert json.loads(data.read_text()) == {"roots": [str(code)]}
    assert [p.name for p in data.parent.iterdir()] == ["roots.json"]  # (no temporary file left)

    again = _run(home, tmp_path, "config", "add-root", str(code / "app" / ".." / "app" / ".."))
    assert again.exit_code == 0 and again.stdout.startswith(f"{code} is a root already")
    assert json.loads(data.read_text()) == {"roots": [str(code)]}

    (home / "solo").mkdir()
    _project(home / "solo")
    assert _run(home, tmp_path, "config", "add-root", str(home / "solo")).exit_code == 0
    assert json.loads(data.read_text()) == {"roots": [str(code), str(home / "solo")]}
    listed = _run(home, tmp_path, "config", "roots")
    assert listed.exit_code == 0
    assert listed.stdout.splitlines() == [
        f"{code}  2 Aider chat histories",
        f"{home / 'solo'}  1 Aider chat history",
    ]

    removed = _run(home, tmp_path, "config", "remove-root", str(code))
    assert removed.exit_code == 0, removed.output
    assert removed.stdout == f"removed root {code} (the calls read from it stay in the store)\n"
    assert json.loads(data.read_text()) == {"roots": [str(home / "solo")]}


@pytest.mark.parametrize(
    ("named", "why"),
    [("nowhere", "no such folder"), ("file.txt", "not a folder")],
)
def test_a_root_that_is_no_folder_is_one_error_line(tmp_path: Path, named: str, why: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "file.txt").write_text("x\n")
    result = _run(home, tmp_path, "config", "add-root", str(home / named))
    assert result.exit_code == 3
    assert result.stderr.startswith(f"Error: {home / named}: {why}")
    assert len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "data").exists()  # nothing written


def test_removing_what_is_no_root_names_the_roots(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "code").mkdir(parents=True)
    assert _run(home, tmp_path, "config", "add-root", str(home / "code")).exit_code == 0
    result = _run(home, tmp_path, "config", "remove-root", str(home / "other"))
    assert result.exit_code == 3
    assert result.stderr == f"Error: {home / 'other'}: not a root (the roots: {home / 'code'})\n"


def test_a_root_gone_is_listed_as_such_and_can_be_removed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "old").mkdir(parents=True)
    assert _run(home, tmp_path, "config", "add-root", str(home / "old")).exit_code == 0
    (home / "old").rmdir()
    assert _run(home, tmp_path, "config", "roots").stdout == f"{home / 'old'}  not there\n"
    assert _run(home, tmp_path, "config", "remove-root", str(home / "old")).exit_code == 0
    assert roots.stored_roots(_plain(_env(home, tmp_path)), home) == []


def test_a_damaged_roots_file_is_one_error_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "code").mkdir(parents=True)
    kept = tmp_path / "data" / "llm-forensics" / "roots.json"
    kept.parent.mkdir(parents=True)
    kept.write_text('{"roots": ["relative/path"]}')
    result = _run(home, tmp_path, "config", "add-root", str(home / "code"))
    assert result.exit_code == 3
    assert result.stderr.startswith(f"Error: {kept}: not a list of roots as llm-forensics writes")
    assert kept.read_text() == '{"roots": ["relative/path"]}'  # left for the user to fix


def test_the_environment_adds_roots_for_one_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _project(home / "a" / "app")
    _project(home / "b")
    (home / "code").mkdir()
    assert _run(home, tmp_path, "config", "add-root", str(home / "code")).exit_code == 0
    named = os.pathsep.join(["~/a", "", str(home / "b"), str(home / "code")])
    listed = _run(home, tmp_path, "config", "roots", LLM_FORENSICS_ROOTS=named)
    assert listed.stdout.splitlines() == [
        f"{home / 'code'}  0 Aider chat histories",
        f"{home / 'a'}  1 Aider chat history  (from $LLM_FORENSICS_ROOTS)",
        f"{home / 'b'}  1 Aider chat history  (from $LLM_FORENSICS_ROOTS)",
    ]
    assert roots.stored_roots(_plain(_env(home, tmp_path)), home) == [home / "code"]  # not kept


# -- the default places under the roots ----------------------------------------------------------


def test_default_homes_list_the_histories_one_level_below_each_root(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code = home / "code"
    _project(code / "app")
    _project(code / "web")
    _project(code / ".hidden")  # no project
    _project(code / "app" / "deep")  # two levels below: read when its folder is named
    (code / "empty").mkdir()
    (code / "linked").symlink_to(code / "web")
    env = _plain(_env(home, tmp_path, LLM_FORENSICS_ROOTS=f"{code}{os.pathsep}{home / 'gone'}"))
    aider = [p for fmt, p in registry.default_homes(env, home) if fmt == "aider_chat"]
    assert aider == [
        code / CHAT,  # the root's own, there or not
        code / "app" / CHAT,
        code / "linked" / CHAT,
        code / "web" / CHAT,
        home / "gone" / CHAT,
    ]
    inputs = default_inputs(env, home)
    histories = [p for p in inputs.paths if p in inputs.files]
    assert [inputs.labels[p] for p in histories] == [
        f"~/code/app/{CHAT}",
        f"~/code/linked/{CHAT}",
        f"~/code/web/{CHAT}",
    ]
    assert f"~/code/{CHAT}" in inputs.absent and f"~/gone/{CHAT}" in inputs.absent
    assert inputs.places() == [f"~/code/*/{CHAT}"]


def test_a_place_that_is_a_file_is_an_input_only_for_an_agent_file(tmp_path: Path) -> None:
    """What the other formats' places were is kept: a file where a folder is expected is
    absent, as before."""
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "sessions").write_text("not a folder\n")
    inputs = default_inputs(_plain(env_of(home)), home)
    assert inputs.paths == [] and "~/.codex/sessions" in inputs.absent


def test_the_refresh_reads_the_histories_under_a_root(tmp_path: Path) -> None:
    home = fake_home(tmp_path)
    history = (shared_samples() / AIDER_SAMPLE).read_text()
    _project(home / "code" / "app", history)
    env = _env(home, tmp_path)
    assert _run(home, tmp_path, "config", "add-root", str(home / "code")).exit_code == 0
    first = _run(home, tmp_path, "usage", "daily", "--json")
    assert first.exit_code == 0, first.output
    assert first.stderr.startswith(
        "refresh: read 3 new files (0 unchanged) from ~/.claude/projects, ~/.codex/sessions, "
        f"~/code/app/{CHAT}"
    )
    _project(home / "code" / "web", history.replace("2025-", "2024-"))
    again = CliRunner().invoke(cli, ["usage", "daily", "--json"], env=env)
    assert again.stderr.startswith(
        "refresh: read 1 new file (3 unchanged) from ~/.claude/projects, ~/.codex/sessions, "
        f"~/code/*/{CHAT}"
    ), again.stderr
    quiet = CliRunner().invoke(cli, ["usage", "daily", "--json"], env=env)
    assert quiet.stderr.startswith("refresh: nothing new in 4 files from "), quiet.stderr


def test_finding_the_roots_imports_no_format(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _project(home / "code" / "app")
    env = _env(home, tmp_path, LLM_FORENSICS_ROOTS=str(home / "code"))
    done, loaded = _loaded(["config", "roots"], tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{home / 'code'}  1 Aider chat history  (from $LLM_FORENSICS_ROOTS)\n"
    # (DuckDB comes with the registry's package, as for every command that finds the places.)
    assert set(loaded["heavy"]) <= {"duckdb"} and _no_format(loaded), loaded
    assert places.AGENT_FILES == {"aider_chat": (CHAT,)}
