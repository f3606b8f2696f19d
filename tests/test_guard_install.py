"""``guard install``, ``guard status``, ``guard uninstall``: our hook in Claude Code's
settings, merged with what is there and taken out again to the byte (issue 49's acceptance),
in a fake home of real Claude Code transcripts; and the merge itself, file style by style."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.errors import ForensicsError
from analyzer.guards import install as inst
from analyzer.guards.recommend import outcome
from analyzer.guards.scoring import Result
from analyzer.model.formatting import money
from tests.ccusage_side import real_world_home
from tests.helpers import env_of, shared_samples

POLICY = "opencode_doom_loop"
OTHER = "netclaw_cumulative_per_turn"

# A project's settings as a person leaves them: tabs, a hook of their own on the event ours
# goes to, another matcher, text that is not ASCII, keys in no order, no final newline.
ODD = (
    '{\r\n\t"permissions": {"allow": ["Bash(git *)"]},\r\n\t"hooks": {\r\n'
    '\t\t"PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", '
    '"command": "prettier --write", "timeout": 30}]}],\r\n'
    '\t\t"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]\r\n'
    '\t},\r\n\t"env": {"GREETING": "grüß dich"}, "model": "opus"\r\n}'
).encode()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fake home of real Claude Code transcripts (its default store made on first use)."""
    return real_world_home(tmp_path_factory.mktemp("install"))


def run(home: Path, *args: str, cwd: Path | None = None, **env: str | None) -> Any:
    """The command in ``home`` (from ``cwd``), its exit code checked by the caller."""
    here = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        return CliRunner().invoke(cli, list(args), env=env_of(home, **env))
    finally:
        os.chdir(here)


def hooks_of(path: Path) -> list[inst.Hook]:
    return inst.ours_in(json.loads(path.read_bytes().decode("utf-8-sig")))


def test_install_status_uninstall_leave_the_rest_byte_identical(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "app"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(ODD)

    done = run(home, "guard", "install", "--policy", POLICY, cwd=project)
    assert done.exit_code == 0, done.output
    assert f"installed in {settings} (PostToolUse)" in done.output
    backup = settings.with_name("settings.json" + inst.BACKUP_SUFFIX)
    assert backup.read_bytes() == ODD and str(backup) in done.output
    after = json.loads(settings.read_bytes())
    before = json.loads(ODD)
    # Everything of the user's is there as it was; ours is one more group on PostToolUse.
    assert {k: v for k, v in after.items() if k != "hooks"} == {
        k: v for k, v in before.items() if k != "hooks"
    }
    assert after["hooks"]["Stop"] == before["hooks"]["Stop"]
    assert after["hooks"]["PostToolUse"][0] == before["hooks"]["PostToolUse"][0]
    [ours] = hooks_of(settings)
    assert ours.event == "PostToolUse" and ours.matcher == "*"
    assert ours.option("--policy") == POLICY and Path(ours.program).is_absolute()
    text = settings.read_bytes().decode()
    assert "\r\n\t\t" in text and not text.endswith("\n") and "grüß" in text  # its style

    again = run(home, "guard", "install", "--policy", POLICY, cwd=project)
    assert again.exit_code == 0, again.output
    assert "already installed" in again.output
    assert len(hooks_of(settings)) == 1

    status = run(home, "guard", "status", "--json", cwd=project)
    assert status.exit_code == 0, status.output
    files = {f["scope"]: f for f in json.loads(status.output)["files"]}
    assert files["project"]["file"] == str(settings) and files["project"]["installed"]
    [said] = files["project"]["hooks"]
    assert said["policy"] == POLICY and said["program_runs"] is True
    assert said["command"] == ours.command
    assert not files["user"]["installed"] and not files["user"]["file_exists"]
    shown = run(home, "guard", "status", cwd=project)
    assert f"policy {POLICY} (PostToolUse, matcher *)" in shown.output
    assert "exists and is executable" in shown.output and "user: " in shown.output

    gone = run(home, "guard", "uninstall", cwd=project)
    assert gone.exit_code == 0, gone.output
    assert settings.read_bytes() == ODD
    assert not backup.exists()
    assert "as it was before" in gone.output
    nothing = run(home, "guard", "uninstall", cwd=project)
    assert nothing.exit_code == 0 and "nothing to remove" in nothing.output
    assert settings.read_bytes() == ODD


def test_another_policy_replaces_ours_and_a_changed_file_loses_only_ours(
    home: Path, tmp_path: Path
) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_bytes(ODD)
    first = run(home, "guard", "install", "--policy", POLICY, "--project", str(tmp_path))
    assert first.exit_code == 0, first.output
    swap = run(home, "guard", "install", "--policy", OTHER, "--project", str(tmp_path))
    assert swap.exit_code == 0, swap.output
    assert f"--policy {POLICY}" in swap.output and "replace" in swap.output
    [ours] = hooks_of(settings)
    assert ours.option("--policy") == OTHER
    # The backup is still the file before the first install.
    assert settings.with_name("settings.json" + inst.BACKUP_SUFFIX).read_bytes() == ODD
    # The user changes the file meanwhile: uninstall keeps that and removes only ours.
    changed = json.loads(settings.read_bytes())
    changed["theme"] = "dark"
    settings.write_text(json.dumps(changed, indent=4), encoding="utf-8")
    gone = run(home, "guard", "uninstall", "--project", str(tmp_path))
    assert gone.exit_code == 0, gone.output
    assert "without it" in gone.output
    left = json.loads(settings.read_bytes())
    assert left == {**json.loads(ODD), "theme": "dark"}
    assert settings.read_text(encoding="utf-8").startswith('{\n    "permissions"')


def test_user_install_follows_claude_config_dir_and_the_command_runs(
    home: Path, tmp_path: Path
) -> None:
    config = tmp_path / "claude-config"
    done = run(
        home, "guard", "install", "--policy", POLICY, "--user", CLAUDE_CONFIG_DIR=str(config)
    )
    assert done.exit_code == 0, done.output
    settings = config / "settings.json"
    assert not (home / ".claude" / "settings.json").exists()
    [ours] = hooks_of(settings)
    assert Path(ours.program).is_absolute() and os.access(ours.program, os.X_OK)
    status = run(home, "guard", "status", "--json", CLAUDE_CONFIG_DIR=str(config))
    user = next(f for f in json.loads(status.output)["files"] if f["scope"] == "user")
    assert user["file"] == str(settings) and user["hooks"][0]["policy"] == POLICY
    # The command as written, run as Claude Code runs it, on a real loop's transcript.
    transcript = sorted((shared_samples() / "real-loops" / "claude_code").rglob("*.jsonl"))[0]
    payload = json.dumps({"transcript_path": str(transcript), "hook_event_name": "PostToolUse"})
    ran = subprocess.run(
        ours.command, shell=True, input=payload, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "" or "continue" in json.loads(ran.stdout) or json.loads(ran.stdout)
    assert "(going on)" not in ran.stderr
    gone = run(home, "guard", "uninstall", "--user", CLAUDE_CONFIG_DIR=str(config))
    assert gone.exit_code == 0, gone.output
    assert not settings.exists()  # we made it: it goes


@pytest.fixture(scope="module")
def loops(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fake home of the real Claude Code sessions with labelled loops."""
    home = tmp_path_factory.mktemp("loops") / "home"
    for i, f in enumerate(sorted(shared_samples().glob("real-loops*/claude_code/*/*.jsonl"))):
        project = home / ".claude" / "projects" / f"-home-x-app{i}"
        project.mkdir(parents=True)
        shutil.copy2(f, project / f.name)
    return home


@pytest.mark.parametrize("which", ["home", "loops"])
def test_the_install_says_what_the_backtest_says(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    where: Path = request.getfixturevalue(which)
    policy = POLICY if which == "home" else "session_cost_cap"
    done = run(where, "guard", "install", "--policy", policy, "--project", str(tmp_path))
    assert done.exit_code == 0, done.output
    tested = run(where, "backtest", "--only", policy, "--json", "--no-refresh")
    assert tested.exit_code == 0, tested.output
    [r] = json.loads(tested.stdout, parse_float=Decimal)
    if which == "loops":
        assert r["false_trips"] > 0  # (a line with figures in it, not only zeros)
    line = next(x for x in done.output.splitlines() if x.startswith("on your history"))
    assert line == f"on your history, {policy} {outcome(_result(r))}"
    assert f"({r['incidents_stopped']} of {r['incidents_total']} incidents)" in line
    assert f"{r['false_trips']} false trip(s) killing {money(r['usd_false_trips'])}" in line


def test_recommend_installs_nothing_when_no_guard_saves_a_cent(loops: Path, tmp_path: Path) -> None:
    done = run(loops, "guard", "install", "--recommend", "--project", str(tmp_path))
    assert done.exit_code == 0, done.output
    said = run(loops, "backtest", "--recommend", "--json", "--no-refresh")
    answer = json.loads(said.stdout)
    assert answer["recommendation"] is None  # (these loops: no guard saves money on them)
    assert done.stdout.splitlines() == [answer["reason"], "nothing installed"]
    assert not (tmp_path / ".claude").exists()


def _result(r: dict[str, Any]) -> Result:
    """The backtest's JSON record read back as a result, for ``outcome``."""
    names = set(Result.__dataclass_fields__)
    return Result(**{k: v for k, v in r.items() if k in names})


def test_no_history_is_said_and_installed_anyway(tmp_path: Path) -> None:
    empty = tmp_path / "home"
    empty.mkdir()
    done = run(empty, "guard", "install", "--policy", POLICY, "--project", str(tmp_path))
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[0] == (
        "no history to backtest the policy on yet (no agent logs found)"
    )
    assert len(hooks_of(tmp_path / ".claude" / "settings.json")) == 1
    none = run(empty, "guard", "install", "--recommend", "--project", str(tmp_path / "b"))
    assert none.exit_code == 0 and "nothing installed" in none.output
    assert not (tmp_path / "b" / ".claude").exists()


def test_bad_settings_and_bad_usage_write_nothing(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    bad = b'{\n  "model": "opus",\n  "hooks": {,}\n}\n'
    settings.write_bytes(bad)
    done = run(tmp_path, "guard", "install", "--policy", POLICY, "--project", str(tmp_path))
    assert done.exit_code == 3
    [line] = done.output.strip().splitlines()
    assert f"{settings}:3:" in line and "not valid JSON" in line
    assert settings.read_bytes() == bad and not list(settings.parent.glob("*.bak"))
    unknown = run(tmp_path, "guard", "install", "--policy", "nope", "--project", str(tmp_path))
    assert unknown.exit_code == 2 or unknown.exit_code == 3
    both = run(tmp_path, "guard", "install", "--policy", POLICY, "--recommend")
    assert both.exit_code == 2
    two = run(tmp_path, "guard", "uninstall", "--user", "--project", str(tmp_path))
    assert two.exit_code == 2 and settings.read_bytes() == bad


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        "guard",
        "install",
        "--policy",
        POLICY,
        "--project",
        str(tmp_path),
        "--dry-run",
        "--no-refresh",
    )
    assert done.exit_code == 0, done.output
    assert "not backtested on your history" in done.output
    assert "would install" in done.output and not (tmp_path / ".claude").exists()


# -- the merge, file style by style -----------------------------------------------------------

STYLES = [
    b'{"a":1,"hooks":{"PreToolUse":[]}}',
    b'{"a": 1, "b": [1, 2]}\n',
    b'{\n  "a": 1\n}\n',
    b'{\n\t"a": "\\u00e9"\n}',
    b"",
    b'\xef\xbb\xbf{\r\n    "a": {"b": null}\r\n}\r\n',
]


@pytest.mark.parametrize("before", STYLES)
def test_install_then_uninstall_is_the_same_bytes(tmp_path: Path, before: bytes) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(before)
    command = inst.hook_command(POLICY)
    change = inst.install(path, command)
    assert change.changed and len(hooks_of(path)) == 1
    assert inst.install(path, command).changed is False
    removed = inst.uninstall(path)
    assert removed.restored and path.read_bytes() == before


@pytest.mark.parametrize("before", [s for s in STYLES if s.strip()])
def test_a_file_changed_since_keeps_its_style(tmp_path: Path, before: bytes) -> None:
    """A file changed since the install loses ours (and the hooks object we made) and is
    written in its style."""
    path = tmp_path / "settings.json"
    path.write_bytes(before)
    inst.install(path, inst.hook_command(POLICY))
    now, style = inst.parse(path.read_bytes(), path)
    path.write_bytes(inst.render({**now, "theme": "dark"}, style))
    assert not inst.uninstall(path).restored
    settings, _ = inst.parse(before, path)
    assert inst.parse(path.read_bytes(), path)[0] == {**settings, "theme": "dark"}
    assert inst.style_of(path.read_bytes().decode()) == inst.style_of(before.decode())


def test_the_merge_leaves_other_hooks_and_matchers() -> None:
    mine = {"type": "command", "command": "lint"}
    settings: dict[str, Any] = {
        "hooks": {
            "PostToolUse": [
                {
                    "matcher": "*",
                    "hooks": [
                        mine,
                        {"type": "command", "command": "x guard claude-hook --policy a"},
                    ],
                },
                {
                    "matcher": "Bash",
                    "hooks": [{"type": "command", "command": "y guard claude-hook --policy b"}],
                },
            ],
            "PreToolUse": [
                {"matcher": "*", "hooks": [{"type": "command", "command": "z guard claude-hook"}]}
            ],
            "Stop": [],
        }
    }
    new, replaced = inst.with_hook(settings, "me guard claude-hook --policy c")
    assert replaced == [
        "x guard claude-hook --policy a",
        "y guard claude-hook --policy b",
        "z guard claude-hook",
    ]
    assert new["hooks"] == {
        "PostToolUse": [
            {
                "matcher": "*",
                "hooks": [mine, {"type": "command", "command": "me guard claude-hook --policy c"}],
            }
        ],
        "Stop": [],
    }
    assert settings["hooks"]["PreToolUse"]  # the input is not changed
    out, removed = inst.without_hooks(new)
    assert removed == ["me guard claude-hook --policy c"]
    assert out["hooks"] == {"PostToolUse": [{"matcher": "*", "hooks": [mine]}], "Stop": []}


def test_settings_that_are_not_settings_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    for data, said in [
        (b"[1]", "not a JSON object"),
        (b'{"hooks": []}', '"hooks" is not a JSON object'),
        (b'{"hooks": {"PostToolUse": {}}}', '"hooks"."PostToolUse" is not a JSON list'),
        (b'{\n"a": 1,\n}', "not valid JSON"),
    ]:
        path.write_bytes(data)
        with pytest.raises(ForensicsError, match=said):
            inst.install(path, inst.hook_command(POLICY))
        assert path.read_bytes() == data
