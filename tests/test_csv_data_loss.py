"""Issue 33, "data lost or refused whole", for the CSV inputs: a stray quote, a carriage return
inside a value, a field of any size, an amount finer than the store keeps or a format forced on
the wrong file costs at most the records it is in, each rejected with its line, never the rest
of the file; a file that is not what the format says is one line naming what it lacks.

Every CSV reader is checked: the OpenRouter export (DuckDB's reader), and the LiteLLM spend log
and the Anthropic and OpenAI usage exports (Python's). The 200 MB field is in
``bench/huge_field.py`` (it prints the time and memory it takes); here a field over DuckDB's own
line limit (2,000,000 bytes) takes the same way.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from tests.helpers import HEADER, REPO, or_row

FIXTURES = REPO / "tests" / "fixtures"
UNTERMINATED = "unterminated quote"


def ingest(tmp_path: Path, path: Path, *args: str) -> tuple[int, str, str]:
    """``llm-forensics ingest`` of ``path`` into a fresh store: exit code, stdout, stderr."""
    db = tmp_path / "s.duckdb"
    result = CliRunner().invoke(cli, ["ingest", "--db", str(db), *args, str(path)])
    return result.exit_code, result.stdout, result.stderr


def rows(tmp_path: Path, sql: str) -> list[tuple[object, ...]]:
    with open_store(tmp_path / "s.duckdb", read_only=True) as store:
        return store.con.execute(sql).fetchall()


def source(tmp_path: Path) -> tuple[object, ...]:
    """The file's accounting: read, loaded, rejected, duplicate, skipped."""
    [counts] = rows(
        tmp_path,
        "SELECT rows_read, rows_loaded, rows_rejected, rows_duplicate, rows_skipped FROM sources",
    )
    return counts


def rejects(tmp_path: Path) -> list[tuple[object, ...]]:
    return rows(tmp_path, "SELECT line, reason FROM rejects ORDER BY line")


def export(path: Path, n: int, change: Callable[[int, dict[str, object]], None]) -> Path:
    """An OpenRouter export of ``n`` rows written as is (no quoting added), ``change`` applied
    to each row first."""
    lines = [",".join(HEADER)]
    for i in range(n):
        row = or_row(i)
        change(i, row)
        lines.append(",".join(str(row[c]) for c in HEADER))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")
    return path


def one_line_error(err: str, name: str) -> str:
    """The one error line of a run refused for its input (no traceback, not "ours")."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert name in lines[0], err
    for never in ("Traceback", "unexpected", "a bug in llm-forensics"):
        assert never not in err, err
    return lines[0]


# --- An unclosed quote costs its own record ---------------------------------------------------


def test_an_unclosed_quote_in_an_openrouter_export_costs_only_its_row(tmp_path: Path) -> None:
    """The issue's case: ``"unclosed app`` as the last field of row 100 of 200. DuckDB's reader
    took the other 99 rows after it into that one value; now its line is rejected and the lines
    after it are read as the records they are."""

    def unclosed(i: int, row: dict[str, object]) -> None:
        if i == 99:
            row["app_name"] = '"unclosed app'

    f = export(tmp_path / "activity.csv", 200, unclosed)
    code, out, err = ingest(tmp_path, f)
    assert (code, err) == (0, "")
    assert "200 records, 1 rejected" in out
    assert source(tmp_path) == (200, 199, 1, 0, 0)
    [(line, reason)] = rejects(tmp_path)
    assert line == 101 and UNTERMINATED in str(reason)  # the header is line 1
    loaded = rows(tmp_path, "SELECT line FROM calls ORDER BY line")
    assert [r[0] for r in loaded] == [n for n in range(2, 202) if n != 101]


def test_a_stray_quote_closed_by_a_later_quoted_value(tmp_path: Path) -> None:
    """A stray quote that a quoted value 50 rows later closes: the 49 rows between were one
    rejected record; now only the row with the stray quote is, and the quoted value loads."""

    def stray(i: int, row: dict[str, object]) -> None:
        if i == 99:
            row["app_name"] = '"unclosed app'
        if i == 149:
            row["app_name"] = '"Acme, Inc"'

    code, _, _ = ingest(tmp_path, export(tmp_path / "activity.csv", 200, stray))
    assert code == 0
    assert source(tmp_path) == (200, 199, 1, 0, 0)
    [(line, reason)] = rejects(tmp_path)
    assert line == 101 and UNTERMINATED in str(reason)
    assert rows(tmp_path, "SELECT app FROM calls WHERE line = 151") == [("Acme, Inc",)]


def _anthropic_tokens(path: Path, n: int, bad: int) -> Path:
    """A Console usage export of ``n`` days; row ``bad`` ends in an unclosed quote."""
    src = (FIXTURES / "anthropic_usage" / "claude_api_tokens_2026_03.csv").read_text("utf-8")
    header, first = src.splitlines()[:2]
    lines = [header]
    for i in range(n):
        fields = first.split(",")
        fields[0] = f"2026-03-{i + 1:02d}"
        if i == bad:
            fields[-1] = '"' + fields[-1]
        lines.append(",".join(fields))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _openai_costs(path: Path, n: int, bad: int) -> Path:
    """An OpenAI dashboard cost export of ``n`` days; row ``bad`` ends in an unclosed quote."""
    header = (FIXTURES / "openai_usage" / "cost_export.csv").read_text("utf-8").splitlines()[0]
    lines = [header]
    for i in range(n):
        start = 1759622400 + 86400 * i
        last = '"Personal' if i == bad else "Personal"
        lines.append(f"{start},{start + 86400},,,0.5{i},usd,,,org-fixture0001,{last}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _litellm(path: Path, n: int, bad: int) -> Path:
    """The first ``n`` rows of the LiteLLM spend-log fixture; row ``bad`` ends in an unclosed
    quote (the next row's own quoted JSON then closes it)."""
    src = (FIXTURES / "litellm" / "LiteLLM_SpendLogs.csv").read_text("utf-8").splitlines()
    lines = src[: n + 1]
    lines[bad + 1] = lines[bad + 1][: -len("{}")] + '"{}'
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("fmt", "write", "n"),
    [
        ("anthropic_usage", _anthropic_tokens, 28),
        ("openai_usage", _openai_costs, 20),
        ("litellm_spend", _litellm, 40),
    ],
)
def test_an_unclosed_quote_costs_only_its_row_in_every_csv_reader(
    tmp_path: Path, fmt: str, write: Callable[[Path, int, int], Path], n: int
) -> None:
    """The same in the readers built on Python's csv module (the issue's Anthropic export lost
    18 of its 28 rows): the row with the quote is rejected with its line, every other loads."""
    f = write(tmp_path / "bill.csv", n, 9)
    code, _, err = ingest(tmp_path, f)
    assert (code, err) == (0, ""), err
    assert rows(tmp_path, "SELECT format FROM sources") == [(fmt,)]
    read, loaded, rejected, duplicate, skipped = source(tmp_path)
    assert (read, rejected) == (n, 1)
    assert loaded + duplicate + skipped == n - 1
    [(line, reason)] = rejects(tmp_path)
    assert line == 11 and UNTERMINATED in str(reason)


# --- A carriage return inside a value ----------------------------------------------------------


def test_a_lone_cr_inside_a_value_does_not_split_its_openrouter_row(tmp_path: Path) -> None:
    """A CR in an unquoted value of a file of LF line ends (pasted from another program): its
    row stays one record, the CR in the value (it loaded "My" and rejected a row "App")."""

    def cr(i: int, row: dict[str, object]) -> None:
        if i == 99:
            row["app_name"] = "My\rApp"
        if i == 120:
            row["user"] = "u\r1"

    code, _, _ = ingest(tmp_path, export(tmp_path / "activity.csv", 200, cr))
    assert code == 0
    assert source(tmp_path) == (200, 200, 0, 0, 0)
    got = rows(tmp_path, "SELECT line, app, user_id FROM calls WHERE line IN (101, 122)")
    assert sorted(got) == [(101, "My\rApp", "u1"), (122, "App A", "u\r1")]


def test_a_lone_cr_inside_a_value_does_not_split_a_usage_row(tmp_path: Path) -> None:
    f = _anthropic_tokens(tmp_path / "tokens.csv", 5, -1)
    text = f.read_text("utf-8").replace(",Default,", ",De\rfault,", 1)
    f.write_text(text, encoding="utf-8", newline="")
    code, _, _ = ingest(tmp_path, f)
    assert code == 0
    assert source(tmp_path) == (5, 5, 0, 0, 0)
    assert ("De\rfault",) in rows(tmp_path, "SELECT workspace FROM bill_buckets")


# --- A field of any size is read ---------------------------------------------------------------


def test_a_litellm_prompt_of_300_kb_is_read(tmp_path: Path) -> None:
    """The issue's case: a ``messages`` cell holding a 300 KB prompt refused the whole file "as
    a bug" (Python's csv field limit of 131,072 characters)."""
    src = FIXTURES / "litellm" / "LiteLLM_SpendLogs.csv"
    table = list(csv.reader(io.StringIO(src.read_text("utf-8"), newline="")))
    messages = table[0].index("messages")
    table[3][messages] = '[{"role": "user", "content": "' + "p" * 300_000 + '"}]'
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(table)
    f = tmp_path / "LiteLLM_SpendLogs.csv"
    f.write_text(buf.getvalue(), encoding="utf-8")
    code, _, err = ingest(tmp_path, f)
    assert code == 0 and "Error" not in err, err  # (a warning says two rows are embeddings)
    assert source(tmp_path)[0] == len(table) - 1
    assert [line for line, _ in rejects(tmp_path)] == [57]  # the fixture's own bad row
    assert rows(tmp_path, "SELECT line FROM calls WHERE line = 4") == [(4,)]


def test_an_anthropic_value_over_the_csv_field_limit_is_read(tmp_path: Path) -> None:
    f = _anthropic_tokens(tmp_path / "tokens.csv", 5, -1)
    lines = f.read_text("utf-8").splitlines()
    lines[3] = lines[3].replace(",Default,", "," + "W" * 200_000 + ",", 1)
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err = ingest(tmp_path, f)
    assert (code, err) == (0, ""), err
    assert source(tmp_path) == (5, 5, 0, 0, 0)


def test_a_quoted_value_over_duckdbs_line_limit_is_read(tmp_path: Path) -> None:
    """A correctly quoted value of 3 MB (over DuckDB's default line limit, 2,000,000 bytes) was
    rejected as "Value with unterminated quote found"; it is read (and so is one of 200 MB:
    ``bench/huge_field.py``)."""

    def big(i: int, row: dict[str, object]) -> None:
        if i == 20:
            row["app_name"] = '"' + "y" * 3_000_000 + '"'

    code, _, err = ingest(tmp_path, export(tmp_path / "activity.csv", 50, big))
    assert (code, err) == (0, ""), err
    assert source(tmp_path) == (50, 50, 0, 0, 0)
    assert rows(tmp_path, "SELECT length(app) FROM calls WHERE line = 22") == [(3_000_000,)]


def test_an_amount_finer_than_the_store_keeps_is_rounded_not_refused(tmp_path: Path) -> None:
    """A cost of ``1e-400`` or ``0.000000000012345`` dollars (found by the property search)
    refused the whole file "as a bug" (Arrow would not round it to the store's 10 decimal
    places); it is rounded, as the OpenRouter export's costs are."""
    f = _openai_costs(tmp_path / "costs.csv", 3, -1)
    lines = f.read_text("utf-8").splitlines()
    lines[1] = lines[1].replace(",0.50,", ",1e-400,")
    lines[2] = lines[2].replace(",0.51,", ",0.000000000062345,")
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err = ingest(tmp_path, f)
    assert (code, err) == (0, ""), err
    got = rows(tmp_path, "SELECT cost_usd FROM bill_buckets ORDER BY line")
    assert [str(r[0]) for r in got] == ["0E-10", "1E-10", "0.5200000000"]


def test_a_litellm_spend_finer_than_the_store_keeps_is_rounded(tmp_path: Path) -> None:
    src = FIXTURES / "litellm" / "LiteLLM_SpendLogs.csv"
    table = list(csv.reader(io.StringIO(src.read_text("utf-8"), newline="")))[:3]
    table[1][table[0].index("spend")] = "1e-400"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(table)
    f = tmp_path / "LiteLLM_SpendLogs.csv"
    f.write_text(buf.getvalue(), encoding="utf-8")
    code, _, err = ingest(tmp_path, f)
    assert (code, err) == (0, ""), err
    assert [str(r[0]) for r in rows(tmp_path, "SELECT cost_usd FROM calls WHERE line = 2")] == [
        "0E-10"
    ]


# --- A format forced on the wrong file ---------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "needs"),
    [
        ("anthropic_usage", "usage_date_utc"),
        ("openai_usage", "start_time"),
        ("litellm_spend", "request_id"),
    ],
)
def test_a_forced_format_without_its_columns_is_one_line_naming_them(
    tmp_path: Path, fmt: str, needs: str
) -> None:
    """The issue's ``printf 'model,foo\\nx,1\\n' > a.csv; ingest --format anthropic_usage``
    gave ``unexpected KeyError: 'usage_date_utc'``; the others loaded it as rejected rows."""
    f = tmp_path / "a.csv"
    f.write_text("model,foo\nx,1\n", encoding="utf-8")
    code, _, err = ingest(tmp_path, f, "--format", fmt)
    assert code == 3
    line = one_line_error(err, "a.csv:1:")
    assert "missing required column" in line and needs in line, line
    stored = tmp_path / "s.duckdb"  # (a store made for this run alone is not kept)
    assert not stored.exists() or rows(tmp_path, "SELECT count(*) FROM sources") == [(0,)]
