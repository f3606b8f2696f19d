"""mini-swe-agent 1.x trajectories on the eleven real runs in ../shared/samples/real-loops (read
in place), against truth.json, and on hand-written trajectories of the same shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.formats import conversation_json, mini_swe_agent
from analyzer.ingest.base import Head, IngestOptions
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import assert_accounted, q, shared_samples, truth_at_collection

FOLDER = "conversation_json"


def real_loops() -> Path:
    return shared_samples() / "real-loops"


# The files, as the tests are collected (none without ../shared: see truth_at_collection).
NAMES = sorted(k for k in truth_at_collection("real-loops") if k.startswith(FOLDER + "/"))


def truth() -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = json.loads((real_loops() / "truth.json").read_text())[
        "files"
    ]
    return {k: v for k, v in files.items() if k.startswith(FOLDER + "/")}


def ingest(store: Store, *paths: Path) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False))


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, dict[str, int]]]:
    names = sorted(truth())
    with open_store(tmp_path_factory.mktemp("mini") / "m.duckdb") as store:
        reports = ingest(store, *(real_loops() / n for n in names))
        assert {r.format for r in reports} == {"mini_swe_agent"}
        yield store, {n: int(r.source_id or 0) for n, r in zip(names, reports, strict=True)}


def test_all_eleven_runs_are_read_as_mini_swe_agent(real: tuple[Store, dict[str, int]]) -> None:
    store, ids = real
    assert len(ids) == 11
    # Two runs of one task (django__django-12713, two configurations) stay two sessions.
    assert q(store, "SELECT count(DISTINCT session_id) FROM calls") == [(11,)]
    assert q(store, "SELECT sum(rows_duplicate), sum(rows_rejected) FROM sources") == [(0, 0)]
    assert_accounted(store)


@pytest.mark.parametrize("rel", NAMES)
def test_calls_tokens_and_dollars_equal_the_truth(
    real: tuple[Store, dict[str, int]], rel: str
) -> None:
    store, ids = real
    want = truth()[rel]
    [(calls, prompt, output, usd, bases, models)] = q(
        store,
        """SELECT count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd),
                  list(DISTINCT cost_basis ORDER BY cost_basis), list(DISTINCT model)
           FROM calls WHERE source_id = ?""",
        [ids[rel]],
    )
    assert calls == want["calls"] == want.get("file_api_calls", calls)
    assert (prompt, output) == (want["prompt_tokens"], want["output_tokens"])
    # The file's own instance_cost, to the cent (exactly, in fact).
    assert abs(usd - Decimal(str(want["reported_cost_usd"]))) < Decimal("0.005")
    # OpenRouter's usage.cost in every response (billed) where the run kept it; else the
    # stated run cost divided over the calls: never $0, never unpriced.
    assert bases == (["billed"] if want.get("sum_usage_cost_usd") else ["apportioned"])
    assert None not in models and len(models) == 1


@pytest.mark.parametrize("rel", NAMES)
def test_the_runs_verdict_and_format_errors(real: tuple[Store, dict[str, int]], rel: str) -> None:
    store, ids = real
    want = truth()[rel]
    [(status, outcome, n, limit)] = q(
        store,
        "SELECT exit_status, outcome, reported_calls, step_limit FROM runs WHERE source_id = ?",
        [ids[rel]],
    )
    assert status in ("Submitted", "LimitsExceeded")
    assert outcome == {"Submitted": "completed", "LimitsExceeded": "step_limit"}[status]
    assert n == want["calls"]
    if status == "LimitsExceeded":
        assert limit == n  # it ran to its step limit
    refused = [
        seq
        for (seq,) in q(
            store,
            """SELECT c.seq FROM messages m JOIN calls c ON c.call_id = m.call_id
               WHERE m.kind = 'format_error' AND m.source_id = ? ORDER BY 1""",
            [ids[rel]],
        )
    ]
    assert refused == want["format_error_calls"]


@pytest.mark.parametrize("rel", NAMES)
def test_actions_are_tool_calls_and_observations_their_results(
    real: tuple[Store, dict[str, int]], rel: str
) -> None:
    """Every reply the agent did not refuse has one action, answered by one observation; no
    observation starts a turn (one prompt, one turn per run)."""
    store, ids = real
    want = truth()[rel]
    sid = ids[rel]
    [(actions, tied, results, prompts, turns)] = q(
        store,
        """SELECT count(*) FILTER (WHERE c.kind = 'tool_call'),
                  count(r.tool_use_id) FILTER (WHERE c.kind = 'tool_call'),
                  (SELECT count(*) FROM messages WHERE kind = 'tool_result' AND source_id = $s),
                  (SELECT count(*) FROM messages WHERE kind = 'prompt' AND source_id = $s),
                  (SELECT count(DISTINCT turn_id) FROM calls WHERE source_id = $s)
           FROM messages c
           LEFT JOIN messages r ON r.kind = 'tool_result' AND r.tool_use_id = c.tool_use_id
           WHERE c.source_id = $s""",
        {"s": sid},
    )
    refused = len(want["format_error_calls"])
    assert actions == tied == results == want["calls"] - refused
    assert (prompts, turns) == (1, 1)


def test_the_idle_loop_is_79_identical_actions_with_the_same_observation(
    real: tuple[Store, dict[str, int]],
) -> None:
    """repo_install_express: `true` 79 times (calls 22-100) until the step limit."""
    store, ids = real
    rel = next(r for r in ids if "repo_install_express" in r)
    rows = q(
        store,
        """SELECT c.seq, a.tool_args_hash, r.tool_result_hash, a.excerpt
           FROM calls c
           JOIN messages a ON a.call_id = c.call_id AND a.kind = 'tool_call'
           JOIN messages r ON r.tool_use_id = a.tool_use_id AND r.kind = 'tool_result'
           WHERE c.source_id = ? AND c.seq >= 22 ORDER BY c.seq""",
        [ids[rel]],
    )
    assert [s for s, *_ in rows] == list(range(22, 101))
    assert {(a, r) for _, a, r, _ in rows} == {(rows[0][1], rows[0][2])}
    assert rows[0][3] == "true"


# --- hand-written trajectories -----------------------------------------------------------------

FORMAT_ERROR = "Please always provide EXACTLY ONE action in triple backticks, found {{n}} actions."


def reply(text: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    extra = {
        "response": {
            "id": "r",
            "model": "gpt-5-mini",
            "created": 1767698210,
            "choices": [{"finish_reason": "stop"}],
            "usage": usage,
        }
    }
    return {"role": "assistant", "content": text, "extra": extra if usage else {}}


def said(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def trajectory(messages: list[dict[str, Any]], **info: Any) -> dict[str, Any]:
    base = {
        "exit_status": "Submitted",
        "submission": "",
        "model_stats": {"instance_cost": 0.5, "api_calls": 3},
        "mini_version": "1.15.0",
        "config": {
            "agent": {"format_error_template": FORMAT_ERROR, "step_limit": 3, "cost_limit": 2.0},
            "model": {"model_name": "openai/gpt-5-mini"},
        },
    }
    base.update(info)
    return {
        "info": base,
        "messages": [{"role": "system", "content": "Use bash."}, said("Fix the bug."), *messages],
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "t-1",
    }


def write(tmp_path: Path, doc: object, name: str = "t.traj.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def test_observations_timeouts_and_refusals(store: Store, tmp_path: Path) -> None:
    doc = trajectory(
        [
            reply("Look.\n```bash\nls\n```"),
            said("<returncode>0</returncode>\n<output>\na.py\n</output>"),
            reply("Two.\n```bash\nls\n```\n```bash\npwd\n```"),
            said("Please always provide EXACTLY ONE action in triple backticks, found 2 actions."),
            reply("Run.\n```bash\npython a.py\n```"),
            said("<returncode>1</returncode>\n<output>\nTraceback\n</output>"),
            said(""),  # the exception that ended the run (a limit): the agent's, no prompt
        ],
        exit_status="LimitsExceeded",
    )
    [report] = ingest(store, write(tmp_path, doc))
    # 9 messages and info; every one loaded
    assert (report.format, report.rows_read, report.rows_loaded, report.calls) == (
        "mini_swe_agent",
        10,
        10,
        3,
    )
    got = q(
        store,
        """SELECT kind, tool_name, excerpt, is_error, tool_use_id IS NOT NULL FROM messages
           WHERE kind IN ('tool_call', 'tool_result', 'format_error', 'system', 'prompt')
           ORDER BY idx""",
    )
    assert got == [
        ("system", None, "Use bash.", None, False),
        ("prompt", None, "Fix the bug.", None, False),
        ("tool_call", "bash", "ls", None, True),
        ("tool_result", None, "<returncode>0</returncode>\n<output>\na.py\n</output>", False, True),
        ("format_error", None, got[4][2], True, False),
        ("tool_call", "bash", "python a.py", None, True),
        ("tool_result", None, got[6][2], True, True),
        ("system", None, "", None, False),
    ]
    assert q(store, "SELECT outcome, step_limit, cost_limit_usd, model FROM runs") == [
        ("step_limit", 3, Decimal(2), "openai/gpt-5-mini")
    ]
    # No cost stated per call: the run's $0.50 divided evenly (no tokens to weigh them by).
    assert q(store, "SELECT cost_basis, cost_usd FROM calls ORDER BY seq") == [
        ("apportioned", Decimal("0.1666666667")),
        ("apportioned", Decimal("0.1666666666")),
        ("apportioned", Decimal("0.1666666667")),
    ]
    assert_accounted(store)


def test_the_same_refusal_hashes_the_same(store: Store, tmp_path: Path) -> None:
    refusal = "Please always provide EXACTLY ONE action in triple backticks, found 0 actions."
    doc = trajectory([reply("Hmm."), said(refusal), reply("Hmm!"), said(refusal)])
    ingest(store, write(tmp_path, doc))
    hashes = q(store, "SELECT DISTINCT tool_result_hash FROM messages WHERE kind = 'format_error'")
    assert len(hashes) == 1


def test_a_python_style_action_is_a_tool_call(store: Store, tmp_path: Path) -> None:
    """A fork whose model answers in code that calls the agent's functions: the whole reply is
    the action, named by the function its system prompt shows and the reply calls."""
    code = "def look():\n    cmd = 'x = Item(1)'\n    res = exec_bash_cmd(cmd)\n    return res"
    doc = trajectory([reply(code), said("<returncode>0</returncode>\n<output>\n</output>")])
    doc["messages"][0]["content"] = "Call exec_bash_cmd(cmd) or print_code_context(path, span)."
    ingest(store, write(tmp_path, doc))
    assert q(store, "SELECT tool_name, excerpt FROM messages WHERE kind = 'tool_call'") == [
        ("exec_bash_cmd", code)
    ]


def test_the_agents_own_action_pattern_is_used(store: Store, tmp_path: Path) -> None:
    doc = trajectory([reply("```sh\nls -la\n```"), said("Observation: {'returncode': 2}")])
    doc["info"]["config"]["agent"]["action_regex"] = r"```sh\s*\n(.*?)\n```"
    ingest(store, write(tmp_path, doc))
    assert q(store, "SELECT kind, excerpt, is_error FROM messages WHERE kind LIKE 'tool%'") == [
        ("tool_call", "ls -la", None),
        ("tool_result", "Observation: {'returncode': 2}", True),
    ]


def test_per_call_costs_win_over_the_run_total(store: Store, tmp_path: Path) -> None:
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 20,
        "cost": 0.004,
        "completion_tokens_details": {"reasoning_tokens": 8},
    }
    doc = trajectory([reply("```bash\nls\n```", usage), said("<returncode>0</returncode>")])
    ingest(store, write(tmp_path, doc))
    assert q(store, "SELECT cost_basis, cost_usd, reasoning_tokens, output_final FROM calls") == [
        ("billed", Decimal("0.004"), 8, True)
    ]
    assert q(store, "SELECT reported_cost_usd, cost_apportioned FROM runs") == [
        (Decimal("0.5"), False)
    ]


def test_sniffing_tells_format_1_from_1_1() -> None:
    v1 = json.dumps(trajectory([]), indent=2).encode()
    assert mini_swe_agent.sniff(Head(v1, None, "utf-8"))
    newer = json.loads(v1)
    newer["info"]["mini_version"] = "2.2.7"
    newer["trajectory_format"] = "mini-swe-agent-1.1"
    head = Head(json.dumps(newer).encode(), None, "utf-8")
    assert not mini_swe_agent.sniff(head) and conversation_json.sniff(head)
    for path in (shared_samples() / "real-world" / "conversation_json").rglob("*.json"):
        assert not mini_swe_agent.sniff(Head(path.read_bytes()[:65536], None, "utf-8")), path


def test_bad_values_are_read_as_missing(store: Store, tmp_path: Path) -> None:
    doc = trajectory(
        [
            reply("```bash\nls\n```"),
            {"content": "no role"},
            7,
            {"role": "assistant", "content": 5, "extra": {"response": []}},
        ]
    )
    doc["info"]["model_stats"] = {"instance_cost": "lots", "api_calls": -1}
    doc["info"]["config"]["agent"]["action_regex"] = "(unclosed"
    [report] = ingest(store, write(tmp_path, doc))
    assert report.rows_rejected == 2 and report.calls == 2
    assert q(store, "SELECT line FROM rejects ORDER BY line") == [(4,), (5,)]
    assert q(store, "SELECT reported_cost_usd, reported_calls FROM runs") == [(None, None)]
    assert_accounted(store)


def test_a_trajectory_without_messages_is_one_line_error(tmp_path: Path) -> None:
    path = write(tmp_path, {"info": {"mini_version": "1.9.1"}, "messages": "gone"})
    result = CliRunner().invoke(cli, ["ingest", "--db", str(tmp_path / "s.duckdb"), str(path)])
    assert result.exit_code == 3
    assert result.stderr.strip().splitlines() == [
        f"Error: {path}: a mini-swe-agent trajectory without a messages list"
    ]
