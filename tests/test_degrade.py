"""Degrade, don't abort (issue 45, cause 8 and part of 12): an unreadable folder under the
agents' places is one warning and the rest is read; a default store that cannot be written (a
read-only mount, a read-only folder or file) is read as it is, saying so; a store path that
is no file (a named pipe, a folder, a device) is one line, never a hang; ``~user`` in
``$LLM_FORENSICS_DB`` is that user's home; Ctrl-C while the default store's copy is made says
what is true and leaves no partial copy.

Each command runs in its own process, as a user runs it (as an ordinary user: these machines
run the tests as root, who may read and write anything; ``tests.helpers._as_an_ordinary_user``),
with a fake home (``tests.test_own_data.fake_home``)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from analyzer.engine.store import OFFLINE
from tests.helpers import AGENT_HOME_VARIABLES, _as_an_ordinary_user, shared_samples
from tests.test_default_store import OTHER_CC
from tests.test_own_data import fake_home

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="permissions, mounts and signals as on Linux"
)


def llm_forensics(
    home: Path, *args: str, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """The command in its own process, as an ordinary user, with ``home`` as its home and no
    agent or store variable set but ``env``."""
    environ = {k: v for k, v in os.environ.items() if k not in AGENT_HOME_VARIABLES}
    environ.update(HOME=str(home), **env)
    return subprocess.run(
        [sys.executable, "-m", "analyzer", *args],
        cwd=home.parent,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_as_an_ordinary_user,
    )


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sources(db: Path) -> list[str]:
    with duckdb.connect(str(db), read_only=True, config=OFFLINE) as con:
        return [p for (p,) in con.execute("SELECT path FROM sources ORDER BY path").fetchall()]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return fake_home(tmp_path)


# -- an unreadable folder -----------------------------------------------------------------------


@pytest.fixture
def locked(home: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A project folder under ~/.claude/projects that cannot be read (its mode the test's
    parameter: 000, or 444 - listed, not entered), with a transcript in it."""
    folder = home / ".claude" / "projects" / "-home-me-locked"
    folder.mkdir()
    (folder / "s.jsonl").write_bytes((shared_samples() / OTHER_CC).read_bytes())
    folder.chmod(request.param)
    try:
        yield folder
    finally:
        folder.chmod(0o755)


@pytest.mark.parametrize(
    "locked", [0o000, 0o444], ids=["no-access", "not-enterable"], indirect=True
)
def test_an_unreadable_folder_is_one_warning_and_the_rest_is_read(home: Path, locked: Path) -> None:
    warned = "warning: ~/.claude/projects/-home-me-locked: cannot read this folder: "
    warned += "permission denied (not read; the rest is)"
    shown = llm_forensics(home, "usage", "daily", "--json")
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.splitlines() == [
        warned,
        "refresh: read 2 new files (0 unchanged) from ~/.claude/projects, ~/.codex/sessions, "
        "187 records loaded; 1 could not be read (said above)",
    ]
    assert json.loads(shown.stdout)["totals"]["calls"] == 65  # all the rest
    # `ingest` of the default places: read, but not all of it (exit 4, as for a file).
    loaded = llm_forensics(home, "ingest")
    assert loaded.returncode == 4, loaded.stderr
    assert loaded.stderr.splitlines()[0] == warned
    # A folder the user names that cannot be read stays an error, as a named file does.
    named = llm_forensics(home, "ingest", "--db", "x.duckdb", str(locked))
    assert named.returncode == 3, named.stderr
    assert named.stderr.splitlines() == [
        f"Error: {locked}: cannot read this folder: permission denied"
    ]
