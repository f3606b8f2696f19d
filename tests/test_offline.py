"""Fully offline: a whole ``audit`` of the bundled sample runs with the network cut off and gives
exactly what it gives with the network there, so it never phones home, fetches prices or fonts,
or downloads a DuckDB extension.

The network is cut at two levels:

* Python: the CLI runs in a subprocess whose ``sitecustomize`` (``BOOTSTRAP`` below) replaces
  every way out through Python's ``socket`` module (connect, connect_ex, sendto, sendmsg,
  create_connection and the resolver functions) with a function that writes the attempt to a log
  and raises ``OSError``; an audit hook does the same for code that reaches the C ``_socket``
  module directly. The guard tries each of those ways itself when the process starts and again
  when it exits, so the log proves it was armed for the whole run: a guard that never loaded
  fails the test instead of passing it.
* OS: where ``unshare -n`` is allowed, the same guarded runs happen in a fresh network
  namespace (only a loopback interface, and that one down). This is the level that matters for
  DuckDB, whose C++ code would download an extension without going through Python.

Every run gets a fresh, empty ``$HOME`` (so no extension installed earlier under ``~/.duckdb``
can stand in for a download), and afterwards none may have created ``~/.duckdb``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from analyzer.engine.store import open_store
from tests.helpers import SAMPLE_DATA

# three whole audits, each in its own process: CI runs them; the default run audits the sample
# in many other tests
pytestmark = pytest.mark.slow

TIMEOUT = 300  # seconds for one audit run (about 10 s on a quiet machine)
GUARD_LOG_ENV = "OFFLINE_GUARD_LOG"
SAMPLE_FORMATS = {"openrouter_csv", "claude_code", "conversation_json", "nexus3_raw"}

# The ways out the bootstrap blocks; it tries every one of them at start-up and at exit, and each
# must be caught (recorded as an attempt with ``probe`` true and raising the guard's error).
GUARDS = {
    "create_connection",
    "getaddrinfo",
    "gethostbyname",
    "gethostbyname_ex",
    "gethostbyaddr",
    "getnameinfo",
    "socket.connect",
    "socket.connect_ex",
    "socket.sendto",
    "socket.sendmsg",
    "audit:socket.connect",
    "audit:socket.sendto",
    "audit:socket.getaddrinfo",
}

BOOTSTRAP = textwrap.dedent(
    r'''
    """Network guard for tests/test_offline.py, imported at start-up as ``sitecustomize``.

    Active only when $OFFLINE_GUARD_LOG names the log (one JSON object a line)."""
    import os

    if os.environ.get("OFFLINE_GUARD_LOG"):
        import _socket
        import atexit
        import errno
        import json
        import socket
        import sys

        _LOG = os.environ["OFFLINE_GUARD_LOG"]
        _state = {"probing": False, "phase": "start"}
        _AF_UNIX = getattr(socket, "AF_UNIX", None)

        class NetworkBlocked(OSError):
            pass

        def _record(event, **fields):
            entry = {"pid": os.getpid(), "event": event, "phase": _state["phase"],
                     "probe": _state["probing"], **fields}
            if event == "attempt" and not _state["probing"]:
                import traceback

                entry["stack"] = "".join(traceback.format_stack(limit=20)[:-2])
            with open(_LOG, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry, default=repr) + "\n")

        def _refuse(guard, args):
            _record("attempt", guard=guard, args=repr(args)[:300])
            raise NetworkBlocked(
                errno.ENETUNREACH, f"network access blocked by tests/test_offline.py ({guard})"
            )

        def _local(sock):
            # A Unix socket is local inter-process communication, not the network.
            return _AF_UNIX is not None and getattr(sock, "family", None) == _AF_UNIX

        def _guard_method(name):
            original = getattr(socket.socket, name, None)
            if original is None:
                return

            def guarded(self, *args, **kwargs):
                if _local(self):
                    return original(self, *args, **kwargs)
                _refuse("socket." + name, args)

            guarded.offline_guard = True
            setattr(socket.socket, name, guarded)

        def _guard_function(name):
            if not hasattr(socket, name):
                return

            def guarded(*args, **kwargs):
                _refuse(name, args)

            guarded.offline_guard = True
            setattr(socket, name, guarded)

        for _name in ("connect", "connect_ex", "sendto", "sendmsg"):
            _guard_method(_name)
        for _name in ("create_connection", "getaddrinfo", "gethostbyname", "gethostbyname_ex",
                      "gethostbyaddr", "getnameinfo"):
            _guard_function(_name)

        # Backstop for code that calls the C _socket module directly (bypassing the patches).
        _ON_SOCKET = {"socket.connect", "socket.sendto", "socket.sendmsg"}
        _RESOLVER = {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                     "socket.getnameinfo"}

        def _hook(event, args):
            if event in _ON_SOCKET:
                if not _local(args[0]):
                    _refuse("audit:" + event, args[1:])
            elif event in _RESOLVER:
                _refuse("audit:" + event, args)

        sys.addaudithook(_hook)

        _TARGET = ("192.0.2.1", 9)  # TEST-NET-1: reserved, never routed

        def _with_socket(kind, action, raw=False):
            sock = (_socket.socket if raw else socket.socket)(socket.AF_INET, kind)
            try:
                sock.settimeout(1)
                action(sock)
            finally:
                sock.close()

        _PROBES = {
            "create_connection": lambda: socket.create_connection(_TARGET, timeout=1),
            "getaddrinfo": lambda: socket.getaddrinfo("example.invalid", 80),
            "gethostbyname": lambda: socket.gethostbyname("example.invalid"),
            "gethostbyname_ex": lambda: socket.gethostbyname_ex("example.invalid"),
            "gethostbyaddr": lambda: socket.gethostbyaddr("192.0.2.1"),
            "getnameinfo": lambda: socket.getnameinfo(("192.0.2.1", 80), 0),
            "socket.connect": lambda: _with_socket(
                socket.SOCK_STREAM, lambda s: s.connect(_TARGET)),
            "socket.connect_ex": lambda: _with_socket(
                socket.SOCK_STREAM, lambda s: s.connect_ex(_TARGET)),
            "socket.sendto": lambda: _with_socket(
                socket.SOCK_DGRAM, lambda s: s.sendto(b"x", _TARGET)),
            "socket.sendmsg": lambda: _with_socket(
                socket.SOCK_DGRAM, lambda s: s.sendmsg([b"x"], [], 0, _TARGET)),
            "audit:socket.connect": lambda: _with_socket(
                socket.SOCK_STREAM, lambda s: s.connect(_TARGET), raw=True),
            "audit:socket.sendto": lambda: _with_socket(
                socket.SOCK_DGRAM, lambda s: s.sendto(b"x", _TARGET), raw=True),
            "audit:socket.getaddrinfo": lambda: _socket.getaddrinfo("example.invalid", 80),
        }

        def _probe():
            # Every way out must be caught by the guard: recorded, and refused with its error.
            _state["probing"] = True
            try:
                for name, attempt in _PROBES.items():
                    try:
                        attempt()
                    except NetworkBlocked:
                        continue
                    except BaseException as exc:  # a real network error: the guard missed it
                        _record("probe-failed", guard=name, error=repr(exc))
                    else:
                        _record("probe-failed", guard=name, error="no exception")
            finally:
                _state["probing"] = False

        def _where():
            try:
                netns = os.readlink("/proc/self/ns/net")
            except OSError:
                netns = None
            try:
                interfaces = sorted(name for _, name in socket.if_nameindex())
            except OSError:
                interfaces = None
            return {"netns": netns, "interfaces": interfaces}

        _record("start", **_where())
        _probe()
        _state["phase"] = "run"

        def _at_exit():
            _state["phase"] = "exit"
            patched = getattr(socket.socket.connect, "offline_guard", False)
            _probe()
            _record("exit", argv=sys.argv, still_patched=patched)

        atexit.register(_at_exit)
    '''
)

NETNS_PROBE = textwrap.dedent(
    """
    import errno, fcntl, json, os, socket, struct
    out = {"netns": os.readlink("/proc/self/ns/net"),
           "interfaces": sorted(name for _, name in socket.if_nameindex())}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    req = struct.pack("16sH", b"lo", 0)
    out["lo_up"] = bool(struct.unpack("16sH", fcntl.ioctl(s.fileno(), 0x8913, req))[1] & 1)
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.settimeout(5)
    try:
        t.connect(("192.0.2.1", 80))
        out["connect"] = "connected"
    except OSError as exc:
        out["connect"] = errno.errorcode.get(exc.errno, repr(exc))
    print(json.dumps(out))
    """
)


def _netns_prefix() -> tuple[list[str] | None, str]:
    """The command that runs a program in a fresh network namespace here, or None and why not."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None, "unshare(1) is not installed"
    errors = []
    # -n alone needs root (CAP_SYS_ADMIN); -rn gets it in a new user namespace, if allowed.
    for flags in (["-n"], ["-r", "-n"]):
        probe = subprocess.run(
            [unshare, *flags, "true"], capture_output=True, text=True, timeout=30, check=False
        )
        if probe.returncode == 0:
            return [unshare, *flags, "--"], ""
        errors.append(f"unshare {' '.join(flags)}: {probe.stderr.strip() or probe.returncode}")
    return None, "no network namespace allowed here (" + "; ".join(errors) + ")"


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("llm-forensics")
    return [str(script)] if script.exists() else [sys.executable, "-m", "analyzer"]


@dataclass
class Run:
    name: str
    cwd: Path
    home: Path
    proc: subprocess.Popen[bytes]
    log: Path | None
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)

    def finish(self) -> Run:
        try:
            self.returncode = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self.stdout = (self.cwd / "stdout.txt").read_text(encoding="utf-8")
        self.stderr = (self.cwd / "stderr.txt").read_text(encoding="utf-8")
        if self.log is not None and self.log.exists():
            text = self.log.read_text(encoding="utf-8")
            self.records = [json.loads(line) for line in text.splitlines() if line]
        return self

    def report(self, name: str = "report.html") -> str:
        return (self.cwd / name).read_text(encoding="utf-8")


@dataclass
class Runs:
    baseline: Run  # no guard at all: what the tool gives with the network there
    python: Run  # Python-level guard, throwaway store
    store: Run  # both levels (the OS one where allowed), --db to a store file
    netns: list[str] | None
    netns_reason: str


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("offline")
    site = root / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BOOTSTRAP, encoding="utf-8")
    netns, reason = _netns_prefix()
    import matplotlib  # its font cache, so that a fresh $HOME does not rebuild it in every run

    mpl_dir = matplotlib.get_cachedir()

    def start(name: str, args: list[str], guard: bool, cut: bool) -> Run:
        cwd = root / name
        home = cwd / "home"
        home.mkdir(parents=True)
        # Not the user's store ($LLM_FORENSICS_DB): without --db the store is a throwaway one.
        env = {k: v for k, v in os.environ.items() if k != "LLM_FORENSICS_DB"}
        env.update(HOME=str(home), MPLCONFIGDIR=mpl_dir)
        log = None
        if guard:
            log = cwd / "guard.jsonl"
            env[GUARD_LOG_ENV] = str(log)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
        prefix = netns if (cut and netns) else []
        with (
            open(cwd / "stdout.txt", "wb") as out,
            open(cwd / "stderr.txt", "wb") as err,
        ):
            proc = subprocess.Popen(
                [*prefix, *_cli(), "audit", str(SAMPLE_DATA), "--verbose", *args],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
        return Run(name, cwd, home, proc, log)

    report = ["-o", "report.html"]
    started = [
        start("baseline", report, guard=False, cut=False),
        start("python", report, guard=True, cut=False),
        start("store", [*report, "--db", "store.duckdb"], guard=True, cut=True),
    ]
    try:
        baseline, python, store = (run.finish() for run in started)
    finally:
        for run in started:
            if run.proc.poll() is None:
                run.proc.kill()
                run.proc.wait()
    return Runs(baseline, python, store, netns, reason)


_DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s)\b")


def _same_lines(got: str, want: str) -> bool:
    """Equal up to elapsed times (which differ between any two runs)."""
    return _DURATION.sub("<t>", got) == _DURATION.sub("<t>", want)


def test_baseline_audit_succeeds(runs: Runs) -> None:
    base = runs.baseline
    assert base.returncode == 0, base.stderr
    # It did the whole job: every format of the sample loaded, incidents found, a page written.
    loaded = set(re.findall(r"\[(\w+)\]\s+read [\d,]+\s+loaded [1-9]", base.stderr))
    assert loaded == SAMPLE_FORMATS, base.stderr
    assert "Incidents (" in base.stdout
    assert (base.cwd / "report.html").stat().st_size > 10_000


@pytest.mark.parametrize("which", ["python", "store"])
def test_guard_was_armed_for_the_whole_run(runs: Runs, which: str) -> None:
    """The guard loaded in the audit process itself, caught every way out it was meant to at
    start-up, and still did at exit (so it was there for everything in between)."""
    run = getattr(runs, which)
    mine = [r for r in run.records if r["pid"] == run.proc.pid]
    assert [r for r in mine if r["event"] == "start"], f"the guard never loaded: {run.records}"
    failed = [r for r in run.records if r["event"] == "probe-failed"]
    assert not failed, f"the guard let these through: {failed}"
    for phase in ("start", "exit"):
        caught = {
            r["guard"]
            for r in mine
            if r["event"] == "attempt" and r["probe"] and r["phase"] == phase
        }
        assert caught == GUARDS, f"{phase}: caught {sorted(caught)}, expected {sorted(GUARDS)}"
    [done] = [r for r in mine if r["event"] == "exit"]
    assert done["still_patched"], "something put socket.socket.connect back during the run"
    assert done["argv"][1:3] == ["audit", str(SAMPLE_DATA)]


@pytest.mark.parametrize("which", ["python", "store"])
def test_no_network_attempt(runs: Runs, which: str) -> None:
    run = getattr(runs, which)
    assert any(r["event"] == "start" for r in run.records), "no guard, so no evidence either way"
    attempts = [r for r in run.records if r["event"] == "attempt" and not r["probe"]]
    assert not attempts, "the audit tried to reach the network:\n" + "\n".join(
        f"{r['guard']}{r['args']}\n{r.get('stack', '')}" for r in attempts
    )


@pytest.mark.parametrize("which", ["python", "store"])
def test_offline_audit_gives_what_the_online_one_does(runs: Runs, which: str) -> None:
    run, base = getattr(runs, which), runs.baseline
    assert run.returncode == base.returncode, run.stderr
    assert run.stdout == base.stdout
    assert _same_lines(run.stderr, base.stderr), f"{run.stderr}\n---- baseline:\n{base.stderr}"
    assert run.report() == base.report(), "the offline run wrote a different page"


def test_runs_were_in_an_empty_network_namespace(runs: Runs) -> None:
    if runs.netns is None:
        pytest.skip(f"OS-level cut not possible, only the Python guard ran: {runs.netns_reason}")
    host_netns = os.readlink("/proc/self/ns/net")
    run = runs.store
    [start] = [r for r in run.records if r["pid"] == run.proc.pid and r["event"] == "start"]
    assert start["netns"] != host_netns, "the store run was in the host's network namespace"
    assert start["interfaces"] == ["lo"], start
    # And such a namespace really has no way out, even for code the Python guard cannot see.
    probe = subprocess.run(
        [*runs.netns, sys.executable, "-I", "-c", NETNS_PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found = json.loads(probe.stdout)
    assert found["netns"] != host_netns
    assert found["interfaces"] == ["lo"] and not found["lo_up"], found
    assert found["connect"] == "ENETUNREACH", found


@pytest.mark.parametrize("which", ["baseline", "python", "store"])
def test_no_duckdb_extension_installed(runs: Runs, which: str) -> None:
    """DuckDB installs extensions under ~/.duckdb; each run's $HOME started empty."""
    run = getattr(runs, which)
    assert not (run.home / ".duckdb").exists(), sorted((run.home / ".duckdb").rglob("*"))


@pytest.mark.parametrize("read_only", [False, True])
def test_store_never_autoinstalls_extensions(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "store.duckdb"
    open_store(path).close()
    with open_store(path, read_only=read_only) as store:
        install, load = store.one(
            "SELECT current_setting('autoinstall_known_extensions'), "
            "current_setting('autoload_known_extensions')"
        ) or (None, None)
    assert install is False, "open_store must SET autoinstall_known_extensions = false"
    assert load is False, "open_store must SET autoload_known_extensions = false"


# Attributes that make a browser fetch something. In this self-contained page each must point
# inside the page (#id) or carry its data (data:).
_FETCHING = {
    "src",
    "href",
    "xlink:href",
    "srcset",
    "action",
    "formaction",
    "poster",
    "data",
    "background",
    "ping",
    "manifest",
    "codebase",
    "longdesc",
    "usemap",
}
# URIs that only name something and are never fetched: XML namespaces of the inline SVG charts
# and the RDF metadata matplotlib writes into them.
_IDENTIFIERS = re.compile(r"^(xmlns(:.*)?|rdf:resource|rdf:about)$")
_CSS_URL = re.compile(r"url\(\s*(['\"]?)(.*?)\1\s*\)", re.IGNORECASE)


class _References(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.bad: list[str] = []
        self.links: list[str] = []
        self.css: list[str] = []
        self.csp: list[str] = []
        self._style = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "style":
            self._style += 1
        if tag in ("script", "iframe", "object", "embed", "base", "link"):
            self.bad.append(f"<{tag}> element")
        values = {name: (value or "").strip() for name, value in attrs}
        if tag == "meta" and values.get("http-equiv", "").lower() == "content-security-policy":
            self.csp.append(values.get("content", ""))
        for name, value in values.items():
            if name == "style":
                self.css.append(value)
            elif _IDENTIFIERS.match(name):
                continue
            elif tag == "a" and name in ("href", "xlink:href"):
                # A link is followed only when clicked; it loads nothing with the page.
                self.links.append(value)
                if value.lower().startswith(("javascript:", "data:")):
                    self.bad.append(f"<a {name}={value!r}>")
            elif name in _FETCHING:
                if value and not value.startswith(("#", "data:")):
                    self.bad.append(f"<{tag} {name}={value!r}>")
            elif "://" in value or value.startswith("//") or name.startswith("on"):
                self.bad.append(f"<{tag} {name}={value[:80]!r}>")

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._style = max(0, self._style - 1)

    def handle_data(self, data: str) -> None:
        if self._style:
            self.css.append(data)


def test_report_loads_nothing_from_outside(runs: Runs) -> None:
    """No external scripts, stylesheets, images, fonts or CSS url(...). The only http(s) URIs in
    the page are the SVG/RDF namespace names and the "Matplotlib vX, https://matplotlib.org/"
    credit text in each chart's <metadata>, none of them ever fetched; the template's own links
    are #anchors to the incident sections."""
    page = runs.python.report()
    refs = _References()
    refs.feed(page)
    refs.close()
    assert not refs.bad, refs.bad
    css = "\n".join(refs.css)
    assert "@import" not in css.lower() and "://" not in css
    for _, url in _CSS_URL.findall(css):
        assert url.startswith(("#", "data:")), f"CSS url({url})"
    external = [link for link in refs.links if not link.startswith("#")]
    assert not external, f"the page now links out (intended?): {external}"
    # Belt and braces: the page forbids the browser any fetch but inline styles and data: images.
    [csp] = refs.csp
    assert "default-src 'none'" in csp and "img-src data:" in csp, csp
