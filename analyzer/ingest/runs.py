"""A run's own verdict (the ``runs`` table): how an agent's log says a run ended, stored with
what it states the run cost, and that cost divided over the run's calls.

Agents write how a run ended in their own words: mini-swe-agent's ``exit_status`` is the name of
the exception that ended it (``Submitted``, ``LimitsExceeded`` for its step or cost limit,
``FormatError``...); SWE-agent's is ``submitted``, ``exit_cost``, ``exit_context``,
``exit_format``, ``exit_error`` or one of those after an automatic submission (``submitted
(exit_cost)``); Claude Code's ``result`` line has a ``subtype`` (``success``,
``error_max_turns``, ``error_during_execution``...) and ``is_error``; an OpenHands instance an
``error`` text ("Agent reached maximum iteration...", "Agent got stuck in a loop"); Gemini CLI's
``result`` line a ``status``. ``outcome`` maps each to one word a detector and a reader can use;
the log's own words stay in ``runs.exit_status``.
"""

from __future__ import annotations

import re
from datetime import date

import pyarrow as pa

from analyzer.model.pricing import tier_prices

# Outcomes, in the order a reader meets them (the column's values; NULL: the log says none).
OUTCOMES = (
    "completed",  # the run ended as it should (submitted, a success result)
    "step_limit",  # it reached its step, turn or iteration limit (or a limit the log names
    # without saying which: mini-swe-agent's LimitsExceeded is its step or its cost limit)
    "cost_limit",  # it reached its cost limit
    "context_limit",  # its context window was full
    "format_error",  # the agent gave up on replies it could not parse
    "stuck",  # the agent's own stuck detector ended it
    "error",  # an error ended it (the log marks it failed)
    "interrupted",  # a person or the harness stopped it
    "other",  # the log names an ending this table does not know
)

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"stuck|loop detected|repeat(ing|ed) (action|itself)", re.I), "stuck"),
    (re.compile(r"cost|budget|credit", re.I), "cost_limit"),
    (re.compile(r"context|too.?long|token.?limit", re.I), "context_limit"),
    (re.compile(r"format", re.I), "format_error"),
    (
        re.compile(r"limit|max(imum)?[ _]?(session[ _]?)?(turn|iteration|step)", re.I),
        "step_limit",
    ),
    (re.compile(r"interrupt|cancel|abort|keyboard|paus", re.I), "interrupted"),
    (re.compile(r"error|exception|fail|timeout", re.I), "error"),
    (re.compile(r"^(submitted|success|completed?|finish(ed)?|done|stop)$", re.I), "completed"),
)


def outcome(exit_status: str | None, is_error: bool | None = None) -> str | None:
    """The outcome a log's own exit status (or error text) means, or None when it says none.

    >>> outcome("LimitsExceeded"), outcome("submitted (exit_cost)"), outcome("Submitted")
    ('step_limit', 'cost_limit', 'completed')
    >>> outcome("error_max_turns", True), outcome("success", True), outcome(None, True)
    ('step_limit', 'error', 'error')
    >>> outcome("Agent got stuck in a loop"), outcome("exit_format"), outcome("early_exit")
    ('stuck', 'format_error', 'other')
    >>> outcome("Maximum session turns exceeded"), outcome("MaxSessionTurnsError", True)
    ('step_limit', 'step_limit')
    """
    if not exit_status:
        return "error" if is_error else None
    for pattern, name in _RULES:
        if pattern.search(exit_status):
            if name == "completed" and is_error:
                return "error"
            return name
    return "error" if is_error else "other"


# A run: what an agent's log says of one whole run (the ``runs`` table), one per session.
RUN_COLUMNS: dict[str, pa.DataType] = {
    "session_id": pa.string(),
    "stream_key": pa.string(),
    "seq": pa.int64(),
    "line": pa.int64(),
    "agent": pa.string(),
    "model": pa.string(),
    "exit_status": pa.string(),
    "outcome": pa.string(),
    "is_error": pa.bool_(),
    "result_excerpt": pa.string(),
    "reported_calls": pa.int64(),
    "reported_input_tokens": pa.int64(),
    "reported_cached_tokens": pa.int64(),
    "reported_output_tokens": pa.int64(),
    "reported_cost_usd": pa.float64(),
    "cost_apportioned": pa.bool_(),
    "cost_estimate_usd": pa.float64(),
    "duration_ms": pa.float64(),
    "step_limit": pa.int64(),
    "cost_limit_usd": pa.float64(),
    "n_records": pa.int64(),  # input records this run row accounts for
}


def divide(total: int, weights: list[int]) -> list[int]:
    """A run's stated whole-number ``total`` (tokens) divided over its calls by the rule
    ``ingest/apportion.sql`` divides a stated cost by: in proportion to ``weights`` where they
    are all 0 or more and not all 0, else evenly, each share the difference of two rounded
    running totals (half up), so the shares add up to ``total`` exactly.

    >>> divide(10, [1, 1, 1]), divide(10, [0, 0, 0]), divide(7, [1, 3]), divide(0, [5, 2])
    ([3, 4, 3], [3, 4, 3], [2, 5], [0, 0])
    >>> divide(5, [0, 2, 0]), divide(3, []), divide(4, [-1, 2])
    ([0, 5, 0], [], [2, 2])
    """
    if not weights:
        return []
    if min(weights) < 0 or not any(weights):
        weights = [1] * len(weights)
    whole, upto, before = sum(weights), 0, 0
    shares = []
    for w in weights:
        upto += w
        rounded = (2 * total * upto + whole) // (2 * whole)  # total * upto / whole, half up
        shares.append(rounded - before)
        before = rounded
    return shares


def estimate_of_totals(
    model: str | None,
    provider: str | None,
    day: date | None,
    tokens: tuple[int | None, int | None, int | None],
    calls: int,
) -> float | None:
    """A run's stated totals (``tokens``: the whole prompt, its cached part, the output billed
    as output, thinking included) at list prices, for a log that states a run's tokens but
    neither its cost nor any call's tokens. The price tier is the one an average call of the
    run falls in (the totals do not say how the prompts were spread). None: no model, no
    tokens, or no known price."""
    prompt, cached, output = tokens
    tiers = tier_prices(model, provider, day) if model else None
    if not tiers or (prompt is None and output is None):
        return None
    each = (prompt or 0) / max(calls, 1)
    inside = [t for t in tiers if each > t.above and (t.upto is None or each <= t.upto)]
    tier = inside[0] if inside else tiers[0]
    read = min(cached or 0, prompt or 0)
    total = (
        ((prompt or 0) - read) * tier.input + read * tier.cache_read + (output or 0) * tier.output
    )
    return float(total)
