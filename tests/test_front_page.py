"""The README is a front page (issue 50): short, its examples run as written, and its install
for a machine with only Python puts ``llm-forensics`` on the PATH of a new shell.

The examples are the ```` ```console ```` blocks: a line ``$ COMMAND`` is run, the lines under it
up to the next ``$`` are what it prints (stdout and stderr, as a terminal shows them), a line
``...`` stands for lines left out. They run in order, in one working folder holding
``sample_data/``, each in a fresh ``bash -c`` with ``HOME`` a home of the real-world Claude
Code transcripts (``tests/ccusage_side.real_world_home``) and ``PATH`` holding this project's
installed ``llm-forensics``. Each must exit 0, and each line shown must be a line of what it
printed, in the order shown."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.ccusage_side import real_world_home
from tests.helpers import REPO

README = REPO / "README.md"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass
class Example:
    command: str
    shown: list[str] = field(default_factory=list)


def readme() -> str:
    return README.read_text(encoding="utf-8")


def examples(text: str) -> list[Example]:
    """The ``$`` commands of the README's console blocks, each with the lines shown under it."""
    found: list[Example] = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                found.append(Example(line[2:]))
            elif found:
                found[-1].shown.append(line)
    return found


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", text, flags=re.S)


def missing_lines(shown: list[str], printed: str) -> list[str]:
    """The lines shown (not ``...``, not blank) that are not lines of ``printed`` in that order."""
    lines = [line.rstrip() for line in printed.splitlines()]
    at, missing = 0, []
    for want in shown:
        if want.strip() in ("", "..."):
            continue
        try:
            at = lines.index(want.rstrip(), at) + 1
        except ValueError:
            missing.append(want)
    return missing


def test_the_readme_is_a_front_page() -> None:
    lines = readme().splitlines()
    assert 150 <= len(lines) <= 250, len(lines)
    assert "nothing to set up" not in readme().lower()


def test_the_front_page_reads_on_in_the_docs() -> None:
    linked = set(re.findall(r"\]\((docs/[a-z-]+\.md)\)", readme()))
    assert linked == {
        f"docs/{name}.md"
        for name in (
            "commands",
            "formats",
            "costs",
            "detectors",
            "guards",
            "report",
            "reliability",
            "performance",
            "scale-out",
            "development",
            "architecture",
        )
    }


def test_the_examples_are_parsed_as_written() -> None:
    found = examples(readme())
    commands = [e.command for e in found]
    # the tour on one's own data, then the sample's store
    assert commands[:5] == [
        "llm-forensics daily",
        "llm-forensics incidents",
        "llm-forensics show 1",
        "llm-forensics backtest --recommend",
        "llm-forensics report -o report.html",
    ]
    assert "llm-forensics audit sample_data/ --db sample.duckdb" in commands
    assert all(e.shown for e in found)
    assert missing_lines(["a", "...", "c"], "a\nb\nc\n") == []
    assert missing_lines(["c", "a"], "a\nb\nc\n") == ["a"]


def run_examples(root: Path) -> Iterator[tuple[Example, subprocess.CompletedProcess[str]]]:
    """Each example of the README run as the module's docstring says, in ``root``."""
    home = real_world_home(root / "fake")
    work = root / "work"
    work.mkdir()
    (work / "sample_data").symlink_to(REPO / "sample_data")
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "llm-forensics").is_file(), "the project is not installed beside python"
    env = {**os.environ, "HOME": str(home), "PATH": f"{bin_dir}:{SYSTEM_PATH}"}
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "LLM_FORENSICS_DB", "LLM_FORENSICS_ROOTS"):
        env.pop(name, None)
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "COLUMNS", "LINES", "NO_COLOR"):
        env.pop(name, None)
    for example in examples(readme()):
        done = subprocess.run(
            ["bash", "-c", example.command],
            cwd=work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        yield example, done


def test_each_example_runs_as_written(tmp_path: Path) -> None:
    for example, done in run_examples(tmp_path):
        assert done.returncode == 0, (example.command, done.stdout[-2000:])
        assert missing_lines(example.shown, done.stdout) == [], (example.command, done.stdout)
    work, home = tmp_path / "work", tmp_path / "fake" / "home"
    assert (work / "report.html").stat().st_size > 0
    assert (work / "sample.duckdb").is_file()
    assert (home / ".local" / "share" / "llm-forensics" / "forensics.duckdb").is_file()


def fresh_machine_install(text: str) -> tuple[str, str]:
    """The README's install for a machine with only Python, and its line that puts
    ``~/.local/bin`` on PATH."""
    (install,) = [b for b in sh_blocks(text) if "python3 -m venv ~/" in b]
    (path,) = [b for b in sh_blocks(text) if "export PATH=" in b]
    return install, path


def real_pip_cache() -> str:
    """The pip cache of whoever runs the tests (the fake home starts with none)."""
    return os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")


@pytest.mark.slow  # installs the project and its dependencies into a venv (pip's cache helps)
def test_the_install_puts_the_command_on_path_in_a_new_shell(tmp_path: Path) -> None:
    install, path_line = fresh_machine_install(readme())
    home = tmp_path / "home"
    home.mkdir()
    # A machine with only Python: python3 on PATH, nothing else of this project's.
    tools = tmp_path / "python-only"
    tools.mkdir()
    (tools / "python3").symlink_to(Path(getattr(sys, "_base_executable", sys.executable)))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))},
        "HOME": str(home),
        "PATH": f"{tools}:{SYSTEM_PATH}",
        "PIP_CACHE_DIR": real_pip_cache(),
    }
    env.pop("XDG_DATA_HOME", None)
    assert shutil.which("llm-forensics", path=env["PATH"]) is None
    for step in (install, path_line):
        done = subprocess.run(
            ["bash", "-c", f"set -e\n{step}"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, (step, done.stdout[-2000:], done.stderr[-2000:])
    # A new login shell, started with the system's PATH only: the profile adds ~/.local/bin.
    fresh = {**env, "PATH": SYSTEM_PATH}
    done = subprocess.run(
        ["bash", "-lc", "command -v llm-forensics && llm-forensics --version"],
        cwd=tmp_path,
        env=fresh,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    found, version = done.stdout.splitlines()
    assert found == str(home / ".local" / "bin" / "llm-forensics")
    assert version.startswith("llm-forensics, version ")


if __name__ == "__main__":
    # What each example prints today, to copy into the README when a command's output changes
    # (python -m tests.test_front_page); the lines shown there are a choice of these.
    with tempfile.TemporaryDirectory() as scratch:
        for example, done in run_examples(Path(scratch)):
            print(f"$ {example.command}   # exit {done.returncode}")
            print(done.stdout, end="")
