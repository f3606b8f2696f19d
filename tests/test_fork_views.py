"""``show`` and ``usage session`` say which session a fork was made from, or a sub-agent
started by (issue 32); on the forked Codex rollouts of ``tests/fixtures/codex_forks``."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from analyzer.cli.main import cli
from tests.test_codex_forks import FILES, FIXTURES, F, P, Q, R, S, lines, write


def run(runner: CliRunner, *args: str) -> str:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_usage_session_shows_the_fork(runner: CliRunner, tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    run(runner, "ingest", str(FIXTURES), "--db", db, "-q")
    args = ("usage", "session", "--db", db, "--json")
    rows = {r["key"]: r for r in json.loads(run(runner, *args, "--sub-agents"))["session"]}
    assert rows[F]["parent"] == {"session_id": P, "relation": "forked_from"}
    assert rows[S]["parent"] == {"session_id": P, "relation": "subagent_of"}
    assert rows[R]["parent"] == {"session_id": Q, "relation": "subagent_of"}
    assert "parent" not in rows[P] and "parent" not in rows[Q]
    assert [rows[k]["calls"] for k in (P, F, S, Q, R)] == [5, 2, 2, 2, 1]
    # By default a sub-agent's calls count in the session that started it; a fork stays apart
    # (its copy of the parent's history is the parent's, counted there once).
    folded = {r["key"]: r for r in json.loads(run(runner, *args))["session"]}
    assert {k: (r["calls"], r["sub_agents"]) for k, r in folded.items()} == {
        P: (5 + 2, 1),
        F: (2, 0),
        Q: (2 + 1, 1),
    }
    assert folded[F]["parent"] == {"session_id": P, "relation": "forked_from"}
    totals = json.loads(run(runner, "usage", "daily", "--db", db, "--json"))["totals"]
    assert totals["calls"] == 12
    text = run(runner, "usage", "session", "--db", db, "--sub-agents")
    assert f"  ↳ forked from {P}" in text
    assert f"  ↳ sub-agent of {P}" in text
    listed = text.splitlines()
    fork_row = next(i for i, x in enumerate(listed) if x.startswith(F[:8]))
    assert listed[fork_row + 1] == f"  ↳ forked from {P}"
    table = run(runner, "usage", "session", "--db", db, "--csv").splitlines()
    assert ",parent_session_id,parent_relation," in table[0]
    fork = next(r for r in csv.DictReader(table) if r["session"] == F)
    assert (fork["parent_session_id"], fork["parent_relation"]) == (P, "forked_from")


def _rec(ts: str, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": ts, "type": kind, "payload": payload}


def _loop_lines(session: str, at: str, sec0: int) -> list[dict[str, Any]]:
    """Three turns' worth of the same tool call getting the same result back."""
    out = []
    for i in range(3):
        s = sec0 + 10 * i
        total = {
            "input_tokens": 1000 * (i + 1),
            "cached_input_tokens": 0,
            "output_tokens": 20 * (i + 1),
            "reasoning_output_tokens": 0,
        }
        last = {
            "input_tokens": 1000,
            "cached_input_tokens": 0,
            "output_tokens": 20,
            "reasoning_output_tokens": 0,
        }
        out += [
            _rec(
                f"{at}:{s:02d}.000Z",
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "call_id": f"{session}-{i}",
                    "arguments": '{"cmd":"make build"}',
                },
            ),
            _rec(
                f"{at}:{s + 1:02d}.000Z",
                "event_msg",
                {
                    "type": "token_count",
                    "info": {"total_token_usage": total, "last_token_usage": last},
                },
            ),
            _rec(
                f"{at}:{s + 2:02d}.000Z",
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": f"{session}-{i}",
                    "output": "error: missing header cart.h",
                },
            ),
        ]
    return out


def test_show_tells_the_fork_and_the_copy_makes_no_second_incident(
    runner: CliRunner, tmp_path: Path
) -> None:
    """A parent that looped, and a fork of it that loops on its own: two incidents, the
    parent's once (not again in the fork's copy), and the fork's shown as a fork."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    pmeta = lines(FILES[P])[0]["payload"]
    ctx = {"turn_id": None, "cwd": "/home/dev/shop", "model": "gpt-5.3-codex"}
    parent = [
        _rec("2026-03-02T09:00:00.410Z", "session_meta", pmeta),
        _rec("2026-03-02T09:00:01.000Z", "turn_context", ctx),
    ]
    parent += _loop_lines("p", "2026-03-02T09:00", 2)
    write(folder / FILES[P].name, parent)
    fmeta = lines(FILES[F])[0]["payload"]
    fork = [_rec("2026-03-02T09:10:00.412Z", "session_meta", fmeta)]
    fork += [dict(r, timestamp=f"2026-03-02T09:10:00.{413 + i:03d}Z") for i, r in enumerate(parent)]
    fork += [_rec("2026-03-02T09:10:30.000Z", "turn_context", ctx)]
    fork += _loop_lines("f", "2026-03-02T09:11", 2)
    write(folder / FILES[F].name, fork)
    db = str(tmp_path / "s.duckdb")
    run(runner, "ingest", str(folder), "--db", db, "-q")
    run(runner, "detect", "--db", db, "-q", "--only", "repeated_tool_call")
    found = json.loads(run(runner, "incidents", "--db", db, "--json"))
    assert sorted(i["session_id"] for i in found) == sorted([P, F])
    in_fork = next(i for i in found if i["session_id"] == F)
    text = run(runner, "show", str(in_fork["number"]), "--db", db)
    assert f"  session  {F}" in text
    assert f"  parent   forked from {P}" in text
    shown = json.loads(run(runner, "show", str(in_fork["number"]), "--db", db, "--json"))
    assert shown["parent"] == {"session_id": P, "relation": "forked_from"}
    # The fork's incident is made of its own calls, as many as the parent's, none of the
    # parent's calls copied before them (stamped 09:10:00).
    fork_calls = [c["ts"][11:16] for c in shown["calls"]]
    in_parent = next(i for i in found if i["session_id"] == P)
    shown = json.loads(run(runner, "show", str(in_parent["number"]), "--db", db, "--json"))
    assert shown["parent"] is None
    assert len(fork_calls) == len(shown["calls"]) >= 2 and set(fork_calls) == {"09:11"}
    assert "  parent " not in run(runner, "show", str(in_parent["number"]), "--db", db)
