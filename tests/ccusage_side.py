"""ccusage 20 beside us on the same home (issue 50): a fake home holding the real Claude Code
transcripts of ``../shared/samples/real-world`` where Claude Code keeps them, and ccusage
(installed with npm, pinned as the benchmark pins it) run on it.

``real_world_home(root)`` lays the transcripts out as ``~/.claude/projects/<project>/<file>``:
the spotter worktrees keep their own project folders (with their sub-agents), each other
repository's files become one project. ``ccusage_command(work)`` installs ccusage into
``work`` (or takes ``$LLM_FORENSICS_CCUSAGE``, a ccusage executable); outside CI, a machine
without npm skips the tests that need it, under CI that is a failure. ``ccusage_json`` runs
one view (``daily``, ``weekly``, ``monthly``, ``session``, ``blocks``) with ``--json
--offline -z UTC`` and gives its answer.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, shared_samples


# Where the tests install ccusage: one folder for every test worker of a run.
def ccusage_work(factory: pytest.TempPathFactory) -> Path:
    """The folder a test run installs ccusage into (shared by its xdist workers)."""
    return factory.getbasetemp().parent / "ccusage"


# The real-world Claude Code folders, and the project each becomes (None: the folder's own
# sub-folders are the projects, as on the machine the files came from).
PROJECTS: dict[str, str | None] = {
    "marot__spotter": None,
    "jnarowski__agentcmd": "-home-jn-projects-agentcmd",
    "daaain__claude-code-log__handwritten": "-home-dd-projects-claude-code-log",
}


def real_world_home(root: Path) -> Path:
    """A home folder with the real-world Claude Code transcripts in ``~/.claude/projects``."""
    source = shared_samples() / "real-world" / "claude_code"
    projects = root / "home" / ".claude" / "projects"
    projects.mkdir(parents=True)
    for folder, project in PROJECTS.items():
        if project is None:
            for sub in sorted((source / folder).glob("-home-*")):
                shutil.copytree(sub, projects / sub.name)
            misc = projects / "-home-marco-projects-spotter"
            misc.mkdir()
            for f in sorted((source / folder / "misc").glob("*.jsonl")):
                shutil.copy2(f, misc / f.name)
        else:
            (projects / project).mkdir()
            for f in sorted((source / folder).glob("*.jsonl")):
                shutil.copy2(f, projects / project / f.name)
    return root / "home"


def ccusage_command(work: Path) -> tuple[list[str], str]:
    """The command that runs ccusage 20 and its version; a skip (a failure under CI) when it
    cannot be installed here. ``work`` may be shared by test workers: one installs at a time."""
    named = os.environ.get("LLM_FORENSICS_CCUSAGE")
    if named:
        exe: list[str] | None = [named]
        version = subprocess.run(
            [named, "--version"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
    else:
        sys.path.insert(0, str(REPO / "bench"))
        try:
            import agent_logs  # type: ignore[import-not-found]
        finally:
            sys.path.remove(str(REPO / "bench"))
        work.mkdir(parents=True, exist_ok=True)
        with open(work / "install.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            exe, version = agent_logs.ccusage(work)
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail(f"ccusage cannot run here: {version}")
        pytest.skip(f"ccusage cannot run here: {version}")
    return exe, version


def ccusage_json(command: list[str], home: Path, view: str) -> dict[str, Any]:
    """ccusage's ``VIEW --json`` on ``home``'s Claude Code history, days in UTC."""
    env = {**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}
    env.pop("CODEX_HOME", None)
    done = subprocess.run(
        [*command, view, "--json", "--offline", "-z", "UTC"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=True,
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer
