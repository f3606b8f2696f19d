"""What OpenTelemetry leaves out by default is unknown, never "the same again".

Claude Code's events carry a tool's parameters only with ``OTEL_LOG_TOOL_DETAILS=1`` and never
what the tool returned: a healthy session that runs ``Bash`` eight times in a row is, in its
default export, eight tool calls of unknown arguments and unknown results. No detector may
call that a loop, no guard may trip on it, and the guard replay says it is blind there.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from analyzer.cli.main import cli
from tests.test_otel import T0, api, batch, cc_event, write


def _session(name: str, n: int, **tool: str) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(n):
        ms, seq = T0 + i * 10_000, 2 * i + 1
        out.append(api(name, seq, ms, 5, 400, cr=20_000 + i * 3000, request_id=f"{name}{i}"))
        out.append(cc_event("tool_result", name, seq + 1, ms + 3000, tool_name="Bash", **tool))
    return out


def _audit(tmp_path: Path, *records: dict[str, object]) -> tuple[str, dict[str, object]]:
    path = write(tmp_path / "export.jsonl", batch(*records))
    db = str(tmp_path / "s.duckdb")
    done = CliRunner().invoke(cli, ["audit", "--db", db, str(path), "--json", "-q"])
    assert done.exit_code in (0, 1), done.output
    return db, json.loads(done.stdout)


def test_tool_calls_of_unknown_arguments_are_no_loop(tmp_path: Path) -> None:
    _, data = _audit(tmp_path, *_session("fine", 8, success="true"))
    assert data["incidents"] == []
    db = str(tmp_path / "replay.duckdb")
    path = tmp_path / "export.jsonl"
    ingest = CliRunner().invoke(cli, ["ingest", "--db", db, str(path), "-q"])
    assert ingest.exit_code == 0, ingest.output
    shown = CliRunner().invoke(cli, ["backtest", "--db", db, "--json"])
    assert shown.exit_code == 0, shown.output
    rows = {r["policy"]: r for r in json.loads(shown.stdout)}
    # the tool-keyed guards see 8 calls of unknown arguments: blind on every one, no trip
    for policy in ("opencode_doom_loop", "gemini_repeat_tool", "no_progress"):
        assert rows[policy]["blind_calls"] == 8, rows[policy]
        assert rows[policy]["false_trips"] == 0, rows[policy]


def test_the_same_parameters_failing_the_same_way_are_still_a_loop(tmp_path: Path) -> None:
    """With the parameters logged, the same command failing with the same error six times
    is found, as on a transcript (the error's text is what came back)."""
    params = json.dumps({"bash_command": "pytest", "full_command": "pytest -x"})
    _, data = _audit(
        tmp_path,
        *_session(
            "loop", 6, success="false", error="Exit code 1\nNo module", tool_parameters=params
        ),
    )
    found = [i for i in data["incidents"] if i["detector"] == "repeated_tool_call"]
    assert len(found) == 1 and found[0]["n_calls"] == 6
