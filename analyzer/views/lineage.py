"""Where a session came from, for every view that shows a session (``show``, ``usage session``):
the session it was forked from (a Codex fork, whose copy of the parent's history is the parent's
and counted there) or the one that spawned it (a sub-agent). Read from the calls' own link,
``parent_session_id``; a session whose calls name an agent (``agent_id``) is a sub-agent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analyzer.engine.store import Store
from analyzer.model.records import json_record

_WORDS = {"forked_from": "forked from", "subagent_of": "sub-agent of"}


@dataclass(frozen=True)
class Parent:
    """A session's parent: its id, and whether the session is a fork of it or its sub-agent."""

    session_id: str
    relation: str  # forked_from | subagent_of

    def describe(self) -> str:
        """``forked from <id>`` or ``sub-agent of <id>``."""
        return f"{_WORDS[self.relation]} {self.session_id}"

    def to_json(self) -> dict[str, Any]:
        return json_record(self)


def parents(store: Store, sessions: list[str] | None = None) -> dict[str, Parent]:
    """Each session's parent (only ``sessions``, when given), for sessions that have one."""
    only = "AND session_id IN (SELECT unnest($s))" if sessions is not None else ""
    rows = store.engine.rows("views/parents.sql", {"s": sessions}, only=only)
    return {
        str(sid): Parent(str(parent), "subagent_of" if agent else "forked_from")
        for sid, parent, agent in rows
    }
