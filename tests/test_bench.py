"""The benchmark's answer check: a benchmark that measures wrong answers must fail."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.sample import CSV_NAME
from tests.helpers import REPO, SAMPLE_DATA

spec = importlib.util.spec_from_file_location("bench_run", REPO / "bench" / "run.py")
assert spec is not None and spec.loader is not None
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
bench_stages = bench.by_stage  # (bench/stages.py, as run.py imports it)


def _incidents(runner: CliRunner, csv: Path) -> list[dict]:
    result = runner.invoke(cli, ["audit", str(csv), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["incidents"]


@pytest.fixture(scope="module")
def incidents() -> list[dict]:
    """The incidents ``audit --json`` finds in the sample export, once for the tests that
    only read them."""
    return _incidents(CliRunner(), SAMPLE_DATA / CSV_NAME)


def test_the_sample_export_gives_exactly_the_expected_incidents(incidents: list[dict]) -> None:
    assert bench.check_incidents(incidents) == ([], [])


def test_a_wrong_answer_is_caught(incidents: list[dict]) -> None:
    dropped = [i for i in incidents if i["n_calls"] != 22]
    missing, extra = bench.check_incidents(dropped)
    assert missing == [("constant_input_low_output", 22, 6.16)] and extra == []
    wrong = [
        dict(i, wasted_usd=i["wasted_usd"] + 1) if i["n_calls"] == 11 else i for i in incidents
    ]
    missing, extra = bench.check_incidents(wrong)
    assert missing == [("constant_input_low_output", 11, 4.07)]
    assert extra == [("constant_input_low_output", 11, 5.07)]


def test_a_pointer_from_healthy_traffic_is_listed_not_failed(incidents: list[dict]) -> None:
    outlier = {
        "detector": "session_cost_outlier",
        "severity": "low",
        "n_calls": 80,
        "wasted_usd": 0.0,
        "summary": "session cost $5.08, 13.8x the median",
    }
    assert bench.check_incidents([*incidents, outlier]) == ([], [])
    # The same detector claiming waste, or at a higher severity, is a wrong answer.
    for wrong in (dict(outlier, wasted_usd=1.5), dict(outlier, severity="high")):
        missing, extra = bench.check_incidents([*incidents, wrong])
        assert missing == [] and extra == [("session_cost_outlier", 80, wrong["wasted_usd"])]


def _ingest(runner: CliRunner, store: Path, history: Path) -> None:
    result = runner.invoke(cli, ["ingest", "--db", str(store), str(history)])
    assert result.exit_code == 0, result.output


def test_the_digest_of_a_history_does_not_depend_on_its_folder(tmp_path: Path) -> None:
    """The store's digest does not depend on the history's folder: the recorded digests hold
    wherever the bench's work folder is; computed in a process of its own, it is the same; a
    difference names its table and both values."""
    runner = CliRunner()
    a, b = tmp_path / "a" / "claude", tmp_path / "elsewhere" / "claude"
    bench.agent_logs.write_history(a, 0.3, 0.1, 0.05)
    bench.agent_logs.write_history(b, 0.3, 0.1, 0.05)
    _ingest(runner, tmp_path / "a.duckdb", a)
    _ingest(runner, tmp_path / "b.duckdb", b)
    found = bench.agent_logs.digest(tmp_path / "a.duckdb")
    assert found == bench.agent_logs.digest_in_child(tmp_path / "b.duckdb")
    assert found["calls"][0] > 0 and found["messages"][0] > 0 and found["rejects"] == [0]
    assert bench.agent_logs.digest_differences(found, found) == []
    changed = dict(found, calls=[found["calls"][0] + 1, *found["calls"][1:]])
    assert bench.agent_logs.digest_differences(found, changed) == [
        f"calls: {found['calls']} (expected {changed['calls']})"
    ]


def _day(key: str, tokens: tuple[int, int, int, int]) -> tuple[dict, dict]:
    ours = dict(zip(("input", "output", "cache_write", "cache_read"), tokens, strict=True))
    theirs = dict(
        zip(
            ("inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens"),
            tokens,
            strict=True,
        )
    )
    return {"key": key, **ours, "calls": 1}, {"period": key, **theirs, "totalCost": 1.0}


def test_the_daily_tables_are_compared_token_by_token() -> None:
    one, two = _day("2026-01-01", (3, 4, 400, 9000)), _day("2026-01-02", (1, 2, 3, 4))
    ours = {"daily": [one[0], two[0]]}
    assert bench.agent_logs.daily_differences(ours, {"daily": [one[1], two[1]]}) == []
    off = _day("2026-01-02", (1, 2, 3, 5))[1]
    assert bench.agent_logs.daily_differences(ours, {"daily": [one[1], off]}) == [
        "2026-01-02: ours (1, 2, 3, 4), ccusage (1, 2, 3, 5) "
        "(input, output, cache creation, cache read)"
    ]
    assert bench.agent_logs.daily_differences(ours, {"daily": [one[1]]}) == [
        "2026-01-02: ours (1, 2, 3, 4), ccusage no such day "
        "(input, output, cache creation, cache read)"
    ]


def test_stages_in_turns_each_get_their_median_and_their_own_output() -> None:
    order: list[str] = []
    stages = bench.in_turns(
        3,
        ("a", ["sh", "-c", "echo a"], {"before": lambda: order.append("a")}),
        ("b", ["sh", "-c", "echo b"], {"before": lambda: order.append("b")}),
    )
    assert order == ["a", "b"] * 3  # one run of each, in turns
    assert [(s["stage"], s["runs"], s["output"]) for s in stages] == [
        ("a", 3, "a\n"),
        ("b", 3, "b\n"),
    ]


def test_a_difference_in_the_tables_fails_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    checks = [
        ("daily", None, []),
        ("store", None, ["calls: [1] (expected [2])"]),
        ("other", "no recorded digest", []),
    ]
    assert bench.print_checks(checks) is False
    out = capsys.readouterr().out
    assert "store: FAILED" in out and "calls: [1] (expected [2])" in out
    assert "other: skipped (no recorded digest)" in out and "daily: ok" in out
    assert bench.print_checks([checks[0], checks[2]]) is True


FORMAT_ERROR = "Please always provide EXACTLY ONE action in triple backticks, found 0 actions."


def _trajectory(steps: list[tuple[str, str]], cost: float) -> dict[str, Any]:
    """A mini-swe-agent 1.x trajectory (real-loops' ``conversation_json`` files): a reply and
    what the agent said back to it, per step; the prompt grows by 1,000 tokens a call."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Use bash."},
        {"role": "user", "content": "Fix the bug."},
    ]
    for k, (said, back) in enumerate(steps):
        usage = {"prompt_tokens": 1000 * (k + 1), "completion_tokens": 50}
        response = {"id": f"r{k}", "model": "gpt-5-mini", "created": 1767698210 + k}
        response |= {"choices": [{"finish_reason": "stop"}], "usage": usage}
        messages.append({"role": "assistant", "content": said, "extra": {"response": response}})
        messages.append({"role": "user", "content": back})
    config = {"agent": {"format_error_template": FORMAT_ERROR, "step_limit": 50}}
    config["model"] = {"model_name": "openai/gpt-5-mini"}
    info = {"exit_status": "Submitted", "submission": "", "mini_version": "1.15.0"}
    info |= {"model_stats": {"instance_cost": cost, "api_calls": len(steps)}, "config": config}
    return {"info": info, "messages": messages, "trajectory_format": "mini-swe-agent-1"}


def _truth(steps: list[tuple[str, str]], label: dict[str, Any]) -> dict[str, Any]:
    """A file's entry in truth.json, as real-loops writes it for a trajectory."""
    per_call = [1000 * (k + 1) for k in range(len(steps))]
    return {
        "calls": len(steps),
        "format": "mini-swe-agent trajectory (mini-swe-agent-1)",
        "prompt_tokens": sum(per_call),
        "prompt_tokens_per_call": per_call,
        "label": label,
    }


def _recall(args: list[str]) -> subprocess.CompletedProcess[str]:
    """bench/recall.py run with ``args``, as a user runs it; it must exit 0."""
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "recall.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _act(command: str, output: str) -> tuple[str, str]:
    return (
        f"Run it.\n```bash\n{command}\n```",
        f"<returncode>0</returncode>\n<output>\n{output}\n</output>",
    )


def test_the_recall_script_scores_a_planted_loop_by_detector(tmp_path: Path) -> None:
    """bench/recall.py on a corpus of two files: a loop of 5 refused replies (calls 2-6,
    labelled as a span) is found whole by format_error_loop, its waste is inside the span, and
    the healthy run raises nothing. The scoring is spans_check.py's, from ../shared/tools."""
    import shutil

    from tests.helpers import shared_tool

    tools = tmp_path / "tools"
    tools.mkdir()
    shutil.copy(shared_tool("spans_check.py"), tools / "spans_check.py")
    corpus = tmp_path / "samples" / "tiny"
    folder = corpus / "conversation_json" / "someone__agent"
    folder.mkdir(parents=True)
    looped = [_act("ls", "a.py"), *[("I will look.", FORMAT_ERROR)] * 5, _act("pytest", "ok")]
    healthy = [_act("ls", "a.py"), _act("cat a.py", "x = 1"), _act("pytest", "1 passed")]
    label = {"loop": True, "kind": "format-error loop", "spans_calls": [[2, 5]]}
    files = {
        "conversation_json/someone__agent/loop.traj.json": (looped, 0.7, label),
        "conversation_json/someone__agent/healthy.traj.json": (healthy, 0.3, {"loop": False}),
    }
    truth = {}
    for rel, (steps, cost, lab) in files.items():
        (corpus / rel).write_text(json.dumps(_trajectory(steps, cost)), encoding="utf-8")
        truth[rel] = _truth(steps, lab)
    (corpus / "truth.json").write_text(json.dumps({"files": truth}), encoding="utf-8")
    out = tmp_path / "recall.json"
    args = ["--samples", str(tmp_path / "samples"), "--corpus", "tiny", "--json", str(out)]
    done = _recall(args)
    lines = done.stdout.splitlines()
    assert "== tiny: 2 files (1 loops, 0 marginal, 1 healthy)" in lines
    assert "  labelled loops found 1/1 (100%)" in done.stdout
    assert "  spans found 1/1 (100%), 1 exact, 0 unmapped; mean coverage 100%" in done.stdout
    assert "  false alarms 0 (on 0 files); unread 0;" in done.stdout
    [row] = [line.split() for line in lines if line.startswith("  format_error_loop ")]
    # incidents, spans found, calls covered, false alarms, in the span, outside
    assert row[1:5] == ["1", "1/1", "5/5", "0"] and row[6] == "$0.0000", row
    assert "  no_progress share: spans only it found 0 of 1 found" in done.stdout
    assert lines[-2] == (
        "ok: tiny: labelled loops found 1/1, spans found 1/1 (100%), mean coverage 100%, "
        "false alarms 0, unread 0"
    )
    [c] = json.loads(out.read_text())["corpora"]
    fel = c["detectors"]["format_error_loop"]
    assert (fel["spans_found"], fel["spans_only"], fel["calls_covered"]) == (1, 1, 5)
    # the waste is the refused calls after the first: 4 of the run's 7 calls, all in the span
    assert fel["wasted_in_spans_usd"] > 0 and fel["wasted_outside_usd"] == 0
    assert c["detectors"]["no_progress"]["incidents"] == 0
    assert set(c["detectors"]) == {"format_error_loop", "no_progress"}


# the bench's recall script over the real runs (CI runs it): the labelled loops all found, file
# by file, and no waste on the healthy runs, as test_real_loops holds
@pytest.mark.slow
def test_the_recall_script_finds_every_labelled_loop_and_no_false_alarm() -> None:
    """bench/recall.py over the real runs with loops labelled by their agents (../shared)."""
    from tests.helpers import shared_samples

    done = _recall(["--samples", str(shared_samples()), "--corpus", "real-loops"])
    assert "  labelled loops found 7/7 (100%)" in done.stdout
    assert "  false alarms 0 (on 0 files); unread 0;" in done.stdout


def test_a_run_times_its_sql_by_unit_when_asked(tmp_path: Path) -> None:
    """``$LLM_FORENSICS_TIMINGS`` (``analyzer.engine.timings``): each SQL unit's seconds and
    runs, and the detectors by name, written when the process ends; unset, nothing."""
    import os

    db, said = tmp_path / "s.duckdb", tmp_path / "t.json"
    env = {**os.environ, "LLM_FORENSICS_TIMINGS": str(said), "LLM_FORENSICS_DB": ""}
    cmd = [sys.executable, "-m", "analyzer", "audit", str(SAMPLE_DATA / CSV_NAME), "--db", str(db)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    timed = json.loads(said.read_text())
    units = timed["units"]
    assert units["ingest/bills/openrouter/store.sql"]["runs"] == 1
    assert units["detector constant_input_low_output"]["seconds"] >= 0
    assert any(u.startswith("guards/") for u in units)
    stages = dict(bench_stages.by_stage(timed, timed["wall_seconds"]))
    assert list(stages)[:3] == ["ingest: SQL", "detectors", "guard replay"]
    assert sum(stages.values()) == pytest.approx(timed["wall_seconds"], rel=1e-6)
    assert stages["ingest: SQL"] >= units["ingest/bills/openrouter/store.sql"]["seconds"]
    seconds, rows = bench_stages.write_floor(db)
    assert rows > 0 and seconds > 0
    read = bench_stages.read_floor(SAMPLE_DATA / CSV_NAME)
    lines = bench_stages.describe(timed, timed["wall_seconds"], 1.0, (seconds, rows), read)
    assert "the ingest's store.sql took" in lines[-2]
    assert "the ingest's typed.sql took" in lines[-1]

    said.unlink()
    quiet = {k: v for k, v in env.items() if k != "LLM_FORENSICS_TIMINGS"}
    done = subprocess.run([*cmd[:3], "usage", "daily", "--db", str(db)], env=quiet, cwd=REPO)
    assert done.returncode == 0 and not said.exists()
