"""Each guard primitive's policies for the live-against-replay property (tests/test_guard_live.py
draws from all of them) and its smallest policy (tests/test_primitives.py): keyed by the
primitive's name, so a primitive added without them fails the contract test, not silently
the property."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

Kind = SearchStrategy[dict[str, Any]]

STRATEGIES: dict[str, list[Kind]] = {
    "counter": [
        st.fixed_dictionaries(
            {
                "type": st.just("counter"),
                "count": st.sampled_from(
                    ["stalled", "tool_call", "truncated", "output_tokens <= 3"]
                ),
                "reset": st.sampled_from([None, "tool_call", "NOT stalled", "truncated = false"]),
                "weight": st.sampled_from([None, "1", "output_tokens / 100"]),
            }
        ),
        # the no_progress preset's model: stale steps counted
        st.fixed_dictionaries(
            {
                "type": st.just("counter"),
                "count": st.just("stale"),
                "reset": st.sampled_from([None, "NOT stale"]),
                "weight": st.just(None),
            }
        ),
    ],
    "budget": [st.fixed_dictionaries({"type": st.just("budget")})],
    "run_length": [
        st.fixed_dictionaries(
            {
                "type": st.just("run_length"),
                "key": st.sampled_from(
                    ["input_tokens", "tool_key", "prompt_delta", "response_kind"]
                ),
            }
        ),
        # step keys and the errors of steps
        st.fixed_dictionaries(
            {"type": st.just("run_length"), "key": st.sampled_from(["step_key", "step_errors"])}
        ),
    ],
    "period": [
        st.fixed_dictionaries(
            {
                "type": st.just("period"),
                "key": st.sampled_from(["tool_key", "response_kind"]),
                "period": st.sampled_from([2, 3]),
            }
        )
    ],
    "window": [
        st.fixed_dictionaries(
            {
                "type": st.just("window"),
                "count": st.just("stalled"),
                "size": st.sampled_from([2, 3]),
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("window"),
                "count": st.just("tool_call"),
                "seconds": st.sampled_from([1, 30]),
            }
        ),
        # the no_progress preset's model: stale steps in a window
        st.fixed_dictionaries(
            {
                "type": st.just("window"),
                "count": st.sampled_from(["coalesce(stale, false)", "stale AND step_failed"]),
                "size": st.sampled_from([3, 8]),
            }
        ),
    ],
}

# Each primitive's smallest policy (its TOML as a dict), every form its tracker takes.
SMALLEST: dict[str, list[dict[str, Any]]] = {
    "counter": [
        {"type": "counter", "count": "tool_call"},
        {"type": "counter", "count": "tool_call", "weight": "output_tokens / 100"},
    ],
    "budget": [{"type": "budget"}, {"type": "budget", "weight": "output_tokens"}],
    "run_length": [{"type": "run_length", "key": "tool_key"}],
    "period": [{"type": "period", "key": "tool_key", "period": 3}],
    "window": [
        {"type": "window", "count": "tool_call", "size": 4},
        {"type": "window", "count": "tool_call", "seconds": 30},
    ],
}

# A budget over a period of time (a day, a 5-hour window, a month: every stream's calls in one
# value, in time order), with its whole policy: the property's common settings (scope, reach)
# do not apply to it (a period's stop ends the period).
PERIOD_BUDGETS: Kind = st.fixed_dictionaries(
    {
        "type": st.just("budget"),
        "scope": st.sampled_from(["day", "window", "month"]),
        "weight": st.sampled_from([None, "1", "output_tokens / 100"]),
        "watch": st.sampled_from([None, "tool_call", "session_id = 'a'"]),
        "compare": st.sampled_from([">=", ">"]),
        "stop": st.sampled_from([1, 2, 3.5]),
        "nudge": st.sampled_from([None, 0.5]),
    }
)
