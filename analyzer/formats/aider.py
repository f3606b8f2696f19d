"""Aider's analytics log: the JSON Lines file Aider appends to when run with
``--analytics-log FILE`` (or ``AIDER_ANALYTICS_LOG``).

Facts from Aider's own source (Aider-AI/aider: ``aider/analytics.py``, ``aider/main.py``,
``aider/coders/base_coder.py``) and from the real log Aider publishes (1,000 lines, the tests
read it from ``../shared/samples/more-formats/aider``):

* Every line is ``{event, properties, user_id, time}``. ``time`` is ``int(time.time())`` when
  the event was written: Unix seconds (UTC), to the second. ``user_id`` is the UUID Aider keeps
  in ``~/.aider/analytics.json``: one per installation, not per session (``null`` when that file
  cannot be written). ``properties`` holds numbers as numbers and anything else as ``str()``.
* A ``message_send`` event is written by ``show_usage_report`` after a reply of the main model:
  ``main_model`` (plus ``weak_model``, ``editor_model``, ``edit_format``), ``prompt_tokens``,
  ``completion_tokens``, ``total_tokens`` = their sum, ``cost`` (USD, Aider's own figure from
  litellm's ``completion_cost`` or its model prices) and ``total_cost`` (the running total of
  the Aider process, carried over when a command switches the model or edit format). Each is
  one call here, with its cost ``reported``. Sure of: the fields, the units, the time.
* ``prompt_tokens`` is litellm's ``usage.prompt_tokens`` (the whole prompt, cached part
  included), plus ``cache_creation_input_tokens`` when the provider reports cache fields
  (Anthropic); without a usage object Aider counts the tokens itself. The event has no cache
  breakdown, so ``cached_input_tokens`` stays unknown and the list-price estimate beside the
  reported cost treats the whole prompt as fresh input. Whether litellm already counts the cache
  writes in ``prompt_tokens`` (then Aider counts them twice) depends on litellm's version:
  unsure.
  (On the real log, OpenAI and Gemini models only, the estimate equals Aider's ``cost`` for
  every reply: Aider, too, priced the whole prompt as fresh input.)
* One ``message_send`` is usually one API request; Aider sums the tokens and cost of a reply
  continued after its output limit (models with prefill) into one event. The weak model's
  calls (commit messages, chat summaries) are not logged at all.
* ``cost`` is 0 when Aider had no price for the model (it reports no cost then): such a call
  gets the list-price estimate instead, if there is one.
* ``main_model`` is a litellm model name (``gemini/gemini-2.5-pro``, ``gpt-5.2``): the prefix
  before the first ``/`` is the provider. Aider writes ``None`` or ``<provider>/REDACTED`` for
  a model it does not know (the model is then unknown).
* All other events (``launched``, ``cli session``, ``message_send_starting``, ``command_*``,
  ``exit``...) hold no call: skipped by kind. No message content is ever logged, so only the
  token and cost detectors can judge these calls.

**Sessions** (derived; no event names one). An Aider process starts with ``launched``, but
several processes may write the same log at once (the real log interleaves a long chat with
dozens of ``--message`` runs), and no event names its process. ``total_cost`` does: a
process's first priced reply has ``total_cost == cost``, and each later one ``total_cost ==``
the previous ``total_cost + cost``. So, per ``user_id``, a reply with ``total_cost == cost > 0``
starts a session, and any other joins the session whose last ``total_cost`` plus this ``cost``
makes its ``total_cost`` (the most recently active one if several do), or starts one when none
does (the log began after that process did). Unpriced replies (``cost`` and ``total_cost`` 0)
chain nothing: they join the user's latest unpriced session unless a ``launched`` came since.
On the real log all 37 sessions so found begin with ``total_cost == cost``: no chain is
broken. A session is ``<user_id>@<time of its first call>`` (``#2``... when two begin in one
second), and is its own stream (one Aider process). Turns are not known.

Sniffed by a line of exactly Aider's four keys (every version's ``log_entry``). There is no
default place: Aider writes this log only where ``--analytics-log`` says. Aider's Markdown chat
history (``.aider.chat.history.md``) is not read. A reject's line is the file's line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from analyzer.ingest.base import Head, LoadContext, LoadResult
from analyzer.ingest.jsonl import head_objects, json_lines
from analyzer.ingest.lowering import Lowering, brief
from analyzer.ingest.rows import CallRow
from analyzer.ingest.spec import FormatSpec
from analyzer.ingest.values import as_int, as_str, parse_time

APP = "aider"
_KEYS = {"event", "properties", "user_id", "time"}
_CALL_EVENT = "message_send"
_MAX_USD = 1e6  # a cost beyond this for one reply is a broken value
_UNKNOWN_USER = "unknown-user"


def sniff(head: Head) -> bool:
    """An analytics event: exactly Aider's four keys, a named event and its properties."""
    return any(
        set(obj) == _KEYS
        and isinstance(obj.get("event"), str)
        and isinstance(obj.get("properties"), dict)
        for obj in head_objects(head)
    )


def _usd(value: object) -> float | None:
    """A dollar amount: a finite non-negative number below ``_MAX_USD``, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) and 0 <= v < _MAX_USD else None


def model_and_provider(name: str | None) -> tuple[str | None, str | None]:
    """A litellm model name as (model, provider): ``gemini/gemini-2.5-pro`` is gemini-2.5-pro
    at the provider ``gemini``; Aider's ``None`` and ``<provider>/REDACTED`` name no model.

    >>> model_and_provider("openrouter/anthropic/claude-sonnet-4"), model_and_provider("gpt-5")
    (('anthropic/claude-sonnet-4', 'openrouter'), ('gpt-5', None))
    >>> model_and_provider("gemini/REDACTED"), model_and_provider("None")
    ((None, 'gemini'), (None, None))
    """
    if not name or name == "None":
        return None, None
    prefix, slash, rest = name.partition("/")
    if not slash:
        return name, None
    return (None if rest in ("", "REDACTED") else rest), (prefix or None)


@dataclass
class _Session:
    session_id: str
    last_total: float
    last_active: int  # the number of the reply that last joined it (recency)
    launches: int  # the user's ``launched`` events seen when it was last active
    seq: int = 0


def _close(a: float, b: float) -> bool:
    """Equal as sums of the same floats (Aider adds ``cost`` to ``total_cost``)."""
    return abs(a - b) <= 1e-9 + 1e-9 * max(abs(a), abs(b))


class _Sessions:
    """Threads replies into the Aider processes that made them (see the module's docstring)."""

    def __init__(self) -> None:
        self.open: dict[str, list[_Session]] = {}
        self.launches: dict[str, int] = {}
        self.ids: dict[str, int] = {}
        self.replies = 0

    def launched(self, user: str) -> None:
        self.launches[user] = self.launches.get(user, 0) + 1

    def join(self, user: str, cost: float | None, total: float | None, start: str) -> _Session:
        self.replies += 1
        sessions = self.open.setdefault(user, [])
        launches = self.launches.get(user, 0)
        found: _Session | None = None
        if cost is None or total is None:  # nothing to chain by: the latest session
            found = max(sessions, key=lambda s: s.last_active, default=None)
        elif cost == 0 and total == 0:  # unpriced: the latest unpriced one, in this launch
            unpriced = [s for s in sessions if s.last_total == 0 and s.launches == launches]
            found = max(unpriced, key=lambda s: s.last_active, default=None)
        elif not (cost > 0 and _close(total, cost)):  # not a process's first priced reply
            chained = [s for s in sessions if _close(s.last_total + cost, total)]
            found = max(chained, key=lambda s: s.last_active, default=None)
        if found is None:
            base = f"{user}@{start}"
            n = self.ids[base] = self.ids.get(base, 0) + 1
            found = _Session(base if n == 1 else f"{base}#{n}", 0.0, 0, launches)
            sessions.append(found)
        if total is not None:
            found.last_total = total
        found.last_active = self.replies
        found.launches = launches
        found.seq += 1
        return found


class _Reader:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.low = Lowering(ctx, SPEC.name, SPEC.call_prefix)
        self.sessions = _Sessions()
        self.natives: dict[str, int] = {}

    def record(self, lineno: int, obj: dict[str, Any]) -> None:
        event = obj.get("event")
        if not isinstance(event, str):
            self.low.reject(lineno, "not an Aider analytics event (no event name)", brief(obj))
            return
        user = as_str(obj.get("user_id")) or _UNKNOWN_USER
        if event == "launched":
            self.sessions.launched(user)
        if event != _CALL_EVENT:
            self.low.skip(event[:60] or "unnamed_event")
            return
        props = obj.get("properties")
        if not isinstance(props, dict):
            self.low.reject(lineno, "a message_send event without properties", brief(obj))
            return
        self.message_send(lineno, obj, user, props)

    def message_send(
        self, line: int, obj: dict[str, Any], user: str, props: dict[str, Any]
    ) -> None:
        ts = parse_time(obj.get("time"))
        prompt = as_int(props.get("prompt_tokens"))
        completion = as_int(props.get("completion_tokens"))
        cost, total = _usd(props.get("cost")), _usd(props.get("total_cost"))
        start = ts.isoformat() if isinstance(ts, datetime) else f"line{line}"
        session = self.sessions.join(user, cost, total, start)
        # Stable as the log grows: the event's own values, numbered among their equals.
        key = f"{user}:{as_str(obj.get('time'))}:{prompt}:{completion}"
        n = self.natives[key] = self.natives.get(key, 0) + 1
        model, provider = model_and_provider(as_str(props.get("main_model")))
        reported = cost is not None and cost > 0
        self.low.add_call(
            CallRow(
                native_id=f"{key}:{n}",
                line=line,
                ts=ts,
                session_id=session.session_id,
                stream_key=session.session_id,
                seq=session.seq,
                model=model,
                provider=provider,
                app=APP,
                input_tokens=prompt,
                output_tokens=completion,
                output_final=True if completion is not None else None,
                cost_usd=cost if reported else None,
                cost_basis="reported" if reported else None,
                n_records=1,
            )
        )


def load(ctx: LoadContext) -> LoadResult:
    reader = _Reader(ctx)
    for lineno, obj in json_lines(ctx.source, reader.low):
        reader.record(lineno, obj)
    return reader.low.finish()


# What this module is to the registry (analyzer.formats).
SPEC = FormatSpec(
    name="aider",
    title="Aider analytics log (JSONL, --analytics-log)",
    kind="log",
    sniff_order=56,  # after the other agent logs, before saved conversations (90)
    call_prefix="aider",
    sniff=sniff,
    load=load,
)
