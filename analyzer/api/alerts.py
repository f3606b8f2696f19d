"""Alerts sent once: a cap's thresholds, a new incident, a stop (``watch`` and the Claude Code
hook share them).

An ``Alert`` is something to tell once: its key (what the record remembers), a plain line and
its JSON fields. A cap's value moving from ``before`` to ``after`` crosses levels of it
(``crossed``: 50%, 80% and 100% by default); each level is its own alert, keyed by (policy,
level, period), so a jump over two levels sends both, in order, one message each.

The record of the alerts sent (``AlertBook``) is ``alerts.jsonl`` in the data folder (beside
the default store's folder: ``llm-forensics`` under ``data_home``), one JSON line per alert. A
key is claimed (``first_time``) under an exclusive ``flock`` of that file, held while the file
is read and the line appended: of two processes claiming the same key at once, the second
waits for the first and then finds the key, so exactly one ever gets True. (Not SQLite: only
the engine runs SQL in this project, and a lock around a read and an append is all a claim
needs.) Where ``fcntl`` does not exist (Windows) the record is kept without the lock: one
process at a time is then once-only, two at once may both send.

The key is claimed before the alert is sent: a crash (or a failed send) after the claim loses
that one alert, never sends it twice. A record that cannot be written (a read-only folder) is
one line on stderr and the alert is not sent, rather than sent at every call.

Channels (``Notifier``): a desktop notification (``notify-send`` on Linux, ``osascript`` on
macOS; none there: skipped, said once with --verbose), a webhook (a JSON POST of ``{"text":
line, ...fields}``: Slack, Mattermost, Rocket.Chat and Discord's ``/slack`` URLs show
``text``) and ``watch --exec``'s program (``analyzer.api.exec_runner``). A failed send is one
line on stderr; the caller goes on.

Light on purpose: the hook imports it, so nothing here imports DuckDB or Arrow (the webhook's
``urllib.request`` is imported when a webhook is first sent).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

from analyzer.engine.default_store import FOLDER, data_home
from analyzer.model.formatting import cut, json_text, money, printable

if TYPE_CHECKING:
    from analyzer.api.exec_runner import ExecRunner
    from analyzer.guards.guard import Decision

try:
    import fcntl
except ImportError:  # pragma: no cover (Windows)
    fcntl = None  # type: ignore[assignment]

# The levels of a cap alerted by default (fractions of it).
LEVELS: tuple[float, ...] = (0.5, 0.8, 1.0)
# The record's file, in the tool's folder under the data folder.
RECORD = "alerts.jsonl"
# A webhook's time to answer (seconds), and the wait before its one retry.
WEBHOOK_TIMEOUT = 5.0
RETRY_WAIT = 1.0
# A desktop notifier's time to run (seconds).
DESKTOP_TIMEOUT = 5.0
# The title of a desktop notification.
TITLE = "llm-forensics"
# A name from a log in an alert's line, at most (characters).
NAME_WIDTH = 48


def on_stderr(line: str) -> None:
    """An alert's own problem (a webhook down), one line on stderr."""
    sys.stderr.write(printable(f"llm-forensics alert: {line}") + "\n")
    sys.stderr.flush()


def record_path(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """Where the record of alerts sent is: ``llm-forensics/alerts.jsonl`` in the data folder.

    >>> str(record_path({"XDG_DATA_HOME": "/x"}, Path("/h")))
    '/x/llm-forensics/alerts.jsonl'
    """
    env = os.environ if env is None else env
    return data_home(env, home or Path.home()) / FOLDER / RECORD


def parse_levels(text: str) -> tuple[float, ...]:
    """``--alert-at``'s percents of a cap, as fractions, sorted and without repeats.

    >>> parse_levels("50,80,100"), parse_levels(" 100, 75 ")
    ((0.5, 0.8, 1.0), (0.75, 1.0))
    """
    try:
        found = {float(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise ValueError(f"{text!r}: give percents of the cap, e.g. 50,80,100") from None
    if not found or any(not 0 < x <= 1000 for x in found):
        raise ValueError(f"{text!r}: give percents above 0 (at most 1000), e.g. 50,80,100")
    return tuple(sorted(x / 100 for x in found))


@dataclass(frozen=True)
class Alert:
    """One thing to tell once: ``key`` (what the record remembers), its plain ``line``, and
    its ``fields`` (JSON: what ``--exec`` reads, and the webhook's body beside ``text``)."""

    key: str
    line: str
    fields: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """The webhook's JSON: the line as ``text`` (what chat webhooks show), then the
        fields."""
        return {"text": self.line, **self.fields}


def _period_words(period_key: str) -> str:
    kind, _, name = period_key.partition(":")
    return f"{kind} {cut(printable(name), NAME_WIDTH)}" if name else cut(kind, NAME_WIDTH)


def _amount(value: float, dollars: bool) -> str:
    return money(value) if dollars else f"{value:,.6g}"


def crossed(
    policy: str,
    cap: float,
    before: float | None,
    after: float | None,
    levels: Sequence[float] = LEVELS,
    period_key: str = "",
    *,
    dollars: bool = True,
) -> list[Alert]:
    """The levels of ``cap`` a value crossed from below moving from ``before`` (None: 0) to
    ``after`` (``after / cap >= level > before / cap``), lowest first: one alert each, keyed
    by (policy, level, period). A value that did not move (``after`` None) crosses nothing.

    >>> [a.key for a in crossed("cap", 5.0, 2.0, 4.5, period_key="session:s1")]
    ['cap:cap:50%:session:s1', 'cap:cap:80%:session:s1']
    >>> crossed("cap", 5.0, 4.5, 5.0, period_key="day:2026-01-05")[0].line
    'cap: 100% of its cap reached, $5.00 of $5.00 (day 2026-01-05)'
    """
    if after is None or cap <= 0:
        return []
    was, now = (before or 0.0) / cap, after / cap
    out = []
    for level in sorted(levels):
        if was < level <= now:
            pct = f"{level * 100:g}%"
            where = f" ({_period_words(period_key)})" if period_key else ""
            line = (
                f"{policy}: {pct} of its cap reached, {_amount(after, dollars)} of "
                f"{_amount(cap, dollars)}{where}"
            )
            fields = {
                "event": "cap",
                "policy": policy,
                "level": level,
                "value": after,
                "cap": cap,
                "period": period_key,
            }
            out.append(Alert(f"cap:{policy}:{pct}:{period_key}", line, fields))
    return out


def period_key(
    scope: str,
    session_id: str | None = None,
    stream_key: str | None = None,
    turn_id: str | None = None,
    ts: datetime | None = None,
    tz: str = "UTC",
    window_start: datetime | None = None,
) -> str | None:
    """The name of the period a cap of ``scope`` counts in, for a call: its session, turn or
    stream; for the calendar scopes its day or month (``ts`` in ``tz``, which must be the zone
    the policy counts its days in), or the start of its window (``window_start``: the caller
    knows where the cap's window began). None when it cannot be named (a window of no start,
    a day of no time). The hook and the watch name a period alike, so that the record knows
    it is the same.

    >>> period_key("session", "s1", "f.jsonl"), period_key("turn", "s1", None, "t2")
    ('session:s1', 'turn:s1/t2')
    >>> period_key("month", ts=datetime(2026, 1, 5, 23, tzinfo=UTC))
    'month:2026-01'
    >>> period_key("day", ts=datetime(2026, 1, 5, 23), tz="Europe/Berlin")
    'day:2026-01-06'
    >>> period_key("window", ts=datetime(2026, 1, 5, 23)) is None
    True
    """
    unit = session_id or stream_key or ""
    if scope in ("day", "month"):
        if ts is None:
            return None
        from zoneinfo import ZoneInfo

        at = (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).astimezone(ZoneInfo(tz))
        return f"{scope}:{at:%Y-%m-%d}" if scope == "day" else f"{scope}:{at:%Y-%m}"
    if scope == "window":
        return None if window_start is None else f"window:{window_start.isoformat()}"
    if scope == "turn":
        return f"turn:{unit}/{turn_id or ''}"
    if scope == "stream":
        return f"stream:{stream_key or unit}"
    return f"{scope}:{unit}"


class AlertBook:
    """The record of the alerts sent, shared by every process of this user (see the module's
    docstring): ``first_time(key)`` claims a key, True for exactly one claimer ever."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else record_path()

    @contextmanager
    def _locked(self) -> Iterator[IO[bytes]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+b") as fh:
            if fcntl is not None:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield fh
            finally:
                if fcntl is not None:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    @staticmethod
    def _keys(data: bytes) -> set[str]:
        keys = set()
        for raw in data.splitlines():
            try:
                keys.add(str(json.loads(raw)["key"]))
            except (ValueError, KeyError, TypeError):
                continue  # (a line cut by a crash: not a claim)
        return keys

    def first_time(self, key: str, alert: Alert | None = None) -> bool:
        """Claim ``key``: True when no process claimed it before (it is claimed now), False
        when one did. Raises ``OSError`` when the record cannot be read or written."""
        with self._locked() as fh:
            fh.seek(0)
            data = fh.read()
            if key in self._keys(data):
                return False
            at = datetime.now(UTC).isoformat(timespec="seconds")
            entry = {"key": key, "at": at, "text": alert.line if alert else ""}
            lead = b"" if not data or data.endswith(b"\n") else b"\n"
            fh.write(lead + json.dumps(entry).encode() + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
            return True

    def sent(self) -> set[str]:
        """The keys claimed so far."""
        if not self.path.exists():
            return set()
        with self._locked() as fh:
            fh.seek(0)
            return self._keys(fh.read())


@dataclass(frozen=True)
class AlertSettings:
    """Where alerts go and at which levels of a cap: ``--webhook URL``, ``--notify`` (the
    desktop), ``--alert-at`` (fractions of a cap), ``verbose`` (say a missing notifier)."""

    webhook: str | None = None
    desktop: bool = False
    levels: tuple[float, ...] = LEVELS
    verbose: bool = False

    @property
    def any(self) -> bool:
        return bool(self.webhook or self.desktop)


def check_webhook(url: str) -> str:
    """``url`` if it is an http(s) URL with a host, else ``ValueError`` (urllib would open a
    ``file:`` URL too)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r}: give an http:// or https:// URL")
    return url


def _site(url: str) -> str:
    """A webhook named in a line: its scheme and host only (the path of a chat webhook is its
    secret)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def desktop_command(
    line: str, system: str = sys.platform, which: Callable[[str], str | None] = shutil.which
) -> list[str] | None:
    """The command that shows ``line`` as a desktop notification here (None: there is none).
    The line is an argument, never part of a script.

    >>> desktop_command("hi", "linux", lambda n: "/usr/bin/" + n)
    ['/usr/bin/notify-send', 'llm-forensics', 'hi']
    >>> desktop_command("hi", "linux", lambda n: None) is None
    True
    """
    if system == "darwin":
        found = which("osascript")
        if found is None:
            return None
        script = "on run argv\ndisplay notification (item 2 of argv) with title (item 1 of argv)"
        return [found, "-e", script + "\nend run", TITLE, line]
    found = which("notify-send")
    return None if found is None else [found, TITLE, line]


def post_json(url: str, body: dict[str, Any], timeout: float = WEBHOOK_TIMEOUT) -> str | None:
    """POST ``body`` as JSON to ``url``, retried once (after ``RETRY_WAIT``) when the server
    cannot be reached or answers 5xx; None when it took it, else why not in a few words."""
    import urllib.error
    import urllib.request

    data = json_text(body, indent=None).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "llm-forensics"}
    why = ""
    for attempt in range(2):
        if attempt:
            time.sleep(RETRY_WAIT)
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                answer.read(4096)
            return None
        except urllib.error.HTTPError as exc:
            why = f"HTTP {exc.code}"
            if exc.code < 500:
                return why
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            why = str(getattr(reason, "strerror", None) or reason)
    return why


class Notifier:
    """Sends an alert to each channel set: the desktop, the webhook, ``--exec``'s program
    (``runner``). Never raises: a failure is one line to ``tell``."""

    def __init__(
        self,
        settings: AlertSettings,
        tell: Callable[[str], None] = on_stderr,
        runner: ExecRunner | None = None,
    ) -> None:
        self.settings, self.tell, self.runner = settings, tell, runner
        self._no_desktop_said = False

    @property
    def active(self) -> bool:
        """Whether any channel is set (with none, nothing is claimed in the record)."""
        return self.settings.any or self.runner is not None

    def send(self, alert: Alert) -> None:
        if self.settings.desktop:
            self._desktop(alert)
        if self.settings.webhook:
            why = post_json(self.settings.webhook, alert.body())
            if why is not None:
                self.tell(f"--webhook {_site(self.settings.webhook)}: {why} ({alert.line})")
        if self.runner is not None:
            self.runner.submit(json_text(alert.fields, indent=None) + "\n")

    def _desktop(self, alert: Alert) -> None:
        argv = desktop_command(printable(alert.line))
        if argv is None:
            if self.settings.verbose and not self._no_desktop_said:
                self.tell("--notify: no notify-send (or osascript) here: no desktop notification")
            self._no_desktop_said = True
            return
        try:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=DESKTOP_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.tell(f"--notify {Path(argv[0]).name}: {exc}")
            return
        if done.returncode != 0:
            last = (done.stderr or b"").decode(errors="replace").strip().splitlines()[-1:]
            said = f": {last[0]}" if last else ""
            self.tell(f"--notify {Path(argv[0]).name}: exit {done.returncode}{said}")


def alert_once(book: AlertBook, notifier: Notifier, alert: Alert) -> bool:
    """Send ``alert`` if no process sent it before (its key claimed first, then sent): True
    when this call sent it. With no channel set nothing is claimed. Never raises."""
    if not notifier.active:
        return False
    try:
        if not book.first_time(alert.key, alert):
            return False
    except OSError as exc:
        notifier.tell(f"cannot keep the record of alerts ({book.path}): {exc.strerror or exc}")
        return False
    notifier.send(alert)
    return True


def trip_alert(decision: Decision, where: str = "") -> Alert:
    """A policy's stop (or nudge) as an alert, keyed as ``watch`` keys a trip: (policy,
    call, action)."""
    d = decision
    said = f" ({where})" if where else ""
    line = f"{d.action} {d.policy} at call {cut(printable(d.call_id), NAME_WIDTH)}: {d.reason}"
    return Alert(
        f"trip:{d.policy}:{d.call_id}:{d.action}",
        printable(line + said),
        {"event": "trip", **d.to_json()},
    )


def alert_after_call(
    book: AlertBook,
    notifier: Notifier,
    decision: Decision,
    cap: float | None,
    before: float | None,
    period: str,
    levels: Sequence[float] = LEVELS,
) -> list[Alert]:
    """What the hook calls after judging a call: the cap's levels ``decision.value`` crossed
    from ``before`` (a budget's ``cap``; None: no cap), then the stop itself, each sent once
    ever. ``before`` may be None (taken as 0): every level reached is then a candidate, and
    the record sends each once. Returns the alerts this call sent. Never raises."""
    candidates = []
    if cap is not None:
        candidates += crossed(decision.policy, cap, before, decision.value, levels, period)
    if decision.action == "stop":
        candidates.append(trip_alert(decision, _period_words(period) if period else ""))
    return [a for a in candidates if alert_once(book, notifier, a)]
