"""What the replay and a live guard share without DuckDB: the columns a policy makes the replay
carry (``columns_of``), and the rule's constants that tell a call cut at its length from the
next call's prompt. Light on purpose: a live guard (``analyzer.guards.guard``) imports it, and
must start without DuckDB or pyarrow (the Claude Code hook answers in milliseconds)."""

from __future__ import annotations

from analyzer.guards.blindness import blind_sql, named_columns
from analyzer.guards.policy import Policy
from analyzer.guards.primitives import EVENT_COLUMNS, PERIODS

# As in the truncated_tool_call_streak detector (one rule: lf_output_discarded in classify.sql).
TRUNCATION_GAP_S = 300
KEPT_RATIO = 0.5
# The columns the replay always carries: what the scoring reads and what the order's columns
# are made of.
ALWAYS = frozenset(
    {
        "call_id",
        "ts",
        "cost_usd",
        "parent_session_id",
        "input_tokens",
        "response_kind",
        "tool_key",
    }
)
# Not a column: what ``columns_of`` adds for a policy living in a period, so that the replay
# numbers the periods (periods.sql).
PERIOD_MARK = "(periods)"


def columns_of(policies: list[Policy] | None) -> frozenset[str]:
    """The columns of ``EVENT_COLUMNS`` the replay must carry for ``policies`` (every one when
    None): those their expressions name (outside quoted strings), those that say where they
    are blind (``analyzer.guards.blindness``), and those the scoring and the order need. A name
    found where it is no column (in a function name, say) only widens it."""
    if policies is None:
        return frozenset(EVENT_COLUMNS)
    periods = {PERIOD_MARK} if any(p.scope in PERIODS for p in policies) else set()
    text = " ".join(
        str(expr)
        for p in policies
        for expr in (p.watch, *(p.setting(s) for s in p.primitive.expressions), blind_sql(p))
        if expr
    )
    return frozenset(named_columns(text) | ALWAYS | periods)
