"""One figure per question: the counts and dollars ``audit``, the report and the usage views
show come from one aggregate (``analyzer.views.usage``), so they agree on the same store."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from analyzer.cli.main import cli
from tests.test_claude_code import SESSION, assistant, line, user, write


def test_audit_and_the_usage_views_count_the_same_unpriced_calls(tmp_path: Path) -> None:
    """Calls whose log has no tokens (an assistant line without usage) have no cost: audit
    once counted them unpriced (100 on a real store) where `usage session` said 0."""
    no_usage = assistant(3, "msg_N", "req_N", {"type": "text", "text": "hi"}, 1)
    del no_usage["message"]["usage"]
    lines = [
        user(1, "go"),
        assistant(2, "msg_A", "req_A", {"type": "text", "text": "ok"}, 5, stop="end_turn"),
        no_usage,
        line(
            "assistant",
            4,
            requestId="req_M",
            message={
                "id": "msg_M",
                "model": "no-such-model-9",
                "role": "assistant",
                "content": [{"type": "text", "text": "x"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 2},
            },
        ),
    ]
    f = write(tmp_path / "p" / f"{SESSION}.jsonl", lines)
    db = tmp_path / "s.duckdb"
    run = CliRunner()
    audit = run.invoke(cli, ["audit", "--db", str(db), str(f), "--json", "-q"])
    assert audit.exit_code == 0, audit.output
    summary = json.loads(audit.stdout)
    usage = json.loads(run.invoke(cli, ["usage", "session", "--db", str(db), "--json"]).stdout)
    totals = usage["totals"]
    # two calls have no cost: one has no tokens, one a model without a known price
    assert summary["calls_by_cost_basis"] == {"estimated": 1, "unpriced": 2}
    assert totals["unpriced_calls"] == summary["calls_by_cost_basis"]["unpriced"] == 2
    assert totals["calls_by_cost_basis"] == summary["calls_by_cost_basis"]
    assert totals["calls"] == summary["calls"] == 3
    assert totals["usd"] == summary["total_usd"]
    assert {b: totals[f"usd_{b}"] for b in summary["usd_by_cost_basis"]} == summary[
        "usd_by_cost_basis"
    ]
    text = run.invoke(cli, ["usage", "session", "--db", str(db)]).stdout
    assert "unpriced: calls with no cost (no known price, no tokens in the log" in " ".join(
        text.split()
    )
