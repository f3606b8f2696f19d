"""What a guard can see in the data: where it is blind, and where it counts per session.

A guard is *blind* on a call where the data lacks its signal - not because of the format that
carried the call. Its signal is what its ``count`` or ``key`` reads (the calls it counts, or
what must repeat); each column of the replay is unknown on a call in its own way
(``UNKNOWN``): the reply kind where neither the reply nor its token counts were recorded, a
tool key where the call made tool calls the data does not name, what the agent answered where
no reply of it was kept, a count where it is NULL. A policy is blind on a call where none of
the columns its signal reads is known there: so a policy that falls back from the text to the
token count (Penguin's ``coalesce(visible_chars < 10, output_tokens <= 3, false)``) sees a
bill, and one keyed on the reply kind (``stalled``) is blind only where the kind is unknown.
Columns that place a call rather than describe its reply (its ids, position, time, model,
``tools_before``) are never unknown.

A bill carries no turns: where a policy's scope or reach is a turn, its calls without one are
counted per session (the replay's turn is then the session). A count per session is at least
the count per turn at every call, so it trips no later than the agent's per-turn guard would
(unless what it counts reads where the turn began: ``tools_before``), and its stop ends the
whole session; the result says so (``per_session_note``).
"""

from __future__ import annotations

import re

from analyzer.guards.policy import Policy
from analyzer.guards.primitives import EVENT_COLUMNS, Settings

# Where each column's value is unknown on one call: SQL with ``{t}`` for the table's alias
# (``e.``, ``tc.``, or nothing). A column not listed places the call and is always known.
_KIND = "{t}response_kind IS NULL"
_ANSWER = "{t}content_chars IS NULL AND {t}tool_key IS NULL"  # no reply of it kept
# ... or its tool calls' results (a '?' in the result key) or arguments (a '?' in the step key:
# the log records neither, as OpenTelemetry events and spans leave them out by default)
_RESULTS = f"({_ANSWER}) OR {{t}}result_key LIKE '%?%'"
_STEPS = f"({_ANSWER}) OR {{t}}step_key LIKE '%?%'"
UNKNOWN: dict[str, str] = {
    # the reply's kind (a bill knows it from its finish reason and token counts)
    "response_kind": _KIND,
    "stalled": _KIND,
    "tool_call": _KIND + " AND {t}tool_key IS NULL",
    # a bill's 'length' finish with no next call to judge by is NULL here, but its kind is
    # known: the presets neither count nor reset it, it is not blind
    "truncated": _KIND,
    # which tools: named by a log; a bill's tool call (or a reply of unknown kind) names none
    "tool_key": "{t}tool_key IS NULL AND ({t}response_kind IS NULL"
    " OR {t}response_kind IN ('tool_call', 'truncated_tool_call'))"
    # ... or which arguments: a call whose arguments the log does not record ('?<session>#n')
    " OR {t}tool_key LIKE '%:?%'",
    # what the agent answered (sql/outcomes.sql): only where a reply of it was kept
    "refused": _ANSWER,
    "error_key": _RESULTS,
    "result_key": _RESULTS,
    # the call as a step (sql/guards/steps.sql): its tool calls and what they got back
    "step_key": _STEPS,
    "step_errors": _STEPS,
    "step_failed": _STEPS,
    "stale": _STEPS,
    # the reply's text
    "visible_chars": "{t}visible_chars IS NULL",
    "content_chars": "{t}content_chars IS NULL",
    "reply_saved": "{t}reply_saved IS NULL",
    # what the provider said of the call
    "finish_reason": "coalesce({t}finish_reason, 'unknown') = 'unknown'",
    "http_status": "{t}http_status IS NULL",
    "input_tokens": "{t}input_tokens IS NULL",
    "output_tokens": "{t}output_tokens IS NULL",
    "reasoning_tokens": "{t}reasoning_tokens IS NULL",
    "cost_usd": "{t}cost_usd IS NULL",
    "prompt_delta": "{t}prompt_delta IS NULL AND {t}pos > 1",
}
# The settings a policy's signal is read from.
_SIGNAL = ("count", "key")


def unquoted(sql: str) -> str:
    """``sql`` with its quoted strings emptied (a column name in a string is no column)."""
    return re.sub(r"'(?:[^']|'')*'", "''", sql)


def named_columns(sql: str) -> set[str]:
    """The replay's columns ``sql`` names (outside quoted strings)."""
    text = unquoted(sql)
    return {c for c in EVENT_COLUMNS if re.search(rf"\b{c}\b", text)}


def signal_columns(p: Settings) -> set[str]:
    """The columns a policy's signal reads that can be unknown on a call."""
    text = " ".join(str(p.setting(s) or "") for s in _SIGNAL)
    return named_columns(text) & set(UNKNOWN)


def blind_sql(p: Settings, alias: str = "") -> str:
    """SQL over one call of the replay (its columns prefixed by ``alias``, such as ``e.``):
    whether the guard cannot see its signal there - none of the columns its signal reads is
    known on that call. ``false`` for a policy whose signal reads no such column."""
    tests = sorted({UNKNOWN[c] for c in signal_columns(p)})
    if not tests:
        return "false"
    return " AND ".join(f"({test.format(t=alias)})" for test in tests)


def lives_in_turns(p: Policy) -> bool:
    """Whether the policy lives in turns: its scope or its reach is a turn."""
    return "turn" in (p.scope, p.reaches)


# Columns that depend on where a turn begins: counted in the whole session where there is none.
_TURN_BOUND = {"tools_before", "turn_id"}


def per_session_note(p: Policy, calls: int, total: int) -> str | None:
    """What a policy living in turns says beside its figures of the ``calls`` (of ``total``)
    it counted per session, having no turn; None when there are none. A count per session is
    at least the count per turn at every call - unless what it counts reads where the turn
    began (``tools_before``: the tool calls earlier in the turn, then of the whole session)."""
    if not calls:
        return None
    which = "every one of the" if calls == total else f"{calls:,} of"
    expressions = (p.watch, *(p.setting(s) for s in p.primitive.expressions))
    reads_turn = named_columns(" ".join(str(e) for e in expressions if e)) & _TURN_BOUND
    when = (
        f"and it reads {', '.join(sorted(reads_turn))} (then of the whole session), so it may "
        "trip later than the agent's per-turn guard would, or not at all"
        if reads_turn
        else "so it trips no later than the agent's per-turn guard would"
    )
    return (
        f"counted per session on {which} {total:,} calls: they carry no turns (a bill has "
        f"none), {when}; a stop there ends the session"
    )
