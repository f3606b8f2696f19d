"""Claude Code's stream-json output (``claude -p --output-format stream-json``) on the two real
logs of an outer relaunch loop in ../shared/samples/real-loops (read in place), against the
figures truth.json states for them, and on small hand-written streams of the same shape."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.formats import claude_code, claude_stream
from analyzer.ingest.base import Head, IngestOptions
from analyzer.load.flow import FileReport
from analyzer.model.formatting import money
from analyzer.pipeline import ingest_paths
from analyzer.views.verdicts import unstated, verdicts
from tests.helpers import assert_accounted, q, shared_samples

LOOP = "claude_stream_json/lantos1618__better-ui/claude_output.jsonl"  # 133 failed relaunches
HEALTHY = "claude_stream_json/repomirrorhq__better-use/claude_output.jsonl"


def real_loops() -> Path:
    return shared_samples() / "real-loops"


def truth_of(rel: str) -> dict[str, Any]:
    files: dict[str, Any] = json.loads((real_loops() / "truth.json").read_text())["files"]
    return dict(files[rel])


def ingest(store: Store, *paths: Path) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False))


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, dict[str, int]]]:
    with open_store(tmp_path_factory.mktemp("stream") / "s.duckdb") as store:
        reports = ingest(store, real_loops() / LOOP, real_loops() / HEALTHY)
        assert [r.format for r in reports] == ["claude_stream_json"] * 2
        ids = {LOOP: reports[0].source_id, HEALTHY: reports[1].source_id}
        yield store, {k: int(v) for k, v in ids.items() if v is not None}


@pytest.mark.parametrize("rel", [LOOP, HEALTHY])
def test_calls_and_tokens_equal_the_truth(real: tuple[Store, dict[str, int]], rel: str) -> None:
    """One call per message id; the CLI's own <synthetic> replies (a launch refused at once)
    are calls too, as truth.json counts them: of model <synthetic>, no tokens, $0."""
    store, ids = real
    want = truth_of(rel)
    synthetic = want.get("synthetic_calls", 0)
    [(calls, prompt, output)] = q(
        store,
        "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM calls WHERE source_id = ?",
        [ids[rel]],
    )
    assert calls == want["calls"]
    assert (prompt, output) == (want["prompt_tokens"], want["output_tokens"])
    assert q(
        store,
        """SELECT count(*), coalesce(sum(input_tokens + output_tokens), 0),
                  coalesce(sum(cost_usd), 0), count(*) FILTER (WHERE cost_basis = 'reported')
           FROM calls WHERE source_id = ? AND model = '<synthetic>'""",
        [ids[rel]],
    ) == [(synthetic, 0, 0, synthetic)]
    assert q(
        store,
        "SELECT count(*) FROM messages WHERE kind = 'synthetic' AND source_id = ?",
        [ids[rel]],
    ) == [(0,)]
    assert_accounted(store)


@pytest.mark.parametrize("rel", [LOOP, HEALTHY])
def test_one_session_per_run_in_one_stream_without_times(
    real: tuple[Store, dict[str, int]], rel: str
) -> None:
    store, ids = real
    want = truth_of(rel)
    [(runs, streams, results)] = q(
        store,
        """SELECT count(*), count(DISTINCT stream_key), count(exit_status) FROM runs
           WHERE source_id = ?""",
        [ids[rel]],
    )
    assert runs == want["sessions_in_file"] and streams == 1
    assert results == want["runs_in_file"]
    [(sessions, stream_keys, timed, seqs, first, last)] = q(
        store,
        """SELECT count(DISTINCT session_id), count(DISTINCT stream_key), count(ts),
                  count(DISTINCT seq), min(seq), max(seq)
           FROM calls WHERE source_id = ?""",
        [ids[rel]],
    )
    calls = want["calls"]
    assert stream_keys == 1 and timed == 0  # no time invented
    assert (seqs, first, last) == (calls, 1, calls)  # the file's order is the stream's
    assert sessions <= runs


def test_each_run_keeps_its_verdict_and_the_failed_relaunches_are_visible(
    real: tuple[Store, dict[str, int]],
) -> None:
    store, ids = real
    want = truth_of(LOOP)
    results = want["result_lines"]
    got = q(
        store,
        """SELECT exit_status, is_error, reported_calls, result_excerpt, outcome
           FROM runs WHERE source_id = ? AND exit_status IS NOT NULL ORDER BY seq""",
        [ids[LOOP]],
    )
    assert [(s, e, n) for s, e, n, _, _ in got] == [
        (r["subtype"], r["is_error"], r["num_turns"]) for r in results
    ]
    assert [x for _, _, _, x, _ in got] == [r["result"][:200] for r in results]
    # truth: result lines 10-142 are 133 is_error runs in a row, "5-hour limit reached"
    [[start, length]] = want["consecutive_error_run_streaks_ge3"]
    failed = [i for i, (_, e, _, _, o) in enumerate(got, 1) if e and o == "error"]
    assert failed == list(range(start, start + length))
    assert {x for _, e, _, x, _ in got if e} == set(want["error_results"])


@pytest.mark.parametrize("rel", [LOOP, HEALTHY])
def test_dollars_are_the_clis_own_per_run(real: tuple[Store, dict[str, int]], rel: str) -> None:
    """Each run's stated total_cost_usd is divided over its calls (apportioned): the file's
    dollars are the CLI's own, to the cent; a run cut off before its result line keeps its
    calls' list-price estimates."""
    store, ids = real
    want = truth_of(rel)
    rows = q(
        store,
        """SELECT r.reported_cost_usd, r.cost_apportioned, sum(c.cost_usd),
                  count(c.call_id) FILTER (WHERE c.model <> '<synthetic>'),
                  list(DISTINCT c.cost_basis) FILTER (WHERE c.model <> '<synthetic>')
           FROM runs r LEFT JOIN calls c USING (session_id)
           WHERE r.source_id = ? GROUP BY ALL""",
        [ids[rel]],
    )
    stated = [r for r in rows if r[0] is not None]
    # truth.json sums the result lines rounded to 6 places
    assert round(sum(r[0] for r in stated), 6) == Decimal(str(want["reported_cost_usd"]))
    for cost, shared, total, n, bases in stated:
        if n and cost > 0:
            assert shared and total == cost and bases == ["apportioned"]
        else:  # a refused relaunch: no model call (its reply the CLI's own, $0), $0 stated
            assert n == 0 and cost == 0 and total == 0
    for cost, _, _, n, bases in rows:
        if cost is None and n:  # list prices: at the estimate where a count is a placeholder
            assert set(bases) <= {"estimated", "estimated_output"}
    assert q(
        store,
        """SELECT count(*) FROM calls WHERE cost_basis IN ('estimated',
                                                                    'estimated_output')
                         AND (cost_basis = 'estimated_output') = output_final""",
    ) == [(0,)]
    assert q(store, "SELECT count(*) FROM calls WHERE cost_basis IS NULL") == [(0,)]


def test_the_daily_view_says_where_times_are_missing(real: tuple[Store, dict[str, int]]) -> None:
    from analyzer.views.terminal import render_usage
    from analyzer.views.usage import usage

    store, _ = real
    text = render_usage(usage(store, "daily"), width=200)
    assert text.splitlines()[1].startswith("(no time)")
    assert "(no time): calls whose log has no times, never given one (" in text
    assert "claude_output.jsonl" in text


def test_tool_calls_are_tied_to_their_results(real: tuple[Store, dict[str, int]]) -> None:
    store, ids = real
    [(calls, tied)] = q(
        store,
        """SELECT count(*), count(r.tool_use_id) FROM messages c
           LEFT JOIN messages r ON r.kind = 'tool_result' AND r.tool_use_id = c.tool_use_id
                               AND r.session_id = c.session_id
           WHERE c.kind = 'tool_call' AND c.source_id = ?""",
        [ids[HEALTHY]],
    )
    assert calls == 289 and tied == 288  # the last run was cut off before its last result


# --- hand-written streams ----------------------------------------------------------------------


def line(**obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def usage(inp: int, read: int, out: int) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": read,
        "output_tokens": out,
    }


def run_lines(sid: str, cost: float | None, *, error: str | None = None) -> list[str]:
    """A run of two calls (a tool call and its result, then a text answer) and its result."""
    out = [
        line(
            type="system",
            subtype="init",
            session_id=sid,
            model="claude-sonnet-4-5",
            cwd="/work/app",
            tools=["Bash"],
        )
    ]
    if error:
        out.append(
            line(
                type="assistant",
                session_id=sid,
                parent_tool_use_id=None,
                message={
                    "id": f"{sid}-syn",
                    "model": "<synthetic>",
                    "role": "assistant",
                    "content": [{"type": "text", "text": error}],
                    "usage": usage(0, 0, 0),
                },
            )
        )
    else:
        out += [
            line(
                type="assistant",
                session_id=sid,
                parent_tool_use_id=None,
                message={
                    "id": f"{sid}-1",
                    "model": "claude-sonnet-4-5",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"{sid}-t",
                            "name": "Bash",
                            "input": {"command": "ls"},
                        }
                    ],
                    "stop_reason": None,
                    "usage": usage(3, 1000, 2),
                },
            ),
            line(
                type="user",
                session_id=sid,
                parent_tool_use_id=None,
                message={
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"{sid}-t", "content": "a.py"}
                    ],
                },
            ),
            line(
                type="assistant",
                session_id=sid,
                parent_tool_use_id=None,
                message={
                    "id": f"{sid}-2",
                    "model": "claude-sonnet-4-5",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Done."}],
                    "stop_reason": None,
                    "usage": usage(3, 1100, 4),
                },
            ),
        ]
    if cost is not None:
        out.append(
            line(
                type="result",
                subtype="success",
                is_error=error is not None,
                num_turns=1 if error else 2,
                duration_ms=1200,
                session_id=sid,
                result=error or "Done.",
                total_cost_usd=cost,
                usage=usage(3, 1100, 4),
            )
        )
    return out


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def test_a_relaunch_loop_reads_as_runs_of_one_stream(store: Store, tmp_path: Path) -> None:
    lines = run_lines("a", 0.012) + run_lines("b", 0.0, error="Credit balance is too low")
    lines += run_lines("c", 0.0, error="Credit balance is too low") + run_lines("d", None)
    [report] = ingest(store, write(tmp_path / "claude_output.jsonl", lines))
    # the refused launches' replies are calls too (the CLI's own, $0)
    assert (report.format, report.calls) == ("claude_stream_json", 6)
    # 4 inits, 3 results, 4 + 1 + 1 + 3 assistant/user lines: every line accounted for
    assert (report.rows_read, report.rows_loaded) == (len(lines), len(lines))
    assert q(
        store, "SELECT session_id, seq, outcome, is_error, result_excerpt FROM runs ORDER BY seq"
    ) == [
        ("a", 1, "completed", False, "Done."),
        ("b", 2, "error", True, "Credit balance is too low"),
        ("c", 3, "error", True, "Credit balance is too low"),
        ("d", 4, None, None, None),
    ]
    assert q(store, "SELECT DISTINCT stream_key FROM calls") == [("a",)]
    assert q(
        store, "SELECT session_id, seq, project, cost_basis, model FROM calls ORDER BY seq"
    ) == [
        ("a", 1, "/work/app", "apportioned", "claude-sonnet-4-5"),
        ("a", 2, "/work/app", "apportioned", "claude-sonnet-4-5"),
        ("b", 3, "/work/app", "reported", "<synthetic>"),
        ("c", 4, "/work/app", "reported", "<synthetic>"),
        ("d", 5, "/work/app", "estimated_output", "claude-sonnet-4-5"),
        ("d", 6, "/work/app", "estimated_output", "claude-sonnet-4-5"),
    ]
    assert q(store, "SELECT sum(cost_usd) FROM calls WHERE session_id IN ('b', 'c')") == [
        (Decimal(0),)
    ]
    [(total,)] = q(store, "SELECT sum(cost_usd) FROM calls WHERE session_id = 'a'")
    assert total == Decimal("0.012")
    # the shares follow the calls' list-price estimates (the first's placeholder output priced
    # at its estimate: a tool call's arguments and framing outweigh the second's cache read)
    (a1, e1), (a2, e2) = q(
        store, "SELECT cost_usd, cost_estimate_usd FROM calls WHERE session_id = 'a' ORDER BY seq"
    )
    assert a1 > a2 and e1 > e2 and abs(a1 / a2 - e1 / e2) < Decimal("1e-6")
    assert q(
        store,
        "SELECT session_id, kind, excerpt FROM messages "
        "WHERE session_id IN ('b', 'c') ORDER BY session_id",
    ) == [
        ("b", "text", "Credit balance is too low"),
        ("c", "text", "Credit balance is too low"),
    ]
    assert_accounted(store)


def test_a_resumed_launch_is_a_run_of_its_own(store: Store, tmp_path: Path) -> None:
    """`claude -p --resume a` launches the CLI again on session a: the second init of a is a
    new run (its calls, its verdict), not more of the first."""
    again = [re.sub(r'"a-(\w+)"', r'"a2-\1"', x) for x in run_lines("a", 0.02)]  # new ids
    lines = run_lines("a", 0.012) + again + run_lines("a", 0.0, error="x")
    [report] = ingest(store, write(tmp_path / "claude_output.jsonl", lines))
    assert (report.rows_read, report.rows_loaded) == (len(lines), len(lines))
    assert q(
        store,
        "SELECT session_id, seq, outcome, reported_cost_usd, stream_key FROM runs ORDER BY seq",
    ) == [
        ("a", 1, "completed", Decimal("0.012"), "a"),
        ("a:launch-2", 2, "completed", Decimal("0.02"), "a"),
        ("a:launch-3", 3, "error", Decimal("0"), "a"),
    ]
    assert q(
        store,
        "SELECT session_id, count(*), sum(cost_usd) FROM calls GROUP BY ALL ORDER BY ALL",
    ) == [
        ("a", 2, Decimal("0.012")),
        ("a:launch-2", 2, Decimal("0.02")),
        ("a:launch-3", 1, Decimal("0")),
    ]
    assert_accounted(store)


def test_a_grown_stream_adds_only_its_new_runs(store: Store, tmp_path: Path) -> None:
    path = write(tmp_path / "claude_output.jsonl", run_lines("a", 0.01))
    ingest(store, path)
    write(path, run_lines("a", 0.01) + run_lines("b", 0.02))
    [report] = ingest(store, path)
    assert report.rows_duplicate == len(run_lines("a", 0.01))
    assert q(store, "SELECT count(*), count(DISTINCT session_id) FROM runs") == [(2, 2)]
    assert q(store, "SELECT session_id, sum(cost_usd) FROM calls GROUP BY 1 ORDER BY 1") == [
        ("a", Decimal("0.01")),
        ("b", Decimal("0.02")),
    ]
    assert_accounted(store)


def test_sniffing_tells_the_stream_from_a_transcript() -> None:
    stream = "\n".join(run_lines("a", 0.01)).encode()
    assert claude_stream.sniff(Head(stream, None, "utf-8"))
    assert not claude_code.sniff(Head(stream, None, "utf-8"))
    transcript = real_loops() / "claude_code/Strawhat404__TASK-31/sessions__session-2.jsonl"
    head = Head(transcript.read_bytes()[:65536], None, "utf-8")
    assert claude_code.sniff(head) and not claude_stream.sniff(head)


def test_a_damaged_line_is_rejected_with_its_line(store: Store, tmp_path: Path) -> None:
    lines = run_lines("a", 0.01)
    lines.insert(2, '{"type": "assistant", "message": 5, "session_id": "a"')  # cut off
    lines.insert(3, line(type="assistant", session_id=7, message={"usage": "x", "content": 5}))
    [report] = ingest(store, write(tmp_path / "claude_output.jsonl", lines))
    assert report.rows_rejected == 2
    assert [r[0] for r in q(store, "SELECT line FROM rejects ORDER BY line")] == [3, 4]
    assert report.calls == 2
    assert q(store, "SELECT session_id FROM runs") == [("a",)]  # a broken line starts no run
    assert_accounted(store)


def test_a_run_read_before_it_ended_gets_its_verdict_when_read_again(
    store: Store, tmp_path: Path
) -> None:
    """Read while the run went on (no result line yet), then once it ended: the stored run is
    replaced by the one that says more, and the calls stored from the first read are priced at
    the run's stated cost."""
    whole = run_lines("a", 0.03)
    path = write(tmp_path / "claude_output.jsonl", whole[:-1])
    ingest(store, path)
    assert q(store, "SELECT outcome, reported_cost_usd FROM runs") == [(None, None)]
    assert q(store, "SELECT DISTINCT cost_basis FROM calls") == [("estimated_output",)]
    write(path, whole)
    [report] = ingest(store, path)
    assert (report.rows_loaded, report.rows_duplicate) == (2, len(whole) - 2)  # init + result
    assert q(store, "SELECT outcome, reported_cost_usd FROM runs") == [
        ("completed", Decimal("0.03"))
    ]
    assert q(store, "SELECT DISTINCT cost_basis, sum(cost_usd) FROM calls GROUP BY 1") == [
        ("apportioned", Decimal("0.03"))
    ]
    assert_accounted(store)


# --- what the file states, and what is priced beyond it (issue 46) -----------------------------

HAIKU = "claude-haiku-4-5-20251001"


def subagent_run_lines(sid: str, cost: float | None) -> list[str]:
    """A run whose first call starts a Task sub-agent, as the CLI writes one: the sub-agent's
    lines carry the run's session_id and, in parent_tool_use_id, the Task call's id; its two
    calls (another model) are in the run's result, whose modelUsage names both models."""
    task = f"{sid}-task"

    def said(mid: str, model: str, parent: str | None, block: dict[str, Any], u: Any) -> str:
        message = {"id": mid, "model": model, "role": "assistant", "content": [block]}
        message |= {"stop_reason": None, "usage": u}
        return line(type="assistant", session_id=sid, parent_tool_use_id=parent, message=message)

    def result(use_id: str, parent: str | None, text: str) -> str:
        content = [{"type": "tool_result", "tool_use_id": use_id, "content": text}]
        message = {"role": "user", "content": content}
        return line(type="user", session_id=sid, parent_tool_use_id=parent, message=message)

    ask = {"subagent_type": "Explore", "description": "Find a.py", "prompt": "Where is a.py?"}
    out = [
        line(type="system", subtype="init", session_id=sid, model="claude-sonnet-4-5", cwd="/w"),
        said(
            f"{sid}-1",
            "claude-sonnet-4-5",
            None,
            {"type": "tool_use", "id": task, "name": "Task", "input": ask},
            usage(3, 1000, 5),
        ),
        said(
            f"{sid}-s1",
            HAIKU,
            task,
            {"type": "tool_use", "id": f"{sid}-b", "name": "Bash", "input": {"command": "ls"}},
            usage(4, 7000, 1),
        ),
        result(f"{sid}-b", task, "a.py"),
        said(f"{sid}-s2", HAIKU, task, {"type": "text", "text": "Found a.py."}, usage(4, 7200, 20)),
        result(task, None, "Found a.py."),
        said(
            f"{sid}-2",
            "claude-sonnet-4-5",
            None,
            {"type": "text", "text": "Done."},
            usage(3, 1100, 4),
        ),
    ]
    if cost is not None:
        model_usage = {
            m: {"inputTokens": 8, "outputTokens": 21, "costUSD": cost / 2}
            for m in ("claude-sonnet-4-5", HAIKU)
        }
        out.append(
            line(
                type="result",
                subtype="success",
                is_error=False,
                num_turns=2,
                duration_ms=5400,
                session_id=sid,
                result="Done.",
                total_cost_usd=cost,
                usage=usage(3, 1100, 4),
                modelUsage=model_usage,
            )
        )
    return out


def test_a_run_s_stated_cost_holds_its_sub_agent_s_calls(store: Store, tmp_path: Path) -> None:
    """The CLI's total_cost_usd is every call of the run, its Task sub-agent's too (its
    result's modelUsage names the sub-agent's model): the stated cost is divided over them
    all, and nothing of the run is priced above it."""
    [report] = ingest(store, write(tmp_path / "claude_output.jsonl", subagent_run_lines("a", 0.05)))
    assert report.calls == 4
    rows = q(
        store,
        "SELECT session_id, parent_session_id, model, cost_basis FROM calls ORDER BY seq",
    )
    assert rows == [
        ("a", None, "claude-sonnet-4-5", "apportioned"),
        ("a:task-a-task", "a", HAIKU, "apportioned"),
        ("a:task-a-task", "a", HAIKU, "apportioned"),
        ("a", None, "claude-sonnet-4-5", "apportioned"),
    ]
    assert q(store, "SELECT sum(cost_usd) FROM calls") == [(Decimal("0.05"),)]
    # each call's share follows its list-price estimate
    shares = q(store, "SELECT cost_usd, cost_estimate_usd FROM calls ORDER BY seq")
    ratios = [c / e for c, e in shares]
    assert max(ratios) - min(ratios) < Decimal("1e-6")
    assert_accounted(store)


def test_a_cut_off_run_priced_beyond_what_the_file_states_is_said(tmp_path: Path) -> None:
    """A run cut off before its result line states no cost: its calls keep their list-price
    estimates (they were made and paid for), and every view that sums them says that this
    much of the spend is above what the file states, and why."""
    lines = run_lines("a", 0.012) + subagent_run_lines("c", None)
    logs = tmp_path / "logs"
    logs.mkdir()
    write(logs / "claude_output.jsonl", lines)
    db = tmp_path / "s.duckdb"
    result = CliRunner().invoke(cli, ["audit", str(logs), "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout, parse_float=Decimal)["unstated_runs"]
    with open_store(db) as store:
        [(usd,)] = q(store, "SELECT sum(cost_usd) FROM calls WHERE session_id LIKE 'c%'")
        assert q(store, "SELECT DISTINCT cost_basis FROM calls WHERE session_id LIKE 'c%'") == [
            ("estimated_output",)
        ]
    assert said == {
        "runs": 1,
        "cut_off": 1,
        "calls": 4,  # the sub-agent's two with its own two
        "usd": usd,
        "files": 1,
        "stated_usd": Decimal("0.012"),
    }
    text = CliRunner().invoke(cli, ["audit", str(logs), "--db", str(db)]).stdout
    assert (
        f"Unstated {money(usd)} of the spend is 1 run cut off with no cost stated (4 calls at "
        "list prices), beyond the $0.01 stated in the same file for the other runs"
    ) in " ".join(text.split())
    session = CliRunner().invoke(cli, ["usage", "session", "--db", str(db), "--json"])
    rows = json.loads(session.stdout, parse_float=Decimal)["session"]
    runs = {r["key"]: r["run"] for r in rows if "run" in r}  # (not the sub-agent's session)
    assert runs["c"]["estimated_usd"] == usd and runs["a"]["estimated_usd"] is None
    table = CliRunner().invoke(cli, ["usage", "session", "--db", str(db)]).stdout
    assert (
        "1 run with no cost stated (cut off: no verdict): its calls at list prices, "
        f"{money(usd)}, not a figure of the agent's own"
    ) in " ".join(table.split())
    with open_store(db) as store:
        assert verdicts(store)["c"].describe() == (
            "no verdict in the log (the run was cut off, or its end not written); no cost in "
            f"its log: its calls at list prices, {money(usd)}"
        )


def test_the_real_cut_off_run_is_said_beside_the_clis_own_totals(
    real: tuple[Store, dict[str, int]],
) -> None:
    """better-use's 4th run was cut off (no result line): its 61 calls are at list prices,
    above the $23.96 the CLI stated for the file's 3 finished runs (truth.json)."""
    store, ids = real
    want = truth_of(HEALTHY)
    [(usd,)] = q(
        store,
        """SELECT sum(c.cost_usd) FROM calls c JOIN runs r USING (session_id)
           WHERE r.source_id = ? AND r.exit_status IS NULL""",
        [ids[HEALTHY]],
    )
    found = unstated(store)
    assert found is not None
    # (the loop's file beside it: its last 3 runs were cut off too)
    [(loop_usd, loop_calls)] = q(
        store,
        """SELECT sum(c.cost_usd), count(*) FROM calls c JOIN runs r USING (session_id)
           WHERE r.source_id = ? AND r.exit_status IS NULL""",
        [ids[LOOP]],
    )
    assert (found.runs, found.cut_off, found.calls, found.files) == (4, 4, 61 + loop_calls, 2)
    assert found.usd == usd + loop_usd
    stated = Decimal(str(want["reported_cost_usd"])) + Decimal(
        str(truth_of(LOOP)["reported_cost_usd"])
    )
    assert round(found.stated_usd, 6) == stated
    assert round(usd, 2) == Decimal("4.80")


def test_the_real_sub_agents_are_in_their_runs_stated_costs(store: Store) -> None:
    """A real stream (real-loops-3) whose runs start Explore sub-agents (claude-haiku-4-5):
    each run the CLI states a cost for is that cost, its sub-agent's calls included (the
    fourth run with a result line held 9 sub-agent calls priced $0.10 on top of it), and the
    file's stated dollars are truth.json's."""
    corpus = shared_samples() / "real-loops-3"
    rel = "claude_stream_json/ArturoKuang__sandbox_ai_compiler/claude-debug__claude_output.jsonl"
    want = json.loads((corpus / "truth.json").read_text())["files"][rel]
    [report] = ingest(store, corpus / rel)
    assert report.calls == want["calls"]
    rows = q(
        store,
        """SELECT r.session_id, r.reported_cost_usd, sum(c.cost_usd),
                  count(*) FILTER (WHERE c.parent_session_id IS NOT NULL),
                  list(DISTINCT c.cost_basis)
           FROM runs r JOIN calls c ON coalesce(c.parent_session_id, c.session_id) = r.session_id
           WHERE r.cost_apportioned GROUP BY ALL ORDER BY min(c.seq)""",
    )
    assert len(rows) == want["runs_in_file"] == 5
    for _, stated, usd, _, bases in rows:
        assert usd == stated and bases == ["apportioned"]
    assert [n for _, _, _, n, _ in rows] == [0, 0, 0, 9, 0]
    assert round(sum(r[1] for r in rows), 6) == Decimal(str(want["reported_cost_usd"]))
    assert_accounted(store)
