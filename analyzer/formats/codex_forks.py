"""Forked and sub-agent Codex rollouts: the session a rollout was forked from or spawned by, and
which of its lines are that session's history copied into it (a *replay*).

What Codex writes (openai/codex: ``protocol``'s ``SessionMeta``, ``SessionSource`` and
``InitialHistory``; ``core/src/rollout/recorder.rs``; the session's ``record_initial_history``;
``core/src/agent/control/spawn.rs``):

* The first ``session_meta`` is the rollout's own (Codex itself takes the first as the thread's
  id). A fork names its parent in ``forked_from_id``; a sub-agent in ``source`` as
  ``{"subagent": {"thread_spawn": {"parent_thread_id", "depth", "agent_path",
  "agent_nickname", "agent_role"}}}`` (or ``{"subagent": "review"}``, ``"compact"``,
  ``{"other": ...}``), newer versions also in a top-level ``parent_thread_id``, with
  ``agent_nickname`` / ``agent_role`` / ``agent_path`` and ``thread_source: "subagent"``. Their
  ``session_id`` names the root thread, not this one.
* A fork (``InitialHistory::Forked``) writes the parent's rollout items into the new file as they
  are, right after its own ``session_meta``: the parent's own ``session_meta`` first (and, for
  a fork of a fork, its ancestors'), then its turns, ``token_count`` events included, each line
  stamped with the time it was written, so the whole copy carries the fork's instant, written
  in one burst. A forked sub-agent copies the parent's events (``token_count`` too), its
  ``session_meta``, user and developer messages and final answers, not its tool calls.
* The newest versions number every line (``ordinal``) and say where the child's own lines
  begin (``subagent_history_start_ordinal``).

So a line is the parent's, not the child's, when (in this order): its ``ordinal`` is below the
stated start; or it belongs to the run of lines that opens with a copied ``session_meta`` (one
naming another session) before the child's first own event and goes on while each line follows
the one before within :data:`PAUSE`, or is stamped before the child was created (a copy that
kept its times). The run ends at a turn whose id (a UUIDv7, as Codex makes them) was made after
the child's, or at the first longer pause: the child's own first turn waits for a person or a
model. A child that copies nothing (a sub-agent started afresh, a paginated fork that refers to
its parent's file) has no replay and is only linked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from analyzer.ingest.values import as_dict, as_int, as_str, kind_of, parse_time

PAUSE = timedelta(seconds=1)
_SUBAGENT_NAMES = ("agent_path", "agent_nickname", "agent_role")


@dataclass(frozen=True)
class Lineage:
    """What a rollout's own ``session_meta`` says of where it came from."""

    parent: str | None  # the session it was forked from, or the one that spawned it
    agent: str | None  # a sub-agent's name (its path, nickname, role, or kind)
    start_ordinal: int | None  # the first line number that is the child's own


def lineage(meta: dict[str, Any]) -> Lineage:
    source = meta.get("source")
    sub = as_dict(source).get("subagent") if isinstance(source, dict) else None
    spawn = as_dict(as_dict(sub).get("thread_spawn"))
    parent = (
        as_str(meta.get("forked_from_id"))
        or as_str(meta.get("parent_thread_id"))
        or as_str(spawn.get("parent_thread_id"))
    )
    agent = next(
        (as_str(d.get(k)) for k in _SUBAGENT_NAMES for d in (meta, spawn) if as_str(d.get(k))), None
    )
    if agent is None and sub is not None:  # "review", "compact", {"other": "guardian"}
        agent = as_str(sub) or next((as_str(v) for v in as_dict(sub).values() if as_str(v)), None)
        agent = agent or "subagent"
    return Lineage(parent, agent, as_int(meta.get("subagent_history_start_ordinal")))


def uuid7_ms(text: object) -> int | None:
    """The creation time (Unix ms) a UUIDv7 carries in its first 48 bits, else None."""
    if not isinstance(text, str) or len(text) != 36 or text[14] != "7":
        return None
    try:
        return int(text[:8] + text[9:13], 16)
    except ValueError:
        return None


class Replay:
    """Tells, line by line, which lines of a rollout are a parent's history copied into it."""

    def __init__(self) -> None:
        self.own_id: str | None = None
        self.lineage = Lineage(None, None, None)
        self.copied_from: str | None = None  # the id of the copied session_meta that opened it
        self._state = "meta"  # meta -> before -> (replay ->) own
        self._created: datetime | None = None
        self._own_ms: int | None = None
        self._last: datetime | None = None

    @property
    def parent(self) -> str | None:
        return self.lineage.parent or self.copied_from

    def own_meta(self, meta: dict[str, Any], ts: datetime | None, tz: str) -> None:
        """The rollout's first ``session_meta``."""
        self.own_id = as_str(meta.get("id"))
        self.lineage = lineage(meta)
        self._created = parse_time(meta.get("timestamp"), tz) or ts
        self._own_ms = uuid7_ms(self.own_id)
        self._state = "before"

    def copied(
        self, kind: str | None, p: dict[str, Any], ts: datetime | None, ordinal: object
    ) -> bool:
        """Whether this line (after the first ``session_meta``) is copied history."""
        start, n = self.lineage.start_ordinal, as_int(ordinal)
        if start is not None and n is not None:
            return n < start
        if self._state == "before":
            other = as_str(p.get("id"))
            if kind == "session_meta" and other and other != self.own_id:
                self._state, self._last, self.copied_from = "replay", ts, other
                return True
            if kind == "event_msg" and kind_of(p) in (
                "token_count",
                "task_started",
                "user_message",
            ):
                self._state = "own"
            return False
        if self._state != "replay":
            return False
        if self._newer_turn(kind, p) or self._paused(ts):
            self._state = "own"
            return False
        self._last = ts or self._last
        return True

    def _newer_turn(self, kind: str | None, p: dict[str, Any]) -> bool:
        """A turn begun after the child was made (its id is a later UUIDv7)."""
        if kind == "turn_context" or (kind == "event_msg" and kind_of(p) == "task_started"):
            turn = uuid7_ms(p.get("turn_id"))
            return turn is not None and self._own_ms is not None and turn > self._own_ms
        return False

    def _paused(self, ts: datetime | None) -> bool:
        if ts is None or self._last is None:
            return False
        if self._created is not None and ts <= self._created:
            return False  # stamped before the child existed: copied with its own time
        return ts - self._last > PAUSE
