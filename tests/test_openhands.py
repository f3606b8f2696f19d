"""The OpenHands reader: the real evaluation output in ../shared (read in place, figures from its
truth.json), and conversation folders written here in the shape of the agent SDK's own files
(``base_state.json`` + ``events/event-NNNNN-<id>.json``, as ``state.py`` and ``event_store.py``
write them and as the trajectory visualizer's real exports show them)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import analyzer.formats as registry
from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.errors import InputError
from analyzer.formats import openhands, places
from analyzer.ingest.base import IngestOptions
from analyzer.ingest.reading import read_head
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import assert_accounted, counts, env_of, q, shared_samples

REAL = "openhands_eval_output/OpenHands__OpenHands__pr10000/output.jsonl"
MAXED = "ponylang__ponyc-4588"  # ended "Agent reached maximum iteration in headless mode"
OH_VARS = {"OPENHANDS_CONVERSATIONS_DIR": None, "OPENHANDS_PERSISTENCE_DIR": None}


def ingest(store: Store, *paths: Path) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False))


def real_file() -> Path:
    return shared_samples() / "real-loops" / REAL


def truth() -> dict[str, Any]:
    data = json.loads((shared_samples() / "real-loops" / "truth.json").read_text())
    return dict(data["files"][REAL])


# --- The real evaluation output --------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, FileReport]]:
    with open_store(tmp_path_factory.mktemp("openhands") / "real.duckdb") as store:
        [report] = ingest(store, real_file())
        yield store, report


def test_real_output_calls_and_tokens_equal_truth(real: tuple[Store, FileReport]) -> None:
    store, r = real
    want = truth()
    assert (r.format, r.status, r.calls) == ("openhands", "loaded", want["calls"])
    # Three lines, three instances: each line is one record, its run row accounts for it.
    assert counts(r) == (3, 3, 0, 0, 0)
    got = q(store, "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM calls")[0]
    assert got == (want["calls"], want["prompt_tokens"], want["output_tokens"])
    per = {
        sid.split("@")[0]: (n, p, o)
        for sid, n, p, o in q(
            store,
            """SELECT session_id, count(*), sum(input_tokens), sum(output_tokens) FROM calls
               GROUP BY 1""",
        )
    }
    assert per == {
        i["instance_id"]: (i["calls"], i["prompt_tokens"], i["output_tokens"])
        for i in want["instances"]
    }
    assert_accounted(store)


def test_real_calls_are_priced_at_list_price(real: tuple[Store, FileReport]) -> None:
    """accumulated_cost is 0.0 (litellm could not price the proxy alias): no stated cost; the
    responses name the real model, which the price data knows."""
    store, _ = real
    got = q(
        store,
        """SELECT list(DISTINCT model), list(DISTINCT cost_basis), count(*) FILTER (WHERE
                  cost_usd > 0), count(*) FILTER (WHERE cost_usd = cost_estimate_usd)
           FROM calls""",
    )[0]
    assert got == (["meta-llama/llama-4-maverick"], ["estimated"], 105, 105)
    assert q(store, "SELECT count(*) FROM runs WHERE reported_cost_usd IS NOT NULL") == [(0,)]
    assert q(store, "SELECT bool_or(cost_apportioned) FROM runs") == [(False,)]


def test_real_run_verdicts(real: tuple[Store, FileReport]) -> None:
    store, _ = real
    want = {i["instance_id"]: i for i in truth()["instances"]}
    rows = q(
        store,
        """SELECT session_id, exit_status, outcome, is_error, step_limit, model, agent,
                  reported_calls, reported_input_tokens, reported_output_tokens
           FROM runs ORDER BY session_id""",
    )
    assert len(rows) == 3
    for sid, status, outcome, is_error, limit, model, agent, calls, prompt, output in rows:
        i = want[sid.split("@")[0]]
        assert (status, limit, model, agent) == (i["error"], 50, i["model"], "openhands")
        assert (calls, prompt, output) == (i["calls"], i["prompt_tokens"], i["output_tokens"])
        if sid.startswith(MAXED):
            assert status.startswith("RuntimeError: Agent reached maximum iteration in headless")
            assert (outcome, is_error) == ("step_limit", True)
        else:  # no error: the log states no verdict
            assert (status, outcome, is_error) == (None, None, False)


def test_real_tool_calls_are_tied_to_their_observations(real: tuple[Store, FileReport]) -> None:
    store, _ = real
    kinds = dict(q(store, "SELECT kind, count(*) FROM messages GROUP BY 1"))
    # 105 actions the model called (one per response here), 103 observations of them (the two
    # `finish` actions have none), the instruction of each instance, and two invalid tool
    # calls the agent refused without running them.
    assert kinds == {
        "system": 3,
        "prompt": 3,
        "text": 105,
        "tool_call": 105,
        "tool_result": 103,
        "format_error": 2,
    }
    untied = q(
        store,
        """SELECT count(*) FROM messages r WHERE r.kind = 'tool_result' AND NOT EXISTS (
               SELECT 1 FROM messages c WHERE c.kind = 'tool_call'
                  AND c.session_id = r.session_id AND c.tool_use_id = r.tool_use_id)""",
    )
    assert untied == [(0,)]
    # Every tool call names the call that made it; each call made one.
    got = q(
        store,
        """SELECT count(*), count(DISTINCT m.call_id), bool_and(c.tool_call_count = 1)
           FROM messages m JOIN calls c ON c.call_id = m.call_id WHERE m.kind = 'tool_call'""",
    )
    assert got == [(105, 105, True)]
    # The first command of the instance that ran out of iterations, and what came back.
    first = q(
        store,
        """SELECT c.tool_name, c.excerpt, r.is_error, r.excerpt FROM messages c
           JOIN messages r ON r.kind = 'tool_result' AND r.tool_use_id = c.tool_use_id
            AND r.session_id = c.session_id
           WHERE c.kind = 'tool_call' AND c.session_id LIKE ? ORDER BY c.idx LIMIT 1""",
        [MAXED + "@%"],
    )[0]
    command = '{"command":"cd /workspace/ponylang__ponyc__0.1 && ls -l"}'
    assert first[:3] == ("execute_bash", command, False)
    assert first[3].startswith("total 296")


def test_real_call_times_and_turns(real: tuple[Store, FileReport]) -> None:
    """A call's time is its action's (local time, read in --tz), its text the response's."""
    store, _ = real
    got = q(
        store,
        """SELECT ts, model, finish_reason_raw, content_chars > 0, response_kind, turn_id
           FROM calls WHERE session_id LIKE ? AND seq = 1""",
        [MAXED + "@%"],
    )[0]
    assert got[0].isoformat() == "2025-04-30T17:56:42.611674"
    assert got[1:5] == ("meta-llama/llama-4-maverick", "stop", True, "tool_call")
    assert got[5].endswith(":1")  # the instruction (event 1) started the one turn
    assert q(
        store, "SELECT count(DISTINCT turn_id), count(*) FILTER (WHERE ts IS NULL) FROM calls"
    ) == [(3, 0)]


def test_reading_the_real_output_again_adds_nothing(store: Store, tmp_path: Path) -> None:
    ingest(store, real_file())
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(real_file().read_bytes() + b"\n")
    [again] = ingest(store, copy)
    assert counts(again) == (3, 0, 0, 3, 0)  # (a blank line at the end is not a record)
    assert q(store, "SELECT count(*) FROM calls") == [(105,)]
    assert_accounted(store)


def test_a_bad_line_is_rejected_and_the_others_load(store: Store, tmp_path: Path) -> None:
    lines = real_file().read_bytes().splitlines(keepends=True)
    broken = tmp_path / "output.jsonl"
    broken.write_bytes(
        lines[0]
        + b'{"instance_id": "x", "history": \n'
        + lines[1]
        + b'{"instance_id": 7}\n'
        + b"[1, 2]\n"
        + lines[2][:5000]
    )
    [r] = ingest(store, broken)
    assert (r.format, counts(r)) == ("openhands", (6, 2, 4, 0, 0))
    assert q(store, "SELECT line, reason FROM rejects ORDER BY line") == [
        (2, "not valid JSON: unexpected end of data: line 2 column 1 (char 33)"),
        (4, "not an OpenHands evaluation instance (no instance_id and history)"),
        (5, "a JSON line that is not an object"),
        (6, "cut-off last line (is the log still being written?)"),
    ]
    assert q(store, "SELECT count(*) FROM calls") == [(23 + 33,)]
    assert_accounted(store)


def test_the_stuck_detector_is_the_verdict(store: Store, tmp_path: Path) -> None:
    """OpenHands' own stuck detector ends a run with AgentStuckInLoopError: in ``error``, or
    (when the line has none) as the words of an error observation."""
    line = json.loads(real_file().read_bytes().splitlines()[1])
    line["error"] = "AgentStuckInLoopError: Agent got stuck in a loop"
    quiet = json.loads(real_file().read_bytes().splitlines()[0])
    said = "AgentStuckInLoopError: Agent got stuck in a loop"
    quiet["history"].append(
        {
            "id": 999,
            "timestamp": "2025-04-30T16:40:00",
            "source": "agent",
            "message": said,
            "observation": "error",
            "content": said,
            "extras": {"error_id": ""},
        }
    )
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps(quiet) + "\n")
    ingest(store, path)
    rows = q(store, "SELECT exit_status, outcome, is_error FROM runs ORDER BY session_id")
    assert rows == [(said, "stuck", True), (said, "stuck", True)]
    assert q(store, "SELECT count(*) FROM messages WHERE kind = 'system' AND is_error") == [(1,)]


def test_a_tool_call_id_used_again_still_ties_each_result(store: Store, tmp_path: Path) -> None:
    """A proxy that numbers its tool calls from 1 in every response: the observation's
    ``cause`` (its action's event id) ties it, and the id is made the action's own."""
    line = json.loads(real_file().read_bytes().splitlines()[0])
    for ev in line["history"]:
        if "tool_call_metadata" in ev:
            ev["tool_call_metadata"]["tool_call_id"] = "toolu_01"
            for choice in ev["tool_call_metadata"]["model_response"]["choices"]:
                for tc in choice["message"]["tool_calls"]:
                    tc["id"] = "toolu_01"
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(line) + "\n")
    ingest(store, path)
    got = q(
        store,
        """SELECT count(DISTINCT c.tool_use_id), count(r.idx), count(DISTINCT r.idx),
                  count(*) FILTER (WHERE c.tool_args_hash IS NULL)
           FROM messages c LEFT JOIN messages r ON r.kind = 'tool_result'
            AND r.tool_use_id = c.tool_use_id WHERE c.kind = 'tool_call'""",
    )
    assert got == [(23, 22, 22, 0)]  # 23 calls, 22 results (the finish has none), one each


def test_an_empty_file_is_an_error(store: Store, tmp_path: Path) -> None:
    empty = tmp_path / "output.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        ingest(store, empty)


# --- Sniffing ----------------------------------------------------------------------------------


def test_the_sniffer_claims_only_openhands_files_in_shared_samples() -> None:
    root = shared_samples()
    claimed = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and p.stat().st_size and openhands.sniff(read_head(p, str(p)))
    )
    assert claimed == [f"real-loops/{REAL}"]


def first_claimer(path: Path) -> str | None:
    head = read_head(path, str(path))
    return next((f.name for f in registry.FORMATS if f.sniff(head)), None)


def test_every_file_of_a_conversation_is_openhands_first(tmp_path: Path) -> None:
    """No other sniffer (conversation_json takes any JSON with "role") sees them first."""
    folder = write_conversation(tmp_path / "conversations", FINISHED)
    files = [folder / openhands.BASE_STATE, *sorted((folder / "events").iterdir())]
    export = write_export(tmp_path / "export", FINISHED)
    files += [export / "trajectory.json", export / "events.json"]
    assert {f.name: first_claimer(f) for f in files} == dict.fromkeys(
        (f.name for f in files), "openhands"
    )
    assert first_claimer(real_file()) == "openhands"


def test_member_of_names_the_file_that_reads_an_event(tmp_path: Path) -> None:
    folder = write_conversation(tmp_path, FINISHED)
    event = next((folder / "events").iterdir())
    assert openhands.member_of(event) == folder / "base_state.json"
    assert openhands.member_of(folder / "base_state.json") is None
    assert openhands.member_of(real_file()) is None
    export = write_export(tmp_path / "export", FINISHED)
    assert openhands.member_of(export / "events.json") == export / "trajectory.json"
    (folder / "base_state.json").unlink()
    assert openhands.member_of(event) is None


# --- Conversation folders (the agent SDK's persistence) --------------------------------------

CONV = "5f0c1e2a-7b3d-4c8e-9a1f-2b3c4d5e6f70"
MODEL = "anthropic/claude-sonnet-4-5-20250929"
T = "2026-02-09T12:46:"


def text(t: str) -> list[dict[str, Any]]:
    return [{"cache_prompt": False, "type": "text", "text": t}]


def event(n: int, kind: str, source: str, **fields: Any) -> dict[str, Any]:
    """An event as ``model_dump_json(exclude_none=True)`` writes it: Event's fields first."""
    return {
        "id": f"{n:08x}-0000-4000-8000-00000000e7{n:02x}",
        "timestamp": f"{T}{10 + n:02d}.5",
        "source": source,
        **fields,
        "kind": kind,
    }


def action(n: int, rid: str, tool: str, args: dict[str, Any], thought: str = "") -> dict[str, Any]:
    tid = f"toolu_{n:02d}"
    arguments = json.dumps({**args, "security_risk": "LOW"})
    return event(
        n,
        "ActionEvent",
        "agent",
        thought=text(thought) if thought else [],
        thinking_blocks=[],
        action={**args, "kind": f"{tool.title()}Action"},
        tool_name=tool,
        tool_call_id=tid,
        tool_call={"id": tid, "name": tool, "arguments": arguments, "origin": "completion"},
        llm_response_id=rid,
        security_risk="LOW",
    )


def observation(n: int, of: dict[str, Any], out: str, **obs: Any) -> dict[str, Any]:
    return event(
        n,
        "ObservationEvent",
        "environment",
        tool_name=of["tool_name"],
        tool_call_id=of["tool_call_id"],
        observation={"content": text(out), "is_error": False, **obs, "kind": "TerminalObservation"},
        action_id=of["id"],
    )


def message(n: int, source: str, said: str, rid: str | None = None) -> dict[str, Any]:
    role = "user" if source == "user" else "assistant"
    msg: dict[str, Any] = {"role": role, "content": text(said), "thinking_blocks": []}
    if rid is not None:
        msg["reasoning_content"] = "The user wants a summary."
    extra = {"llm_response_id": rid} if rid else {}
    return event(
        n,
        "MessageEvent",
        source,
        llm_message=msg,
        activated_skills=[],
        extended_content=[],
        **extra,
    )


def usage(rid: str, prompt: int, out: int, read: int = 0) -> dict[str, Any]:
    return {
        "model": MODEL,
        "prompt_tokens": prompt,
        "completion_tokens": out,
        "cache_read_tokens": read,
        "cache_write_tokens": 0,
        "reasoning_tokens": 0,
        "context_window": 200000,
        "per_turn_token": prompt + out,
        "response_id": rid,
    }


def metrics(usages: list[dict[str, Any]], costs: list[float], total: float) -> dict[str, Any]:
    keys = ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")
    acc = {k: sum(u[k] for u in usages) for k in keys}
    return {
        "model_name": MODEL,
        "accumulated_cost": total,
        "accumulated_token_usage": {
            "model": MODEL,
            **acc,
            "reasoning_tokens": 0,
            "context_window": 200000,
            "per_turn_token": 0,
            "response_id": "",
        },
        "costs": [
            {"model": MODEL, "cost": c, "timestamp": 1770641200.0 + i} for i, c in enumerate(costs)
        ],
        "response_latencies": [
            {"model": MODEL, "latency": 2.5, "response_id": u["response_id"]} for u in usages
        ],
        "token_usages": usages,
    }


def state(status: str, usage_to_metrics: dict[str, Any]) -> dict[str, Any]:
    llm = {"model": MODEL, "api_key": "**********", "num_retries": 5, "usage_id": "agent"}
    return {
        "id": CONV,
        "agent": {"llm": llm, "tools": [{"name": "terminal", "params": {}}], "kind": "Agent"},
        "workspace": {"working_dir": "/home/dev/shop", "kind": "LocalWorkspace"},
        "persistence_dir": f"/home/dev/.openhands/conversations/{CONV.replace('-', '')}",
        "max_iterations": 500,
        "stuck_detection": True,
        "execution_status": status,
        "confirmation_policy": {"kind": "NeverConfirm"},
        "activated_knowledge_skills": [],
        "blocked_actions": {},
        "blocked_messages": {},
        "stats": {"usage_to_metrics": usage_to_metrics},
        "secret_registry": {"secret_sources": {}},
    }


def finished() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run that finished: a command, two reads from one response (one of them refused), a
    condensation, a summary, a second request and the finish."""
    ls = action(2, "chatcmpl-a", "terminal", {"command": "ls"}, "Let me look around.")
    view = action(
        4, "chatcmpl-b", "file_editor", {"command": "view", "path": "/shop/a.py"}, "Both files."
    )
    bad = action(5, "chatcmpl-b", "file_editor", {"command": "peek", "path": "/shop/b.py"})
    done = action(11, "chatcmpl-e", "finish", {"message": "All tests pass."})
    events = [
        event(
            0,
            "SystemPromptEvent",
            "agent",
            system_prompt=text("You are OpenHands agent.")[0],
            tools=[],
        ),
        message(1, "user", "Why do the tests fail?"),
        ls,
        observation(3, ls, "a.py b.py", command="ls", exit_code=0),
        view,
        bad,
        observation(6, view, "1\tprint('a')"),
        event(
            7,
            "AgentErrorEvent",
            "agent",
            tool_name="file_editor",
            tool_call_id="toolu_05",
            error="Parameter 'command' is expected to be one of [view, create].",
        ),
        event(
            8,
            "Condensation",
            "environment",
            forgotten_event_ids=[],
            summary="Read a.py.",
            summary_offset=1,
            llm_response_id="chatcmpl-c",
        ),
        message(9, "agent", "a.py prints the wrong thing.", "chatcmpl-d"),
        message(10, "user", "Fix it and run the tests."),
        done,
        observation(12, done, "All tests pass."),
        event(13, "CondensationRequest", "environment"),
    ]
    agent = [
        usage("chatcmpl-a", 12000, 80),
        usage("chatcmpl-b", 12500, 150, 11900),
        usage("chatcmpl-d", 13000, 60, 12400),
        usage("chatcmpl-e", 13400, 40, 12900),
    ]
    condenser = [usage("chatcmpl-c", 9000, 300)]
    stats = {
        "agent": metrics(agent, [0.0372, 0.0161, 0.0086, 0.0084], 0.0703),
        "condenser": metrics(condenser, [0.0315], 0.0315),
    }
    return state("finished", stats), events


FINISHED = finished()


def write_conversation(root: Path, conv: tuple[dict[str, Any], list[dict[str, Any]]]) -> Path:
    """Written as the SDK writes it: compact JSON, one file per event."""
    base, events = conv
    folder = root / str(base["id"]).replace("-", "")
    (folder / "events").mkdir(parents=True)
    (folder / "base_state.json").write_text(json.dumps(base, separators=(",", ":")))
    for i, ev in enumerate(events):
        name = f"event-{i:05d}-{ev['id']}.json"
        (folder / "events" / name).write_text(json.dumps(ev, separators=(",", ":")))
    return folder


def write_export(folder: Path, conv: tuple[dict[str, Any], list[dict[str, Any]]]) -> Path:
    """As the visualizer's ``build_static.py`` writes it (indented)."""
    base, events = conv
    folder.mkdir(parents=True)
    doc = {
        "id": str(base["id"]).replace("-", ""),
        "created": "Mon Feb  9 20:16:56 2026",
        "eventCount": len(events),
        "baseState": base,
        "model": MODEL,
    }
    (folder / "trajectory.json").write_text(json.dumps(doc, indent=2))
    (folder / "events.json").write_text(json.dumps(events, indent=2))
    return folder


def test_a_finished_conversation(store: Store, tmp_path: Path) -> None:
    folder = write_conversation(tmp_path, FINISHED)
    [r] = ingest(store, folder / "base_state.json")
    # base_state.json and 14 event files; the condensation request holds nothing.
    assert (r.format, counts(r)) == ("openhands", (15, 14, 0, 0, 1))
    assert json.loads(q(store, "SELECT skipped_kinds FROM sources")[0][0]) == {
        "CondensationRequest": 1
    }
    rows = q(
        store,
        """SELECT seq, response_id, input_tokens, cached_input_tokens, output_tokens,
                  tool_call_count, response_kind, cost_usd, cost_basis, turn_id, line
           FROM calls ORDER BY seq""",
    )
    first = f"{CONV}:00000001-0000-4000-8000-00000000e701"  # the first user message
    second = f"{CONV}:0000000a-0000-4000-8000-00000000e70a"
    assert rows == [
        (1, "chatcmpl-a", 12000, 0, 80, 1, "tool_call", Decimal("0.0372"), "reported", first, 2),
        (
            2,
            "chatcmpl-b",
            12500,
            11900,
            150,
            2,
            "tool_call",
            Decimal("0.0161"),
            "reported",
            first,
            4,
        ),
        (3, "chatcmpl-c", 9000, 0, 300, 0, "text", Decimal("0.0315"), "reported", first, 8),
        (4, "chatcmpl-d", 13000, 12400, 60, 0, "text", Decimal("0.0086"), "reported", first, 9),
        (
            5,
            "chatcmpl-e",
            13400,
            12900,
            40,
            1,
            "tool_call",
            Decimal("0.0084"),
            "reported",
            second,
            11,
        ),
    ]
    [(ts,)] = q(store, "SELECT ts FROM calls WHERE seq = 1")
    assert ts.isoformat() == "2026-02-09T12:46:12.500000"
    assert q(store, "SELECT reasoning_chars FROM calls WHERE seq = 4") == [(25,)]
    run = q(
        store,
        """SELECT session_id, exit_status, outcome, is_error, reported_cost_usd,
                  cost_apportioned, reported_calls, reported_input_tokens, step_limit, model,
                  result_excerpt, duration_ms
           FROM runs""",
    )
    assert run == [
        (
            CONV,
            "finished",
            "completed",
            False,
            Decimal("0.1018"),
            False,
            5,
            50900 + 9000,
            500,
            MODEL,
            "All tests pass.",
            13000.0,
        )
    ]
    assert_accounted(store)


def test_conversation_tool_calls_results_and_messages(store: Store, tmp_path: Path) -> None:
    ingest(store, write_conversation(tmp_path, FINISHED) / "base_state.json")
    rows = q(
        store,
        """SELECT c.tool_name, c.excerpt, r.is_error, r.excerpt, c.call_id IS NOT NULL
           FROM messages c LEFT JOIN messages r ON r.kind = 'tool_result'
            AND r.tool_use_id = c.tool_use_id
           WHERE c.kind = 'tool_call' ORDER BY c.idx""",
    )
    assert rows == [
        ("terminal", '{"command":"ls"}', False, "a.py b.py", True),
        ("file_editor", '{"command":"view","path":"/shop/a.py"}', False, "1\tprint('a')", True),
        (
            "file_editor",
            '{"command":"peek","path":"/shop/b.py"}',
            True,
            "Parameter 'command' is expected to be one of [view, create].",
            True,
        ),
        ("finish", '{"message":"All tests pass."}', False, "All tests pass.", True),
    ]
    kinds = q(store, "SELECT kind, role, count(*) FROM messages GROUP BY ALL ORDER BY ALL")
    assert kinds == [
        ("compaction", "system", 1),
        ("prompt", "user", 2),
        ("system", "system", 1),
        ("text", "assistant", 3),
        ("tool_call", "assistant", 4),
        ("tool_result", "tool", 4),
    ]


def test_a_conversation_that_ended_in_error_states_its_cost(store: Store, tmp_path: Path) -> None:
    """No per-call costs, a stated total: divided over the calls, to the cent."""
    ask = message(1, "user", "Deploy it.")
    run = action(2, "chatcmpl-x", "terminal", {"command": "make deploy"})
    events = [
        ask,
        run,
        observation(3, run, "make: *** [deploy] Error 2", exit_code=2),
        event(
            4,
            "ConversationErrorEvent",
            "environment",
            code="LLMBadRequestError",
            detail="litellm.BadRequestError: prompt is too long",
        ),
    ]
    stats = {
        "agent": metrics([usage("chatcmpl-x", 5000, 20), usage("chatcmpl-y", 5100, 0)], [], 0.01537)
    }
    folder = write_conversation(tmp_path, (state("error", stats), events))
    [r] = ingest(store, folder / "base_state.json")
    assert counts(r) == (5, 5, 0, 0, 0)
    run_row = q(
        store,
        "SELECT exit_status, outcome, is_error, reported_cost_usd, cost_apportioned FROM runs",
    )[0]
    assert run_row == (
        "LLMBadRequestError: litellm.BadRequestError: prompt is too long",
        "context_limit",
        True,
        Decimal("0.0153700000"),
        True,
    )
    got = q(store, "SELECT list(DISTINCT cost_basis), sum(cost_usd), count(*) FROM calls")
    assert got == [(["apportioned"], Decimal("0.0153700000"), 2)]
    assert q(store, "SELECT is_error FROM messages WHERE kind = 'tool_result'") == [(True,)]
    assert_accounted(store)


@pytest.mark.parametrize(
    ("status", "extra", "want"),
    [
        ("stuck", [], ("stuck", "stuck", True)),
        ("paused", [event(3, "PauseEvent", "user")], ("paused", "interrupted", False)),
        (
            "error",
            [
                event(
                    3,
                    "ConversationIterationLimitEvent",
                    "environment",
                    iteration=3,
                    max_iterations=3,
                    detail="Reached 3 iterations",
                )
            ],
            ("iteration limit: Reached 3 iterations", "step_limit", True),
        ),
    ],
)
def test_conversation_verdicts(
    store: Store, tmp_path: Path, status: str, extra: list[dict[str, Any]], want: tuple[Any, ...]
) -> None:
    run = action(1, "chatcmpl-x", "terminal", {"command": "ls"})
    events = [message(0, "user", "go"), run, *extra]
    stats = {"agent": metrics([usage("chatcmpl-x", 5000, 20)], [0.0], 0.0)}
    folder = write_conversation(tmp_path, (state(status, stats), events))
    ingest(store, folder / "base_state.json")
    assert q(store, "SELECT exit_status, outcome, is_error FROM runs") == [want]
    # A stated cost of 0 is litellm not pricing it: none, and list prices stand.
    assert q(store, "SELECT reported_cost_usd, cost_apportioned FROM runs") == [(None, False)]
    assert q(store, "SELECT cost_basis FROM calls") == [("estimated",)]


def test_a_broken_event_file_is_rejected_with_its_index(store: Store, tmp_path: Path) -> None:
    folder = write_conversation(tmp_path, FINISHED)
    broken = sorted((folder / "events").iterdir())[3]
    broken.write_text('{"id": "x", "kind": "Observ')
    (folder / "events" / "notes.txt").write_text("not an event")  # not one of its files
    [r] = ingest(store, folder / "base_state.json")
    assert counts(r) == (15, 13, 1, 0, 1)
    [(line, reason)] = q(store, "SELECT line, reason FROM rejects")
    assert line == 3 and reason.startswith(f"events/{broken.name}: not valid JSON")
    # The command's result is lost; its call and the rest are read.
    assert q(store, "SELECT count(*) FROM calls") == [(5,)]
    assert_accounted(store)


def test_a_base_state_that_is_not_an_object_is_an_error(store: Store, tmp_path: Path) -> None:
    folder = write_conversation(tmp_path, FINISHED)
    (folder / "base_state.json").write_text(f'{{"id": "{CONV}", "agent": {{"llm": ')
    with pytest.raises(InputError, match="not valid JSON"):
        ingest(store, folder / "base_state.json")


def test_a_folder_walk_reads_each_conversation_once(store: Store, tmp_path: Path) -> None:
    """The events are read with their base_state.json. Met on their own in the walk, each is
    reported as read with it (``member_of``): nothing stored twice, no source of its own."""
    write_conversation(tmp_path / "conversations", FINISHED)
    reports = ingest(store, tmp_path / "conversations")
    assert {r.format for r in reports} == {"openhands"}
    main = [r for r in reports if r.path.endswith("base_state.json")]
    assert [(r.status, r.calls) for r in main] == [("loaded", 5)]
    assert {(r.status, r.reason) for r in reports if r not in main} == {
        ("read_with", f"read with {CONV.replace('-', '')}/base_state.json")
    }
    assert q(store, "SELECT count(*) FROM sources") == [(1,)]
    assert q(store, "SELECT count(*) FROM calls") == [(5,)]
    assert q(store, "SELECT count(*) FROM messages") == [(15,)]
    assert_accounted(store)


def test_the_visualizer_export_reads_as_the_folder(tmp_path: Path) -> None:
    """trajectory.json (baseState) and events.json hold the same objects as the folder."""
    tables = []
    folder = write_conversation(tmp_path / "c", FINISHED) / "base_state.json"
    export = write_export(tmp_path / "x", FINISHED) / "trajectory.json"
    for i, path in enumerate([folder, export]):
        with open_store(tmp_path / f"{i}.duckdb") as store:
            [r] = ingest(store, path)
            assert counts(r) == (15, 14, 0, 0, 1)
            tables.append(
                (
                    q(
                        store,
                        "SELECT native_id, input_tokens, output_tokens, ts, tool_call_count,"
                        " cost_usd FROM calls ORDER BY seq",
                    ),
                    q(
                        store,
                        "SELECT idx, kind, tool_use_id, tool_args_hash, tool_result_hash, "
                        "call_id FROM messages ORDER BY idx",
                    ),
                    q(store, "SELECT session_id, exit_status, reported_cost_usd FROM runs"),
                )
            )
    assert tables[0] == tables[1]


def test_an_sdk_benchmark_output_line(store: Store, tmp_path: Path) -> None:
    """OpenHands/benchmarks writes the V1 events in an instance's history."""
    base, events = FINISHED
    line = {
        "instance_id": "shop__shop-1",
        "attempt": 2,
        "test_result": {"git_patch": ""},
        "instruction": "Why do the tests fail?",
        "metadata": {
            "llm": {"model": MODEL},
            "dataset": "shop",
            "max_iterations": 100,
            "eval_output_dir": "out/shop",
        },
        "history": events,
        "metrics": base["stats"]["usage_to_metrics"]["agent"],
        "error": None,
    }
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(line) + "\n")
    [r] = ingest(store, path)
    assert (r.format, counts(r), r.calls) == ("openhands", (1, 1, 0, 0, 0), 4)
    got = q(store, "SELECT session_id, step_limit, outcome FROM runs")[0]
    assert got[0].startswith("shop__shop-1@") and got[0].endswith("#2")
    assert got[1:] == (100, None)
    tied = q(store, "SELECT count(*) FROM messages WHERE kind = 'tool_call' AND call_id > ''")
    assert tied == [(4,)]


# --- Where the CLI keeps its conversations ----------------------------------------------------


def test_homes() -> None:
    home = Path("/home/me")
    assert places.openhands({}, home) == [home / ".openhands" / "conversations"]
    assert places.openhands({"OPENHANDS_PERSISTENCE_DIR": "/srv/oh"}, home) == [
        Path("/srv/oh/conversations")
    ]
    env = {"OPENHANDS_PERSISTENCE_DIR": "/srv/oh", "OPENHANDS_CONVERSATIONS_DIR": "/srv/c"}
    assert places.openhands(env, home) == [Path("/srv/c")]
    assert ".openhands" in registry.agent_folders()


def test_audit_with_no_path_reads_the_cli_conversations(runner: CliRunner, tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_conversation(home / ".openhands" / "conversations", FINISHED)
    result = runner.invoke(cli, ["audit", "--json"], env=env_of(home, **OH_VARS))
    assert result.exit_code == 0, result.output
    assert "from ~/.openhands/conversations" in result.stderr
    assert json.loads(result.stdout)["calls_by_format"] == {"openhands": 5}


def test_a_walk_of_a_home_folder_enters_dot_openhands(runner: CliRunner, tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_conversation(home / ".openhands" / "conversations", FINISHED)
    result = runner.invoke(cli, ["audit", str(home), "--json"], env=env_of(tmp_path, **OH_VARS))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["calls_by_format"] == {"openhands": 5}
