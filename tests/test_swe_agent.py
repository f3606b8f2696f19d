"""SWE-agent trajectories (``.traj``): the real 0.x run in ../shared/samples/real-loops, and
hand-written 1.x runs shaped as SWE-agent 1.x writes them (``sweagent/agent/agents.py``:
``add_step_to_history``, ``add_step_to_trajectory``, ``get_trajectory_data``; the retry agent's
``attempts``)."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from analyzer.engine.store import Store
from analyzer.errors import InputError
from analyzer.formats import swe_agent
from analyzer.ingest.base import IngestOptions
from analyzer.ingest.reading import read_head
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import assert_accounted, counts, q, shared_samples

REAL = "swe_agent_traj/SWE-agent__SWE-agent/pydicom__pydicom-1458.traj"


def ingest(store: Store, *paths: Path, **opts: Any) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False, **opts))


def write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")  # as SWE-agent writes it
    return path


def real_loops() -> Path:
    return shared_samples() / "real-loops"


# --- The real 0.x run ---------------------------------------------------------------------------


def test_the_real_run_matches_its_truth(store: Store) -> None:
    truth = json.loads((real_loops() / "truth.json").read_text())["files"][REAL]
    [r] = ingest(store, real_loops() / REAL)
    assert (r.format, r.status, r.rows_rejected) == ("swe_agent", "loaded", 0)
    # 26 history entries (one demonstration, skipped), 12 trajectory steps, the info.
    assert counts(r) == (39, 38, 0, 0, 1)
    assert r.calls == truth["calls"] == 12
    run = q(
        store,
        """SELECT session_id, agent, model, exit_status, outcome, reported_calls,
                  reported_input_tokens, reported_output_tokens, reported_cost_usd::DOUBLE,
                  cost_apportioned, result_excerpt FROM runs""",
    )
    [(session, agent, model, status, verdict, n, sent, received, usd, apportioned, result)] = run
    assert session.startswith("pydicom__pydicom-1458@")
    assert (agent, model, status, verdict) == ("swe-agent", None, truth["exit_status"], "completed")
    assert (n, sent, received) == (truth["calls"], truth["prompt_tokens"], truth["output_tokens"])
    assert usd == pytest.approx(truth["reported_cost_usd"]) and apportioned
    assert result.startswith("diff --git a/pydicom/pixel_data_handlers/numpy_handler.py")
    # No call states tokens, a model or a time: the run's stated cost and tokens are divided
    # over the 12 calls (apportioned), the tokens adding up to the file's own totals.
    [(calls, prompt, output, models, times, usd, bases, sessions, final)] = q(
        store,
        """SELECT count(*), sum(input_tokens), sum(output_tokens), count(model), count(ts),
                  sum(cost_usd)::DOUBLE, list(DISTINCT cost_basis), list(DISTINCT session_id),
                  list(DISTINCT output_final)
           FROM calls""",
    )
    assert (calls, models, times, bases, sessions) == (12, 0, 0, ["apportioned"], [session])
    assert (prompt, output) == (truth["prompt_tokens"], truth["output_tokens"]) == (122612, 1369)
    assert final == [False]  # no output count is the call's own
    assert round(usd, 2) == round(truth["reported_cost_usd"], 2)
    assert usd == pytest.approx(truth["reported_cost_usd"], abs=1e-9)
    assert_accounted(store)


def test_the_real_run_s_tokens_follow_what_each_call_was_sent(store: Store) -> None:
    """The 0.x file keeps what each call was sent (the history before its reply: the system
    prompt, the demonstration, the issue, the steps so far: 28,856 characters for the first,
    56,319 for the last, 497,765 in all, 4.06 a token of tokens_sent) and each reply: the
    stated tokens are divided in proportion to them, the remainder placed so that the shares
    add up to the totals exactly."""
    ingest(store, real_loops() / REAL)
    doc = json.loads((real_loops() / REAL).read_text())
    sent, replies, before = [], [], 0
    for m in doc["history"]:
        if m["role"] == "assistant":
            sent.append(before)
            replies.append(len(m["content"]))
        before += len(m["content"])
    assert (sent[0], sent[-1], sum(sent)) == (28856, 56319, 497765)
    rows = q(store, "SELECT input_tokens, output_tokens FROM calls ORDER BY seq")
    assert [i for i, _ in rows] == _shares(122612, sent)
    assert [o for _, o in rows] == _shares(1369, replies)
    assert rows[0] == (7108, 71) and rows[-1] == (13873, 52)
    # (the cost stays divided evenly: the 0.x file names no model to price the shares by)
    assert q(store, "SELECT max(cost_usd) - min(cost_usd) <= 1e-10 FROM calls") == [(True,)]


def _shares(total: int, weights: list[int]) -> list[int]:
    """``total`` in proportion to ``weights``, each share the difference of rounded running
    totals (computed here with fractions, apart from the reader's own arithmetic)."""
    upto = [Fraction(total * sum(weights[: i + 1]), sum(weights)) for i in range(len(weights))]
    rounded = [int(u + Fraction(1, 2)) for u in upto]
    return [b - a for a, b in zip([0, *rounded], rounded, strict=False)]


def test_the_real_run_s_actions_are_tied_to_their_observations(store: Store) -> None:
    ingest(store, real_loops() / REAL)
    tools = q(
        store,
        """SELECT c.tool_name, r.excerpt IS NOT NULL, r.tool_result_hash IS NOT NULL
           FROM messages c LEFT JOIN messages r
             ON r.kind = 'tool_result' AND r.tool_use_id = c.tool_use_id
           WHERE c.kind = 'tool_call' ORDER BY c.idx""",
    )
    assert [t[0] for t in tools] == [
        "create",
        "edit",
        "python",
        "find_file",
        "open",
        "edit",
        "edit",
        "edit",
        "edit",
        "python",
        "rm",
        "submit",
    ]
    assert all(tied and hashed for _name, tied, hashed in tools)
    # Each of the 12 calls made one tool call; the issue is the one prompt, observations are
    # never prompts, and the last result (submit's) is the patch.
    kinds = dict(q(store, "SELECT kind, count(*) FROM messages GROUP BY 1"))
    assert kinds == {"system": 1, "prompt": 1, "text": 12, "tool_call": 12, "tool_result": 12}
    assert q(store, "SELECT count(DISTINCT turn_id), count(*) FROM calls") == [(1, 12)]
    assert q(store, "SELECT sum(tool_call_count) FROM calls") == [(12,)]
    [(last,)] = q(
        store, "SELECT excerpt FROM messages WHERE kind = 'tool_result' ORDER BY idx DESC LIMIT 1"
    )
    assert last.lstrip().startswith("diff --git")
    # Calls 7 and 8 sent the same edit and got the same syntax error back: the same action
    # and the same result hash (a repeat a detector can see); call 6's edit was another.
    edits = q(
        store,
        """SELECT c.tool_args_hash, r.tool_result_hash FROM messages c JOIN messages r
             ON r.kind = 'tool_result' AND r.tool_use_id = c.tool_use_id
           WHERE c.kind = 'tool_call' AND c.tool_name = 'edit' ORDER BY c.idx""",
    )
    assert edits[2] == edits[3] and edits[1] != edits[2] and len(set(edits)) == 4


# --- SWE-agent 1.x, written by hand in its shape -------------------------------------------------

PATCH = "diff --git a/src/a.py b/src/a.py\n--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-x\n+y\n"
CONFIG = {
    "env": {"deployment": {"image": "python:3.11", "type": "docker"}, "repo": None},
    "agent": {
        "name": "main",
        "model": {
            "name": "claude-3-5-sonnet-20241022",
            "per_instance_cost_limit": 0.4,
            "total_cost_limit": 0.0,
            "per_instance_call_limit": 0,
            "temperature": 0.0,
        },
        "max_requeries": 3,
        "type": "default",
    },
    "problem_statement": {"id": "demo__repo-7", "type": "text", "text": "Fix a.py"},
    "output_dir": "trajectories/demo",
}


def _tool_call(use_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "index": 0,
        "function": {"arguments": json.dumps(arguments), "name": name},
        "id": use_id,
        "type": "function",
    }


def _action(text: str, action: str, tool_call: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "thought": text,
        "action": action,
        "agent": "main",
        "tool_calls": None if tool_call is None else [tool_call],
        "message_type": "action",
        "thinking_blocks": [],
    }


def _step(response: str, action: str, observation: str, query: list[Any]) -> dict[str, Any]:
    return {
        "action": action,
        "observation": observation,
        "response": response,
        "thought": response,
        "execution_time": 0.42,
        "state": {"working_dir": "/repo"},
        "query": query,
        "extra_info": {},
    }


def v1_doc() -> dict[str, Any]:
    """A function-calling 1.x run that hit its cost limit: two replies acted on, one refused
    (a format error, kept only in the trajectory), then SWE-agent's stand-in and autosubmission.
    """
    view = _tool_call("toolu_01", "str_replace_editor", {"command": "view", "path": "/repo/a.py"})
    test = _tool_call("toolu_02", "bash", {"command": "python -m pytest -q"})
    system = {
        "role": "system",
        "content": "You are a helpful assistant.",
        "agent": "main",
        "message_type": "system_prompt",
    }
    history = [
        system,
        {
            "agent": "main",
            "content": "Here is a demonstration...",
            "is_demo": True,
            "role": "user",
            "message_type": "demonstration",
        },
        {
            "role": "user",
            "content": "<uploaded_files>/repo</uploaded_files> Fix a.py",
            "agent": "main",
            "message_type": "observation",
        },
        _action("Let me look at a.py.", "str_replace_editor view /repo/a.py", view),
        {
            "role": "tool",
            "content": "OBSERVATION:\n1\tx\n",
            "agent": "main",
            "message_type": "observation",
            "tool_call_ids": ["toolu_01"],
        },
        _action("Now the tests.", "python -m pytest -q", test),
        {
            "role": "tool",
            "content": "OBSERVATION:\n1 failed\n",
            "agent": "main",
            "message_type": "observation",
            "tool_call_ids": ["toolu_02"],
        },
        _action("Exit due to cost limit", "", None),
        {
            "role": "user",
            "content": "Exited (autosubmitted)",
            "agent": "main",
            "message_type": "observation",
        },
    ]
    trajectory = [
        _step("Let me look at a.py.", "str_replace_editor view /repo/a.py", "1\tx\n", [system]),
        _step("I will run pytest.", "", "", [system]),  # refused: no function call in it
        _step("Now the tests.", "python -m pytest -q", "1 failed\n", [system]),
        _step("Exit due to cost limit", "", PATCH, [{}]),
    ]
    return {
        "trajectory": trajectory,
        "history": history,
        "info": {
            "swe_agent_hash": "unavailable",
            "swe_agent_version": "1.1.0",
            "swe_rex_version": "1.2.1",
            "swe_rex_hash": "unavailable",
            "submission": PATCH,
            "exit_status": "submitted (exit_cost)",
            "edited_files30": "",
            "model_stats": {
                "instance_cost": 0.4242,
                "tokens_sent": 30000,
                "tokens_received": 900,
                "api_calls": 4,
            },
        },
        "replay_config": json.dumps(CONFIG),
        "environment": "main",
    }


def test_a_1x_run_with_a_refused_reply_and_a_stand_in(store: Store, tmp_path: Path) -> None:
    [r] = ingest(store, write(tmp_path / "demo__repo-7.traj", v1_doc()))
    assert (r.format, r.rows_rejected, r.calls) == ("swe_agent", 0, 3)
    # 9 history entries (one demonstration), 4 steps, the info.
    assert counts(r) == (14, 13, 0, 0, 1)
    calls = q(
        store,
        """SELECT seq, model, tool_call_count, ts IS NULL, cost_basis, line FROM calls
           ORDER BY seq""",
    )
    model = "claude-3-5-sonnet-20241022"
    assert calls == [
        (1, model, 1, True, "apportioned", 4),
        (2, model, 0, True, "apportioned", None),
        (3, model, 1, True, "apportioned", 6),
    ]
    assert q(store, "SELECT sum(cost_usd)::DOUBLE FROM calls") == [(pytest.approx(0.4242),)]
    msgs = q(store, "SELECT kind, tool_name, tool_use_id, excerpt FROM messages ORDER BY idx")
    assert [m[0] for m in msgs] == [
        "system",
        "prompt",
        "text",
        "tool_call",
        "tool_result",
        "format_error",
        "text",
        "tool_call",
        "tool_result",
        "synthetic",
        "tool_result",
    ]
    assert msgs[3][1:3] == ("str_replace_editor", "toolu_01")
    assert msgs[4][2:] == ("toolu_01", "1\tx\n")  # the raw observation, not the template
    assert msgs[7][1:3] == ("bash", "toolu_02") and msgs[8][2] == "toolu_02"
    assert msgs[5][3] == "I will run pytest."
    assert msgs[9][3] == "Exit due to cost limit"
    assert msgs[10][2] is None  # the autosubmission's output answers no call
    [run] = q(
        store,
        """SELECT session_id, model, exit_status, outcome, reported_calls, reported_input_tokens,
                  reported_output_tokens, reported_cost_usd::DOUBLE, cost_apportioned,
                  cost_limit_usd::DOUBLE, step_limit, result_excerpt FROM runs""",
    )
    assert run[0].startswith("demo__repo-7@")
    assert run[1:] == (
        model,
        "submitted (exit_cost)",
        "cost_limit",
        4,
        30000,
        900,
        pytest.approx(0.4242),
        True,
        0.4,
        None,
        PATCH.strip(),
    )
    assert_accounted(store)


def test_a_run_read_again_as_it_grew_is_not_counted_twice(store: Store, tmp_path: Path) -> None:
    # SWE-agent rewrites the file after every step: a copy read mid-run, then the whole run.
    early = v1_doc()
    early["history"] = early["history"][:5]
    early["trajectory"] = early["trajectory"][:1]
    early["info"] = {"swe_agent_version": "1.1.0"}
    f = write(tmp_path / "demo__repo-7.traj", early)
    [first] = ingest(store, f)
    assert first.calls == 1
    write(f, v1_doc())
    [second] = ingest(store, f)
    assert second.rows_duplicate > 0
    assert q(store, "SELECT count(*), count(DISTINCT session_id) FROM calls") == [(3, 1)]
    assert_accounted(store)


def test_a_1x_run_s_tokens_follow_the_messages_each_step_sent(store: Store, tmp_path: Path) -> None:
    """1.x keeps the messages each step sent (``query``): the stated tokens_sent are divided
    in proportion to their characters, tokens_received to the replies' (the refused reply
    included: SWE-agent paid for it), and the cost, the model being known, follows the list
    prices of those shares."""
    doc = v1_doc()
    system = doc["history"][0]
    for step, extra in zip(doc["trajectory"][:3], (1000, 2000, 3000), strict=False):
        step["query"] = [system, {"role": "user", "content": "x" * extra}]
    [r] = ingest(store, write(tmp_path / "demo__repo-7.traj", doc))
    assert r.calls == 3
    sent = [len(system["content"]) + extra for extra in (1000, 2000, 3000)]
    replies = [len("Let me look at a.py."), len("I will run pytest."), len("Now the tests.")]
    rows = q(
        store,
        """SELECT input_tokens, output_tokens, output_final, cost_basis, cost_usd,
                  cost_estimate_usd FROM calls ORDER BY seq""",
    )
    assert [i for i, *_ in rows] == _shares(30000, sent)
    assert [o for _, o, *_ in rows] == _shares(900, replies)
    assert {(f, b) for _, _, f, b, _, _ in rows} == {(False, "apportioned")}
    assert sum(c for *_, c, _ in rows) == Decimal("0.4242")
    costs, estimates = [c for *_, c, _ in rows], [e for *_, e in rows]
    assert costs[0] < costs[1] < costs[2] and estimates[0] < estimates[1] < estimates[2]
    # the run keeps its stated totals as they were written
    assert q(store, "SELECT reported_input_tokens, reported_output_tokens FROM runs") == [
        (30000, 900)
    ]
    assert_accounted(store)


def test_a_run_read_mid_way_then_whole_has_the_whole_run_s_tokens(
    store: Store, tmp_path: Path
) -> None:
    """SWE-agent rewrites the file after each step with its totals so far: the calls read
    from the early copy are divided again when the file is read grown, so that the store
    holds the finished run's totals, never the early shares beside the new ones."""
    early = v1_doc()
    early["history"] = early["history"][:5]
    early["trajectory"] = early["trajectory"][:1]
    early["info"] = {
        "swe_agent_version": "1.1.0",
        "model_stats": {
            "instance_cost": 0.1,
            "tokens_sent": 9000,
            "tokens_received": 300,
            "api_calls": 1,
        },
    }
    f = write(tmp_path / "demo__repo-7.traj", early)
    ingest(store, f)
    assert q(store, "SELECT sum(input_tokens), sum(output_tokens), sum(cost_usd) FROM calls") == [
        (9000, 300, Decimal("0.1"))
    ]
    write(f, v1_doc())
    [second] = ingest(store, f)
    assert second.calls == 3
    assert q(
        store,
        """SELECT count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd),
                  list(DISTINCT cost_basis) FROM calls""",
    ) == [(3, 30000, 900, Decimal("0.4242"), ["apportioned"])]
    assert_accounted(store)
    # read again as it was, nothing changes; an older copy found elsewhere adds nothing
    (tmp_path / "old").mkdir()
    ingest(store, write(tmp_path / "old" / "demo__repo-7.traj", early))
    assert q(store, "SELECT count(*), sum(input_tokens), sum(cost_usd) FROM calls") == [
        (3, 30000, Decimal("0.4242"))
    ]
    assert_accounted(store)


def test_stated_tokens_without_a_stated_cost_stay_on_the_run(store: Store, tmp_path: Path) -> None:
    """SWE-agent writes an instance_cost of 0 where litellm could not price the model: no
    cost is divided, so nothing would say the calls' tokens were divided; they stay the
    run's."""
    doc = v1_doc()
    doc["info"]["model_stats"]["instance_cost"] = 0
    ingest(store, write(tmp_path / "demo__repo-7.traj", doc))
    assert q(store, "SELECT count(*), count(input_tokens), count(cost_usd) FROM calls") == [
        (3, 0, 0)
    ]
    assert q(store, "SELECT reported_input_tokens, cost_apportioned FROM runs") == [(30000, False)]


def test_the_real_1x_run_s_tokens_are_its_totals(store: Store) -> None:
    """The 1.x run in real-loops-2 (gpt-4o, 5 calls; its last reply, the submission, is in
    the trajectory only)."""
    rel = "swe_agent_traj/SWE-agent__SWE-agent/6e44b9__sweagenttestrepo-1c2844.traj"
    corpus = shared_samples() / "real-loops-2"
    truth = json.loads((corpus / "truth.json").read_text())["files"][rel]
    [r] = ingest(store, corpus / rel)
    assert r.calls == truth["calls"] == 5
    [(prompt, output, usd, bases)] = q(
        store,
        "SELECT sum(input_tokens), sum(output_tokens), sum(cost_usd), list(DISTINCT cost_basis) "
        "FROM calls",
    )
    assert (prompt, output, bases) == (
        truth["prompt_tokens"],
        truth["output_tokens"],
        ["apportioned"],
    )
    assert abs(usd - Decimal(str(truth["reported_cost_usd"]))) < Decimal("1e-9")
    assert q(store, "SELECT input_tokens FROM calls ORDER BY seq") == [
        (1190,),
        (1302,),
        (1417,),
        (1578,),
        (1654,),
    ]


def test_two_runs_of_one_instance_stay_two_sessions(store: Store, tmp_path: Path) -> None:
    # One folder per experiment, the same instance in each: another first reply, or the same
    # words with the provider's own tool-call id, is another run.
    other = v1_doc()
    other["history"][3]["content"] = other["trajectory"][0]["response"] = "Reading a.py first."
    same_words = v1_doc()
    same_words["history"][3]["tool_calls"][0]["id"] = "toolu_99"
    for folder, doc in (("a", v1_doc()), ("b", other), ("c", same_words)):
        (tmp_path / folder).mkdir()
        ingest(store, write(tmp_path / folder / "demo__repo-7.traj", doc))
    assert q(store, "SELECT count(*), count(DISTINCT session_id) FROM calls") == [(9, 3)]
    assert q(store, "SELECT count(*) FROM runs") == [(3,)]


def test_the_retry_agent_s_attempts(store: Store, tmp_path: Path) -> None:
    first, second = v1_doc(), v1_doc()
    second["history"][3]["content"] = second["trajectory"][0]["response"] = "Again: a.py."
    doc = {"attempts": [first, second], **copy.deepcopy(second)}  # the chosen one, again
    doc["info"]["model_stats"] = {
        "instance_cost": 0.9,
        "tokens_sent": 61000,
        "tokens_received": 1900,
        "api_calls": 9,
    }
    doc["replay_config"] = json.dumps(
        {
            **CONFIG,
            "agent": {
                "type": "retry",
                "agent_configs": [CONFIG["agent"]],
                "retry_loop": {"type": "chooser", "cost_limit": 1.5},
            },
        }
    )
    [r] = ingest(store, write(tmp_path / "demo__repo-7.traj", doc))
    assert r.rows_rejected == 0 and r.calls == 6  # both attempts; the copy is skipped
    assert r.rows_skipped == 2 + 2 + 9 + 4  # two demonstrations, two attempt infos, the copy
    assert q(store, "SELECT count(DISTINCT turn_id), sum(cost_usd)::DOUBLE FROM calls") == [
        (2, pytest.approx(0.9))
    ]
    assert q(store, "SELECT model, reported_calls, cost_limit_usd::DOUBLE FROM runs") == [
        ("claude-3-5-sonnet-20241022", 9, 1.5)
    ]
    assert_accounted(store)


def test_an_early_0x_stand_in_in_the_history(store: Store, tmp_path: Path) -> None:
    # Early 0.x wrote its stand-in into the history as a reply: ``action: exit_cost``.
    doc = {
        "environment": "swe_main",
        "trajectory": [
            {
                "action": "ls\n",
                "observation": "a.py\n",
                "response": "Listing.\n```\nls\n```",
                "state": "{}",
                "thought": "Listing.\n",
            },
            {
                "action": "exit_cost",
                "observation": "Exited",
                "response": "Exit due to cost limit",
                "state": "{}",
                "thought": "Exit due to cost limit",
            },
        ],
        "history": [
            {"role": "system", "content": "SETTING: ...", "agent": "primary"},
            {"role": "user", "content": "ISSUE: ...", "agent": "primary"},
            {
                "role": "assistant",
                "content": "Listing.\n```\nls\n```",
                "thought": "Listing.\n",
                "action": "ls\n",
                "agent": "primary",
            },
            {"role": "user", "content": "a.py\n(Open file: n/a)", "agent": "primary"},
            {
                "role": "assistant",
                "content": "Exit due to cost limit",
                "thought": "Exit due to cost limit",
                "action": "exit_cost",
                "agent": "primary",
            },
        ],
        "info": {
            "exit_status": "exit_cost",
            "model_stats": {
                "total_cost": 9.0,
                "instance_cost": 2.01,
                "tokens_sent": 1000,
                "tokens_received": 50,
                "api_calls": 2,
            },
        },
    }
    [r] = ingest(store, write(tmp_path / "x__y-1.traj", doc))
    assert (r.calls, r.rows_read, r.rows_loaded) == (1, 8, 8)
    assert [k for (k,) in q(store, "SELECT kind FROM messages ORDER BY idx")] == [
        "system",
        "prompt",
        "text",
        "tool_call",
        "tool_result",
        "synthetic",
    ]
    assert q(store, "SELECT outcome, result_excerpt, reported_cost_usd::DOUBLE FROM runs") == [
        ("cost_limit", "Exit due to cost limit", 2.01)
    ]
    assert q(store, "SELECT cost_usd::DOUBLE FROM calls") == [(2.01,)]


# --- Sniffing -----------------------------------------------------------------------------------


def _claimed(path: Path) -> bool:
    return swe_agent.sniff(read_head(path, str(path)))


def test_sniffing_claims_trajectories_only(tmp_path: Path) -> None:
    assert _claimed(real_loops() / REAL)
    assert _claimed(write(tmp_path / "v1.traj", v1_doc()))
    compact = tmp_path / "one-line.traj"
    compact.write_text(json.dumps(v1_doc()))
    assert _claimed(compact)
    samples = shared_samples()
    others = [p for p in samples.rglob("*") if p.is_file() and "swe_agent_traj" not in p.parts]
    assert any("mini-swe-agent" in str(p) for p in others)
    assert len(others) > 50
    assert [p for p in others if _claimed(p)] == []
    # A saved conversation that merely mentions a trajectory is not one.
    conv = write(
        tmp_path / "c.json", {"messages": [{"role": "user", "content": "x"}], "trajectory": [1, 2]}
    )
    assert not _claimed(conv)


def test_the_real_mini_swe_agent_files_are_not_taken(store: Store) -> None:
    folder = real_loops() / "conversation_json"
    reports = ingest(store, folder)
    assert reports and all(r.format != "swe_agent" for r in reports)


# --- Malformed input ----------------------------------------------------------------------------


def test_a_truncated_file_is_one_error(store: Store, tmp_path: Path) -> None:
    text = (real_loops() / REAL).read_text(encoding="utf-8")
    cut = tmp_path / "cut.traj"
    cut.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(InputError) as exc:
        ingest(store, cut)
    assert "not valid JSON" in str(exc.value) and exc.value.line is not None


def test_an_empty_or_foreign_document_is_one_error(store: Store, tmp_path: Path) -> None:
    empty = tmp_path / "empty.traj"
    empty.write_text("")
    with pytest.raises(InputError):
        ingest(store, empty, format="swe_agent")
    with pytest.raises(InputError, match="not a SWE-agent trajectory"):
        ingest(store, write(tmp_path / "list.traj", [1, 2]), format="swe_agent")


def test_bad_values_are_rejected_or_read_as_missing(store: Store, tmp_path: Path) -> None:
    doc = v1_doc()
    doc["history"] += [7, {"content": "no role"}, {"role": 5}, {"role": "critic"}]
    doc["trajectory"].append("not a step")
    doc["info"]["model_stats"] = {"instance_cost": "a lot", "tokens_sent": -3, "api_calls": 1.5}
    doc["replay_config"] = "{not json"
    [r] = ingest(store, write(tmp_path / "bad.traj", doc))
    assert r.rows_rejected == 5 and r.calls == 3
    assert q(store, "SELECT line, reason FROM rejects ORDER BY line, reason") == [
        (5, "trajectory step 5 is not an object"),
        (10, "history entry without a role"),
        (11, "history entry without a role"),
        (12, "history entry without a role"),
        (13, "history entry of role 'critic'"),
    ]
    assert q(store, "SELECT model, reported_calls, reported_cost_usd FROM runs") == [
        (None, None, None)
    ]
    assert q(store, "SELECT count(cost_usd) FROM calls") == [(0,)]
    assert_accounted(store)


ODD_VALUES: list[object] = [None, 7, -1.5, "text", [], [1, "x"], {}, {"a": [None]}, True]


def _paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every place a value can be in a document."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: object) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


# every odd value at every place of a document: CI runs it; the default run has the damaged-file
# tests
@pytest.mark.slow
def test_odd_values_anywhere_never_crash(store: Store, tmp_path: Path) -> None:
    base = v1_doc()
    base["replay_config"] = CONFIG  # an object, so its values are reached too
    paths = [p for p in _paths(base) if "query" not in p]
    assert len(paths) > 100
    for n, path in enumerate(paths):
        doc = copy.deepcopy(base)
        _set(doc, path, ODD_VALUES[n % len(ODD_VALUES)])
        try:
            reports = ingest(store, write(tmp_path / f"odd-{n}.traj", doc), format="swe_agent")
        except InputError:
            assert path[0] in ("trajectory", "history") and len(path) == 1, path
            continue
        for r in reports:
            assert r.rows_read == (
                r.rows_loaded + r.rows_rejected + r.rows_duplicate + r.rows_skipped
            ), path
    assert_accounted(store)
