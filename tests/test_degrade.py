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
import pwd
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import OFFLINE
from tests.helpers import AGENT_HOME_VARIABLES, _as_an_ordinary_user, env_of, shared_samples
from tests.test_default_store import OTHER_CC, daily, store_of
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
        "154 records loaded (usage first: 40 lines left for a command that needs their content); "
        "1 could not be read (said above)",
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


# -- a store that cannot be written -------------------------------------------------------------


@pytest.mark.parametrize("what", ["folder", "file"])
def test_a_read_only_store_is_read_as_it_is(home: Path, what: str) -> None:
    """The store's folder (where DuckDB writes its journal) or the store file may not be
    written: readers read it as it is and say so, a writer says why not in one line; the file
    is left byte for byte."""
    assert daily(CliRunner(), home)["totals"]["calls"] == 65
    project = home / ".claude" / "projects" / "-home-me-app"
    (project / "new.jsonl").write_bytes((shared_samples() / OTHER_CC).read_bytes())
    store = store_of(home)
    locked = store.parent if what == "folder" else store
    before = sha(store)
    locked.chmod(0o555 if what == "folder" else 0o444)
    try:
        shown = llm_forensics(home, "usage", "daily", "--json")
        written = llm_forensics(home, "ingest")
    finally:
        locked.chmod(0o755 if what == "folder" else 0o644)
    assert shown.returncode == 0, shown.stderr
    [said] = shown.stderr.splitlines()
    assert said.startswith(
        "refresh skipped: ~/.local/share/llm-forensics/forensics.duckdb cannot be written "
        f"({'its folder' if what == 'folder' else 'the file'} is not writable for this user); "
        "what follows is what it held at its last refresh, "
    )
    assert json.loads(shown.stdout)["totals"]["calls"] == 65  # (not the new transcript)
    assert written.returncode == 3, written.stderr
    [error] = written.stderr.splitlines()
    assert error.startswith(f"Error: {store}: this store cannot be written: ")
    assert sha(store) == before and not store.with_name(store.name + ".wal").exists()


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs, to be made read-only (``mount -o remount,ro``) when the test says."""
    where = tmp_path / "mnt"
    where.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m,mode=777", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip()}); the chmod cases run")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_a_default_store_on_a_read_only_mount_is_read_as_it_is(home: Path, mount: Path) -> None:
    store = mount / "team.duckdb"
    made = llm_forensics(home, "usage", "daily", LLM_FORENSICS_DB=str(store))
    assert made.returncode == 0, made.stderr
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    project = home / ".claude" / "projects" / "-home-me-app"
    (project / "new.jsonl").write_bytes((shared_samples() / OTHER_CC).read_bytes())
    shown = llm_forensics(home, "incidents", "--json", LLM_FORENSICS_DB=str(store))
    assert shown.returncode == 0, shown.stderr
    [said] = shown.stderr.splitlines()
    assert said.startswith(
        f"refresh skipped: {store} cannot be written (the file system is read-only); "
        "what follows is what it held at its last refresh, "
    )
    assert json.loads(shown.stdout) == []
    detected = llm_forensics(home, "detect", LLM_FORENSICS_DB=str(store))
    assert detected.returncode == 3
    assert detected.stderr.splitlines() == [
        f"Error: {store}: this store cannot be written: the file system is read-only; the "
        "commands that only read it (usage, incidents, show, report, backtest, export) still can"
    ]


# -- a store path that is no file ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_a_store_that_is_no_file_is_one_line_never_a_hang(
    home: Path, tmp_path: Path, kind: str
) -> None:
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path = Path(os.devnull)
    said = {"fifo": "a named pipe (FIFO)", "folder": "a folder", "device": "a device"}[kind]
    line = f"Error: {path}: not a store: it is {said}, not a file "
    by_variable = llm_forensics(home, "usage", "daily", timeout=60, LLM_FORENSICS_DB=str(path))
    by_option = llm_forensics(home, "incidents", "--db", str(path), timeout=60)
    for result in (by_variable, by_option):
        assert result.returncode == 3, result.stderr
        [error] = result.stderr.splitlines()
        assert error.startswith(line), error


# -- ~user ------------------------------------------------------------------------------------


def test_tilde_user_in_the_variable_is_that_users_home(
    runner: CliRunner, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``~lf-colleague/team.duckdb`` is in that user's home, as a shell reads it (no folder
    named ``~lf-colleague`` made where the command runs); a user that does not exist is one
    line."""
    theirs = tmp_path / "colleague"
    theirs.mkdir()
    real = pwd.getpwnam

    def getpwnam(name: str) -> pwd.struct_passwd:
        if name == "lf-colleague":
            return pwd.struct_passwd(("lf-colleague", "x", 4242, 4242, "", str(theirs), ""))
        return real(name)

    monkeypatch.setattr(pwd, "getpwnam", getpwnam)
    monkeypatch.chdir(tmp_path)
    env = env_of(home, LLM_FORENSICS_DB="~lf-colleague/team.duckdb")
    done = runner.invoke(cli, ["usage", "daily"], env=env, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert (theirs / "team.duckdb").exists()
    env = env_of(home, LLM_FORENSICS_DB="~lf-nobody-here/team.duckdb")
    refused = runner.invoke(cli, ["usage", "daily"], env=env, catch_exceptions=False)
    assert refused.exit_code == 3
    assert refused.stderr.splitlines() == [
        "Error: $LLM_FORENSICS_DB = '~lf-nobody-here/team.duckdb': there is no user "
        "'lf-nobody-here' on this machine, so ~lf-nobody-here is no home folder; give the "
        "store's full path"
    ]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("~")]


# -- Ctrl-C while the copy of the store is made -------------------------------------------------

# The CLI with the copy of the default store slowed down: part of it written, a line on
# stderr, and the rest under way until Ctrl-C comes.
_COPY_UNDER_WAY = """
import shutil, sys, time
def copyfile(src, dst, **kwargs):
    with open(src, "rb") as whole, open(dst, "wb") as part:
        part.write(whole.read(4096))
    sys.stderr.write("lf-test: copying\\n")
    sys.stderr.flush()
    while True:
        time.sleep(0.01)
shutil.copyfile = copyfile
from analyzer.cli.main import main
main()
"""


def test_ctrl_c_while_the_copy_is_made(home: Path) -> None:
    """The refresh is stored before the copy is made: the line says so (not "the step under
    way was not stored"), and no partial ``.last.tmp`` is left."""
    environ = {k: v for k, v in os.environ.items() if k not in AGENT_HOME_VARIABLES}
    environ["HOME"] = str(home)
    child = subprocess.Popen(
        [sys.executable, "-c", _COPY_UNDER_WAY, "usage", "daily"],
        cwd=home.parent,
        env=environ,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert child.stderr is not None
    said = b""
    try:
        deadline = time.monotonic() + 120
        while b"lf-test: copying" not in said:
            assert child.poll() is None, said.decode()
            assert time.monotonic() < deadline, said.decode()
            if select.select([child.stderr], [], [], 0.05)[0]:
                said += os.read(child.stderr.fileno(), 65536)
        os.killpg(child.pid, signal.SIGINT)
        rest = child.communicate(timeout=60)[1]
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    lines = (said + rest).decode().splitlines()
    assert child.returncode == 130, lines
    assert "Traceback" not in "\n".join(lines)
    assert lines == [
        "refresh: read 2 new files (0 unchanged) from ~/.claude/projects, ~/.codex/sessions, "
        "154 records loaded (usage first: 40 lines left for a command that needs their content)",
        "lf-test: copying",
        "interrupted: the store holds this run's work; its copy for readers "
        "(forensics.duckdb.last) is as it was (the next refresh brings it up to date)",
    ]
    store = store_of(home)
    assert len(sources(store)) == 2
    assert not store.with_name("forensics.duckdb.last.tmp").exists()
    assert not store.with_name("forensics.duckdb.last").exists()
