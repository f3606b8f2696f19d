"""Aider's Markdown chat history (``analyzer.formats.aider_chat``): the shapes Aider's own
source writes (``aider/io.py``, ``aider/coders/base_coder.py``), one case each, and the real
histories of ``tests/real_runs/aider_chat`` against the count of their own accounting lines
(``truth.json`` there, made by ``truth.py`` without this project's code)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.formats.aider_chat import _count

HEADER = [
    "",
    "# aider chat started at 2025-02-01 10:00:00",
    "",
    "> /usr/bin/aider --model gpt-4o  ",
    "> Aider v0.72.1  ",
    "> Main model: gpt-4o with diff edit format  ",
    "> Weak model: gpt-4o-mini  ",
    "> Git repo: .git with 3 files  ",
    "",
]


def _write(tmp_path: Path, lines: list[str], name: str = "proj") -> Path:
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    f = folder / ".aider.chat.history.md"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f


def _ingest(tmp_path: Path, *files: Path) -> duckdb.DuckDBPyConnection:
    db = tmp_path / "s.duckdb"
    result = CliRunner().invoke(cli, ["ingest", "-q", "--db", str(db), *map(str, files)])
    assert result.exit_code == 0, result.output
    return duckdb.connect(str(db), read_only=True)


def _tools(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """The tool calls and results stored, in order: (kind, tool, error, excerpt)."""
    return con.execute(
        "SELECT kind, tool_name, is_error, excerpt FROM messages WHERE kind LIKE 'tool%' "
        "ORDER BY idx"
    ).fetchall()


def _reply(text: str, tokens: str, *after: str) -> list[str]:
    return ["", text, "", f"> Tokens: {tokens}  ", *(f"> {a}  " for a in after), ""]


def _refused(n: int) -> list[str]:
    out = ["#### add a divide function  "]
    for k in range(1, n + 1):
        out += _reply(
            f"Here is the file, attempt {k}:\n\n```\ncalc.py\ndef divide(a, b): ...\n```",
            f"2.{k}k sent, 34{k} received. Cost: $0.01 message, ${k / 100:.2f} session.",
            "The LLM did not conform to the edit format.",
            "https://aider.chat/docs/troubleshooting/edit-errors.html",
            "No filename provided before ``` in file listing",
        )
    return out


def test_counts_as_aider_prints_them() -> None:
    assert [_count(t) for t in ("812", "2.5k", "47k", "1,234", None)] == [
        812,
        2500,
        47000,
        1234,
        None,
    ]


def test_a_call_per_accounting_line_with_its_tokens_and_cost(tmp_path: Path) -> None:
    lines = [
        *HEADER,
        "#### fix the bug in calc.py  ",
        "#### and add a test  ",
        *_reply(
            "I will fix it.\n\ncalc.py\n```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n"
            ">>>>>>> REPLACE\n```",
            "2.8k sent, 345 received. Cost: $0.01 message, $0.01 session.",
            "Applied edit to calc.py",
            "Commit 1a2b3c4 fix: calc",
        ),
        "#### again  ",
        "",
        "Here it is",
        "",
        # both cache figures: the cost goes on a line of its own, unquoted (base_coder.py)
        "> Tokens: 31k sent, 1.2k cache write, 20k cache hit, 389 received.  ",
        "Cost: $0.0042 message, $0.0142 session.  ",
    ]
    con = _ingest(tmp_path, _write(tmp_path, lines))
    calls = con.execute(
        "SELECT session_id, turn_id, model, provider, input_tokens, cached_input_tokens, "
        "cache_write_tokens, output_tokens, output_final, cost_usd, cost_basis, "
        "tool_call_count, project FROM calls ORDER BY seq"
    ).fetchall()
    sid = "proj@2025-02-01 10:00:00"
    assert calls == [
        (sid, f"{sid}:1", "gpt-4o", None, 2800, None, None, 345, True, Decimal("0.01"),
         "reported", 1, "proj"),
        (sid, f"{sid}:2", "gpt-4o", None, 31000, 20000, 1200, 389, True, Decimal("0.0042"),
         "reported", 0, "proj"),
    ]  # fmt: skip
    said = con.execute(
        "SELECT role, kind, tool_name, is_error, excerpt FROM messages ORDER BY idx"
    ).fetchall()
    assert said[0] == ("user", "prompt", None, None, "fix the bug in calc.py\nand add a test")
    assert said[2][:3] == ("assistant", "tool_call", "edit")
    assert said[3] == ("tool", "tool_result", "edit", False, "Applied edit to calc.py")
    run = con.execute("SELECT reported_calls, reported_cost_usd, exit_status FROM runs").fetchall()
    assert run == [(2, Decimal("0.0142"), None)]
    # every line that is not blank is loaded or skipped by kind, none lost
    read, loaded, skipped, rejected = con.execute(
        "SELECT rows_read, rows_loaded, rows_skipped, rows_rejected FROM sources"
    ).fetchone()  # type: ignore[misc]
    assert read == sum(1 for ln in "\n".join(lines).split("\n") if ln.strip())
    assert loaded + skipped + rejected == read and rejected == 0


def test_refused_replies_to_the_reflection_limit_are_a_loop(tmp_path: Path) -> None:
    lines = [*HEADER, *_refused(4), "> Only 3 reflections allowed, stopping.  "]
    f = _write(tmp_path, lines)
    result = CliRunner().invoke(cli, ["audit", str(f), "--json"])
    found = json.loads(result.stdout)
    kinds = [i["detector"] for i in found["incidents"]]
    assert kinds == ["format_error_loop"], kinds
    con = _ingest(tmp_path, f)
    assert con.execute("SELECT count(*) FROM messages WHERE kind = 'format_error'").fetchone() == (
        4,
    )
    excerpt = con.execute("SELECT excerpt FROM messages WHERE kind = 'format_error'").fetchone()
    assert excerpt == ("No filename provided before ``` in file listing",)
    assert con.execute("SELECT exit_status, outcome FROM runs").fetchall() == [
        ("Only 3 reflections allowed, stopping.", "format_error")
    ]


def test_a_healthy_session_is_quiet(tmp_path: Path) -> None:
    lines = [*HEADER]
    for k, word in enumerate(("add", "subtract", "multiply", "divide", "power", "modulo"), 1):
        lines += [f"#### step {k}: add {word}  "]
        lines += _reply(
            f"calc.py\n```python\n<<<<<<< SEARCH\n=======\ndef {word}(a, b): ...\n"
            ">>>>>>> REPLACE\n```",
            f"{k}.1k sent, 12{k} received. Cost: $0.01 message, ${k / 100:.2f} session.",
            "Applied edit to calc.py",
            f"Commit abc123{k} feat: {word}",
        )
    result = CliRunner().invoke(cli, ["audit", str(_write(tmp_path, lines)), "--json"])
    assert json.loads(result.stdout)["incidents"] == []


def test_a_failed_search_replace_is_an_edit_that_failed(tmp_path: Path) -> None:
    error = [
        "The LLM did not conform to the edit format.",
        "https://aider.chat/docs/troubleshooting/edit-errors.html",
        "# 1 SEARCH/REPLACE block failed to match!",
        "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in "
        "src/app.py",
        "<<<<<<< SEARCH",
        "def f():",
    ]
    lines = [
        *HEADER,
        "#### rename f  ",
        *_reply("src/app.py\n```\n<<<<<<< SEARCH\n...", "9.9k sent, 99 received.", *error),
    ]
    con = _ingest(tmp_path, _write(tmp_path, lines))
    said = _tools(con)
    assert [s[:3] for s in said] == [("tool_call", "edit", None), ("tool_result", "edit", True)]
    assert said[0][3].startswith('{"path":"src/app.py"')
    assert said[1][3].startswith("# 1 SEARCH/REPLACE block failed to match!")
    assert con.execute("SELECT cost_usd IS NULL OR cost_basis <> 'reported' FROM calls").fetchone()


def test_lint_output_offered_for_fixing_is_a_failed_lint(tmp_path: Path) -> None:
    lines = [
        *HEADER,
        "#### add x  ",
        *_reply(
            "calc.py\n```\n<<<<<<< SEARCH\n=======\nx=\n>>>>>>> REPLACE\n```",
            "1.0k sent, 50 received.",
            "Applied edit to calc.py",
            "# Fix any errors below, if possible.",
            "calc.py:1:3: E999 SyntaxError: invalid syntax",
            "Attempt to fix lint errors? (Y)es/(N)o [Yes]: y",
        ),
    ]
    con = _ingest(tmp_path, _write(tmp_path, lines))
    said = _tools(con)
    assert [s[:3] for s in said] == [
        ("tool_call", "edit", None),
        ("tool_result", "edit", False),
        ("tool_call", "lint", None),
        ("tool_result", "lint", True),
    ]
    assert "E999" in said[3][3]


def test_architect_replies_then_editor_replies(tmp_path: Path) -> None:
    header = [
        "",
        "# aider chat started at 2025-03-01 08:00:00",
        "",
        "> Main model: o3 with architect edit format  ",
        "> Editor model: gpt-4.1 with editor-diff edit format  ",
        "> Weak model: gpt-4.1-mini  ",
        "",
    ]
    lines = [
        *header,
        "#### plan and do it  ",
        *_reply("Change calc.py to ...", "5.0k sent, 900 received."),
        *_reply("calc.py\n```\n...\n```", "6.0k sent, 300 received.", "Applied edit to calc.py"),
        "#### /model sonnet  ",
        "",
        "> Main model: anthropic/claude-sonnet-4-5 with diff edit format  ",
        "",
        "#### next  ",
        *_reply("ok", "7.0k sent, 10 received."),
    ]
    con = _ingest(tmp_path, _write(tmp_path, lines))
    models = con.execute("SELECT model, provider FROM calls ORDER BY seq").fetchall()
    assert models == [("o3", None), ("gpt-4.1", None), ("claude-sonnet-4-5", "anthropic")]


def test_trimmed_trailing_spaces_are_read_by_the_prefixes(tmp_path: Path) -> None:
    lines = [ln.rstrip() for ln in [*HEADER, *_refused(2)]]
    con = _ingest(tmp_path, _write(tmp_path, lines))
    assert con.execute("SELECT count(*) FROM calls").fetchone() == (2,)
    assert con.execute("SELECT count(*) FROM messages WHERE kind = 'format_error'").fetchone() == (
        2,
    )


def test_a_reply_quoting_markdown_is_not_aiders_own_line(tmp_path: Path) -> None:
    reply = "#### A heading of the reply\n> a quote in the reply\ndone"
    lines = [*HEADER, "#### explain  ", *_reply(reply, "1.0k sent, 20 received.")]
    con = _ingest(tmp_path, _write(tmp_path, lines))
    said = con.execute("SELECT kind, excerpt FROM messages ORDER BY idx").fetchall()
    assert said == [("prompt", "explain"), ("text", reply)]


def test_odd_lines_are_rejected_or_said_never_lost(tmp_path: Path) -> None:
    lines = [
        *HEADER,
        "#### go  ",
        "",
        "an answer cut off by ^C",
        "",
        ">  ",
        "> ^C again to exit  ",
        "",
        "#### go on  ",
        "",
        "the answer",
        "",
        "> Tokens: many sent, few received.  ",
        "",
        "#### and  ",
        *_reply("last", "1.0k sent, 20 received. Cost: lots"),
    ]
    con = _ingest(tmp_path, _write(tmp_path, lines))
    rejects = con.execute("SELECT line, reason FROM rejects ORDER BY line").fetchall()
    assert [r[1] for r in rejects] == [
        "an accounting line that does not read as Aider's",
        "an accounting line whose cost does not read as Aider's",
    ]
    # the interrupted answer, and the one whose accounting could not be read, have no call
    texts = con.execute(
        "SELECT excerpt, call_id IS NULL FROM messages WHERE kind = 'text'"
    ).fetchall()
    assert texts[:2] == [("an answer cut off by ^C", True), ("the answer", True)]
    assert con.execute("SELECT count(*), any_value(cost_basis) FROM calls").fetchone() == (
        1,
        "estimated",
    )
    read, loaded, skipped, rejected = con.execute(
        "SELECT rows_read, rows_loaded, rows_skipped, rows_rejected FROM sources"
    ).fetchone()  # type: ignore[misc]
    assert loaded + skipped + rejected == read


def test_a_session_total_that_is_not_the_sum_is_said(tmp_path: Path) -> None:
    lines = [
        *HEADER,
        "#### a  ",
        *_reply("x", "1.0k sent, 20 received. Cost: $0.10 message, $0.10 session."),
        "#### b  ",
        *_reply("y", "1.0k sent, 20 received. Cost: $0.10 message, $0.90 session."),
    ]
    f = _write(tmp_path, lines)
    result = CliRunner().invoke(cli, ["ingest", "--db", str(tmp_path / "t.duckdb"), str(f)])
    assert result.exit_code == 0
    assert "Aider's session total $0.90 is not the sum of its messages' costs ($0.20)" in (
        result.stderr
    )


def test_sessions_of_one_file_and_ids_that_survive_growth(tmp_path: Path) -> None:
    first = [*HEADER, "#### a  ", *_reply("x", "1.0k sent, 20 received.")]
    f = _write(tmp_path, first)
    ids = _ingest(tmp_path, f).execute("SELECT call_id FROM calls").fetchall()
    second = ["# aider chat started at 2025-02-02 11:00:00", "", "#### b  "]
    f.write_text(
        f.read_text() + "\n".join([*second, *_reply("y", "2.0k sent, 30 received.")]) + "\n"
    )
    (tmp_path / "s.duckdb").unlink()
    con = _ingest(tmp_path, f)
    got = con.execute("SELECT call_id, session_id, ts FROM calls ORDER BY call_id").fetchall()
    assert [(g[0],) for g in got[:1]] == ids
    assert [g[1] for g in got] == ["proj@2025-02-01 10:00:00", "proj@2025-02-02 11:00:00"]
    assert str(got[1][2]) == "2025-02-02 11:00:00"


REAL = Path(__file__).resolve().parent / "real_runs" / "aider_chat"


def _real_files() -> list[Path]:
    return sorted(REAL.rglob("*.aider.chat.history.md")) if REAL.is_dir() else []


@pytest.mark.parametrize("path", _real_files(), ids=lambda p: str(p.relative_to(REAL)))
def test_real_histories_against_their_own_accounting(tmp_path: Path, path: Path) -> None:
    truth = json.loads((REAL / "truth.json").read_text())["files"][str(path.relative_to(REAL))]
    con = _ingest(tmp_path, path)
    calls, sent, received, stated = con.execute(
        "SELECT count(*), sum(input_tokens), sum(output_tokens), count(input_tokens) FROM calls"
    ).fetchone()  # type: ignore[misc]
    if truth["accounting_lines"]:
        assert calls == stated == truth["accounting_lines"]
        assert sent == truth["tokens_sent_sum"] and received == truth["tokens_received_sum"]
    else:  # an Aider before 0.46 printed no accounting: a call per reply, tokens unknown
        assert calls > 0 and stated == 0
    cost = con.execute(
        "SELECT coalesce(sum(cost_usd), 0) FROM calls WHERE cost_basis = 'reported'"
    ).fetchone()
    assert cost is not None
    assert cost[0] == Decimal(truth["cost_message_sum"] or "0")
    # a run for each session with calls: its verdict and Aider's stated totals
    assert (
        con.execute("SELECT count(*) FROM runs").fetchone()
        == con.execute("SELECT count(DISTINCT session_id) FROM calls").fetchone()
    )
    read, loaded, skipped, rejected = con.execute(
        "SELECT rows_read, rows_loaded, rows_skipped, rows_rejected FROM sources"
    ).fetchone()  # type: ignore[misc]
    assert loaded + skipped + rejected == read and rejected == 0


def test_real_reflection_limit_is_found_and_healthy_histories_are_quiet(tmp_path: Path) -> None:
    """gxm11's session of 2024-07-28 14:01:55 (Aider 0.45.1) ends a turn with four replies in
    a row whose SEARCH/REPLACE block failed to match the same file, and Aider's ``Only 3
    reflections allowed, stopping.``: the same error from four different actions. The healthy
    histories (AFI, Aquaticat, mozgoslav) give no incident."""
    found = {}
    for path in _real_files():
        db = tmp_path / f"{path.parent.name}.duckdb"
        out = CliRunner().invoke(cli, ["audit", "-q", "--db", str(db), str(path), "--json"])
        found[path.parent.name] = [
            (i["detector"], i["session_id"]) for i in json.loads(out.stdout)["incidents"]
        ]
    assert found["gxm11__RPGXP-Crafting-System"] == [
        ("same_error_retry", "gxm11__RPGXP-Crafting-System@2024-07-28 14:01:55")
    ]
    for healthy in ("AFI-Protocol__afi-core", "Aquaticat__Monochromatic", "AlexShchuka__mozgoslav"):
        assert found[healthy] == [], healthy
