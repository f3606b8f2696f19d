"""A policy's expressions evaluated in Python (analyzer/guards/expr.py) give DuckDB's answers:
every preset's, every expression the guard tests generate policies from, and tricky ones, over
random rows of the replay's columns (NULLs included); what the compiler does not know it
refuses, and the guard then asks DuckDB. A live guard imports neither DuckDB nor pyarrow when
its policy's expressions compile, and goes on deciding the same after a pickle round trip."""

from __future__ import annotations

import ast
import pickle
import subprocess
import sys
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.guards.expr import Unsure, compile_expr
from analyzer.guards.guard import Call, Decision, Guard, guard_expressions
from analyzer.guards.policy import all_policies, parse_policy
from analyzer.guards.primitives import EVENT_COLUMNS
from tests.helpers import REPO

_SETTINGS = ("watch", "count", "reset", "weight", "key")


def _test_expressions() -> set[str]:
    """The expressions the guard tests build their policies of (tests/guard_strategies.py and
    the watch of tests/test_guard_live.py): every string given for an expression setting."""
    found: set[str] = set()
    for name in ("guard_strategies.py", "test_guard_live.py"):
        tree = ast.parse((REPO / "tests" / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Dict):
                continue
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value in _SETTINGS:
                    found |= {
                        c.value
                        for c in ast.walk(v)
                        if isinstance(c, ast.Constant) and isinstance(c.value, str)
                    }
    return found - {"counter", "budget", "run_length", "period", "window"}


PRESET_EXPRESSIONS = sorted({e for p in all_policies() for e in guard_expressions(p)})
TEST_EXPRESSIONS = sorted(_test_expressions())
TRICKY = [
    "NULL",
    "NOT NULL",
    "true AND NULL",
    "false AND NULL",
    "true OR NULL",
    "NOT (stalled OR tool_call) AND reply_saved",
    "NOT stalled = tool_call",
    "tools_before = 0 IS NULL",
    "input_tokens IS NOT DISTINCT FROM output_tokens",
    "model IS DISTINCT FROM 'm1'",
    "response_kind IN ('empty', 'text', NULL)",
    "response_kind NOT IN ('empty', 'text')",
    "output_tokens NOT IN (1, 3, NULL)",
    "input_tokens BETWEEN 100 AND 1000",
    "input_tokens NOT BETWEEN output_tokens AND 1000",
    "coalesce(visible_chars, output_tokens, -1)",
    "coalesce(cost_usd, 0)",
    "coalesce(cost_usd, input_tokens)",
    "CASE WHEN stalled THEN 'stall' WHEN tool_call THEN tool_key ELSE 'x' END",
    "CASE response_kind WHEN 'empty' THEN 1 WHEN 'text' THEN 2 END",
    "CASE WHEN http_status >= 500 THEN input_tokens ELSE cost_usd END",
    "tool_key || '|' || coalesce(result_key, '?')",
    "'it''s ' || model",
    "input_tokens + output_tokens * 2 - 1",
    "input_tokens / output_tokens",
    "input_tokens / 0",
    "-input_tokens / 0",
    "input_tokens % 7",
    "input_tokens % output_tokens",
    "http_status + 1",
    "http_status * http_status",
    "-http_status",
    "- - input_tokens",
    "cost_usd + 0.25",
    "cost_usd - input_tokens",
    "cost_usd > 0.5",
    "input_tokens < 2.5",
    "output_tokens / 100 > cost_usd",
    "CAST(cost_usd AS DOUBLE)",
    "CAST(input_tokens AS DOUBLE) / 3",
    "CAST(input_tokens / 3 AS BIGINT)",
    "CAST(input_tokens / 3 AS INTEGER)",
    "CAST(cost_usd AS BIGINT)",
    "cost_usd::INTEGER",
    "CAST(input_tokens AS VARCHAR) || ':' || CAST(stalled AS VARCHAR)",
    "http_status::BOOLEAN",
    "CAST(pos AS int)",
    "input_tokens::varchar",
    "lower(model)",
    "upper(tool_key)",
    "length(tool_key)",
    "abs(prompt_delta)",
    "abs(cost_usd)",
    "greatest(input_tokens, output_tokens, 10)",
    "least(visible_chars, content_chars)",
    "greatest(model, app)",
    "starts_with(tool_key, 'read')",
    "contains(tool_key, model)",
    "tool_key LIKE 'read%'",
    "model NOT LIKE '_a%'",
    "ts > ts",
    "coalesce(ts, ts)",
    "ts IS NULL OR pos > 3",
    "STALLED and Tool_Call",
    "(((input_tokens)))",
    "prompt_delta <= -1",
    "2147483647 + http_status",
    "model < app",
    "tool_key >= 'read'",
    "response_kind BETWEEN 'a' AND 'm'",
    "stalled < tool_call",
    "ts BETWEEN ts AND ts",
    "'a' || NULL",
    "NULL || model",
    "coalesce(NULL, NULL)",
    "CASE WHEN NULL THEN 1 ELSE 2 END",
    "-cost_usd",
    "input_tokens IN (100, 2.5)",
    "cost_usd IN (0.5, 1)",
    "CAST(true AS DOUBLE)",
    "CAST(stalled AS INTEGER)",
    "coalesce(NULL / NULL, input_tokens)",
    "coalesce(NULL + NULL, cost_usd)",
    "cost_usd > 0.12345678905",
    "cost_usd = 0.00000000005",
    "-(input_tokens / output_tokens) IS DISTINCT FROM 0",
    "input_tokens - - pos",
    "9223372036854775807 + input_tokens",
]
REFUSED = [
    "tool_key = 1",  # a string beside a number: DuckDB's cast rules
    "stalled = 1",
    "upper(model) SIMILAR TO 'x'",
    "regexp_matches(tool_key, 'a.c')",
    "input_tokens ^ 2",
    "cost_usd / 2",  # a decimal's division and product: DuckDB's own width rules
    "cost_usd * 2",
    "CAST(model AS BIGINT)",
    "CAST(ts AS VARCHAR)",
    "ts > '2024-01-01'",
    "no_such_column > 1",
    "input_tokens >",
    "a < b < c",
    "1e3",
    '"tool_key"',
    "tool_call AND 1",
    "input_tokens -- pos",
    "input_tokens /* pos */",
    "input_tokens == 1",
]

strings = st.one_of(
    st.sampled_from(["", "a", "empty", "text", "read", "read:1", "m1", "it's", "é", "Äb", "_a"]),
    st.text(max_size=4),
)
_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "VARCHAR": strings,
    "BIGINT": st.one_of(st.integers(-3, 1200), st.integers(-(2**63), 2**63 - 1), st.just(0)),
    "INTEGER": st.one_of(st.integers(-3, 600), st.integers(-(2**31), 2**31 - 1), st.just(0)),
    "BOOLEAN": st.booleans(),
    "DECIMAL(18,10)": st.decimals(
        min_value=-(10**7), max_value=10**7, places=10, allow_nan=False, allow_infinity=False
    ).map(lambda d: d.quantize(Decimal("1e-10"))),
    "TIMESTAMP": st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2100, 1, 1)),
}
rows = st.fixed_dictionaries(
    {name: st.one_of(st.none(), _VALUES[kind]) for name, kind in EVENT_COLUMNS.items()}
)

_DB = duckdb.connect()
_FROM = "(SELECT {}) lf_events".format(
    ", ".join(f"CAST(${i + 1} AS {t}) AS {c}" for i, (c, t) in enumerate(EVENT_COLUMNS.items()))
)


def duckdb_says(exprs: list[str], row: dict[str, Any]) -> list[tuple[bool, Any]]:
    """For each expression, (True, DuckDB's value of it over ``row``) or (False, its error):
    all in one query, one by one where one fails."""
    params = [row[c] for c in EVENT_COLUMNS]
    try:
        found = _DB.execute(f"SELECT {', '.join(exprs)} FROM {_FROM}", params).fetchone()
    except duckdb.Error as exc:
        if len(exprs) == 1:
            return [(False, exc)]
        return [said for e in exprs for said in duckdb_says([e], row)]
    assert found is not None
    return [(True, v) for v in found]


def _same(got: Any, want: Any) -> bool:
    if want is None or got is None:
        return got is None and want is None
    return bool(got == want) and type(got) is type(want)


ALL = sorted({*PRESET_EXPRESSIONS, *TEST_EXPRESSIONS, *TRICKY})
COMPILED = {e: compile_expr(e) for e in ALL}
UNSURE: dict[str, int] = {}


def test_what_policies_use_compiles() -> None:
    refused = [e for e in ALL if COMPILED[e] is None]
    assert refused == [], refused
    assert len(PRESET_EXPRESSIONS) > 20 and len(TEST_EXPRESSIONS) > 10


@pytest.mark.parametrize("expr", REFUSED)
def test_what_it_does_not_know_it_refuses(expr: str) -> None:
    assert compile_expr(expr) is None


@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(row=rows)
def test_compiled_expressions_give_duckdbs_answers(row: dict[str, Any]) -> None:
    said = [v for i in range(0, len(ALL), 8) for v in duckdb_says(ALL[i : i + 8], row)]
    for (expr, fn), (ok, want) in zip(COMPILED.items(), said, strict=True):
        assert fn is not None
        try:
            got = fn(row)
        except Unsure:
            UNSURE[expr] = UNSURE.get(expr, 0) + 1
            continue
        assert ok, f"{expr}: DuckDB fails ({want}), Python gives {got!r}"
        assert _same(got, want), f"{expr} over {row}: Python {got!r}, DuckDB {want!r}"


# -- the guard ----------------------------------------------------------------------------
KINDS = ["text", "tool_call", "truncated_tool_call", "thinking_only", "empty", None]
call_st = st.fixed_dictionaries(
    {
        "response_kind": st.sampled_from(KINDS),
        "finish_reason": st.sampled_from(["stop", "length", "tool_calls", None]),
        "input_tokens": st.sampled_from([100, 200, 1000, None]),
        "output_tokens": st.sampled_from([1, 3, 600, None]),
        "visible_chars": st.sampled_from([None, 0, 5, 40]),
        "content_chars": st.sampled_from([None, 0, 5, 40]),
        "reply_saved": st.sampled_from([None, True, False]),
        "cost_usd": st.sampled_from([0.5, 1.0, 2.0, 0.1, None]),
        "session_id": st.sampled_from(["a", "b"]),
        "turn_id": st.sampled_from(["t1", "t2", None]),
        "tool_key": st.sampled_from([None, "read:1", "edit:2"]),
        "error_key": st.sampled_from([None, "e1"]),
        "refused": st.sampled_from([None, True, False]),
        "gap": st.sampled_from([0, 1, 30, 400]),
    }
)


def calls_of(drawn: list[dict[str, Any]]) -> list[Call]:
    out, t = [], datetime(2025, 1, 1)
    for i, d in enumerate(drawn):
        t = t + timedelta(seconds=d["gap"])
        fields = {k: v for k, v in d.items() if k != "gap"}
        out.append(Call(call_id=f"c{i}", ts=t, **fields))
    return out


# A policy whose expressions Python does not compile (a regular expression): DuckDB's.
REFUSING = parse_policy(
    "refusing",
    {"type": "counter", "count": "regexp_matches(coalesce(tool_key, ''), '^read')", "stop": 3},
    "test",
)
ITS_TWIN = parse_policy(
    "refusing",
    {"type": "counter", "count": "starts_with(tool_key, 'read')", "stop": 3},
    "test",
)


def decisions(guard: Guard, calls: list[Call]) -> list[Decision]:
    return [guard.feed(c) for c in calls] + guard.finish()


@settings(max_examples=40, deadline=None, derandomize=True)
@given(drawn=st.lists(call_st, min_size=1, max_size=25))
def test_a_policy_python_does_not_compile_is_decided_by_duckdb(drawn: list[dict[str, Any]]) -> None:
    calls = calls_of(drawn)
    refusing, twin = Guard(REFUSING), Guard(ITS_TWIN)
    assert refusing._compiled is None and twin._compiled is not None
    assert decisions(refusing, calls) == decisions(twin, calls)
    assert refusing.trips == twin.trips


@settings(max_examples=25, deadline=None, derandomize=True)
@given(drawn=st.lists(call_st, min_size=2, max_size=30), cut=st.integers(0, 30))
def test_a_pickled_guard_goes_on_deciding_the_same(drawn: list[dict[str, Any]], cut: int) -> None:
    """Fed half, pickled, unpickled, fed the rest: the decisions of one guard fed all, for
    every preset and for a policy DuckDB evaluates."""
    calls = calls_of(drawn)
    cut = min(cut, len(calls))
    for p in [*all_policies(), REFUSING]:
        whole = decisions(Guard(p), calls)
        first = Guard(p)
        said = [first.feed(c) for c in calls[:cut]]
        again = pickle.loads(pickle.dumps(first))
        said += decisions(again, calls[cut:])
        assert said == whole, p.name
        assert again.trips == [d for d in whole if d.action != "continue"], p.name


def test_every_preset_is_evaluated_in_python() -> None:
    assert all(Guard(p)._compiled is not None for p in all_policies())


def test_a_live_guard_loads_neither_duckdb_nor_pyarrow() -> None:
    """A fresh interpreter imports the guard, loads every preset and feeds it calls: DuckDB,
    pyarrow, numpy and the engine are never imported."""
    script = (
        "import sys\n"
        "from datetime import datetime, timedelta\n"
        "from analyzer.guards.guard import Call, Guard\n"
        "from analyzer.guards.policy import all_policies\n"
        "t = datetime(2025, 1, 1)\n"
        "calls = [Call(call_id=f'c{i}', session_id='s', ts=t + timedelta(seconds=i),\n"
        "              response_kind=k, input_tokens=100, output_tokens=2, cost_usd=0.4,\n"
        "              tool_key='read:1' if k == 'tool_call' else None, finish_reason='length')\n"
        "         for i, k in enumerate(['tool_call', 'empty', 'text'] * 4)]\n"
        "trips = 0\n"
        "for p in all_policies():\n"
        "    g = Guard.load(p.name)\n"
        "    trips += sum(g.feed(c).action != 'continue' for c in calls) + len(g.finish())\n"
        "heavy = ('duckdb', 'pyarrow', 'numpy', 'analyzer.engine.engine')\n"
        "print(trips, [m for m in heavy if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    trips, loaded = done.stdout.split(" ", 1)
    assert int(trips) > 0 and loaded.strip() == "[]", done.stdout
