"""What a hostile log or file name can make this tool print (issue 33, "Hostile content reaching
the user", in part): CSV cells a spreadsheet would run as formulas, and escape sequences or line
breaks reaching the terminal through file names and names from logs."""

from __future__ import annotations

import csv
import io
import json
import sys
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.console import csv_out
from analyzer.engine.store import open_store
from tests.helpers import or_row, write_csv

FORMULA = "=2+5+cmd|' /C calc'!A0"
# A file name that sets the window title and clears the screen, then breaks the line.
HOSTILE_NAME = "bill\x1b]0;pwned\x07\x1b[2J\nsecond line.csv"


def bill(tmp_path: Path) -> Path:
    """An OpenRouter export whose app name (the caller's own request header) is a formula,
    and a negative-looking model name that is not a number."""
    rows = [or_row(i, app_name=FORMULA) for i in range(3)]
    rows += [or_row(3, app_name="@SUM(A1:A9)", model_permaslug="-evil/model")]
    return write_csv(tmp_path / "activity.csv", rows)


def cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_usage_csv_cells_are_never_formulas(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    run = CliRunner()
    assert run.invoke(cli, ["ingest", "--db", str(db), str(bill(tmp_path))]).exit_code == 0
    project = cells(run.invoke(cli, ["usage", "project", "--db", str(db), "--csv"]).stdout)
    keys = [row[0] for row in project[1:]]
    assert "'" + FORMULA in keys and "'@SUM(A1:A9)" in keys and FORMULA not in keys
    model = cells(run.invoke(cli, ["usage", "model", "--db", str(db), "--csv"]).stdout)
    assert "'-evil/model" in [row[0] for row in model[1:]]
    # numbers stay numbers, a negative one too (the header names them; the values parse)
    for row in project[1:]:
        assert float(row[project[0].index("calls")]) > 0


def test_the_incident_csv_neutralises_names_from_logs(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with open_store(db) as store:
        store.con.execute(
            """INSERT INTO incidents (incident_id, detector, severity, wasted_usd, n_calls,
                                      summary, app, api_key, model, project)
               VALUES ('x:1', 'constant_input_low_output', 'high', 1.5, 3, '+1 summary',
                       ?, '-key', 'm', '@p')""",
            [FORMULA],
        )
    out = tmp_path / "incidents.csv"
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "-o", str(out)])
    assert result.exit_code == 0, result.output
    [head, row] = cells(out.read_text(encoding="utf-8"))
    got = dict(zip(head, row, strict=True))
    assert got["app"] == "'" + FORMULA and got["api_key"] == "'-key"
    assert got["project"] == "'@p" and got["summary"] == "'+1 summary"
    assert got["wasted_usd"] == "1.5"  # an amount is left as it is


def terminal_text(text: str) -> bool:
    """Nothing a terminal would act on: no control character but the line ends."""
    return not any(not ch.isprintable() and ch != "\n" for ch in text)


def test_a_hostile_file_name_is_one_plain_line_in_every_message(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    hostile = folder / HOSTILE_NAME
    hostile.write_text("model,foo\nx,1\n", encoding="utf-8")  # data no reader recognises
    write_csv(folder / "activity.csv", [or_row(i) for i in range(3)])
    run = CliRunner()
    db = str(tmp_path / "s.duckdb")
    for args in (
        ["ingest", "--db", db, str(folder)],
        ["ingest", "-v", "--db", db, str(folder)],
        ["ingest", "--db", db, str(hostile)],
    ):
        result = run.invoke(cli, args)
        assert result.exit_code in (0, 3, 4), result.output
        assert terminal_text(result.stderr) and terminal_text(result.stdout), args
        # the name stays on the line that names it
        said = (result.stdout + result.stderr).splitlines()
        named = [line for line in said if "second line.csv" in line]
        assert named and all("bill?]0;pwned" in line for line in named), said


def test_csv_on_a_terminal_is_made_safe_and_left_whole_in_a_pipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    text = 'model,calls\n"evil\x1b]0;t\x07",1\n'
    tty = Terminal()
    monkeypatch.setattr(sys, "stdout", tty)
    csv_out(text)
    assert tty.getvalue() == 'model,calls\n"evil?]0;t?",1\n'
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stdout", pipe)
    csv_out(text)
    assert pipe.getvalue() == text


# A model, app and API key name as a hostile bill can carry them (OpenRouter takes the app name
# from the caller's own request header): a right-to-left override that shows "claude?exe.png"
# reversed, NUL, ESC sequences, a tab, and a 20,000-character key name.
HOSTILE_MODEL = "anthropic/claude\u202egnp.exe\x00\x1b[31m\tx"
HOSTILE_APP = "App\u202eevil\x1b]0;t\x07"
LONG_KEY = "k" * 20_000
RAW = ("\u202e", "\x00", "\x1b", "\x07")


def looping_bill(tmp_path: Path) -> Path:
    """22 calls that re-send the same 56,065-token prompt for 3 tokens back: one incident."""
    rows = [
        or_row(
            i,
            tokens_prompt="56065",
            tokens_completion="3",
            cost_total="0.17",
            model_permaslug=HOSTILE_MODEL,
            api_key_name=LONG_KEY,
            app_name=HOSTILE_APP,
        )
        for i in range(22)
    ]
    return write_csv(tmp_path / "activity.csv", rows)


def test_pages_and_csv_carry_no_control_or_bidi_override_character(tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    run = CliRunner()
    page = tmp_path / "r.html"
    result = run.invoke(cli, ["audit", "--db", db, str(looping_bill(tmp_path)), "-o", str(page)])
    assert result.exit_code == 0, result.output
    for name in ("r.md", "r.csv"):
        made = run.invoke(cli, ["report", "--db", db, "-o", str(tmp_path / name)])
        assert made.exit_code == 0, made.output
    for name in ("r.html", "r.md", "r.csv"):
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert not [c for c in RAW if c in text], name
        # the names are there, each hidden character shown as U+FFFD
        assert "claude\ufffdgnp.exe\ufffd\ufffd[31m" in text.replace("\\", ""), name
        assert "App\ufffdevil\ufffd]0;t\ufffd" in text.replace("\\", ""), name


def test_a_long_api_key_name_keeps_an_incident_on_its_lines(tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    run = CliRunner()
    audit = run.invoke(cli, ["audit", "--db", db, str(looping_bill(tmp_path))])
    assert audit.exit_code == 0, audit.output
    listed = run.invoke(cli, ["incidents", "--db", db])
    assert listed.exit_code == 0, listed.output
    # the heading, the incident's line and two of its summary (one of them its place)
    assert len(listed.stdout.splitlines()) == 4, listed.stdout[:2000]
    for text in (audit.stdout, listed.stdout):  # 120 columns when not on a terminal
        assert max(len(line) for line in text.splitlines()) <= 120
    assert "k" * 60 not in listed.stdout and "k" * 59 + "…" in listed.stdout


def test_chart_labels_from_logs_raise_no_font_warning() -> None:
    """A tab, NUL or ESC in a model name, and a script the font lacks, used to print
    matplotlib's ``UserWarning: Glyph … missing from font`` (with the installed path) on
    stderr."""
    from analyzer.report import charts

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        svg = charts.waste_by([HOSTILE_MODEL, "模型/测试", LONG_KEY], [1.5, 2, 0.5], "by model")
    assert not [w for w in said if "Glyph" in str(w.message)], [str(w.message) for w in said]
    assert not [c for c in RAW if c in svg]
    assert "k" * 60 not in svg


# Names as a hostile log or bill can carry them (issue 45, cause 7): a carriage return that
# ends the row where a spreadsheet reads a bare CR as a line end, then a formula; formulas after
# a space, a line break and a control character.
CR_FORMULA = "ok\r=cmd|' /C calc'!A0"
BREAKING = (CR_FORMULA, ' =HYPERLINK("http://x")', "a\n@SUM(1+1)", "\x00+1+cmd")
BILLS = Path(__file__).parent / "fixtures" / "anthropic_usage"


def spreadsheet_rows(text: str) -> list[list[str]]:
    """The rows a spreadsheet that ends a row at any bare line end (CR, LF or CRLF) reads."""
    return list(csv.reader(text.splitlines(keepends=True)))


def formula_cells(rows: list[list[str]]) -> list[str]:
    """Cells a spreadsheet would run: a formula's sign first, or after what it passes over."""
    signs = ("=", "+", "-", "@")
    found = []
    for row in rows:
        for c in row:
            start = c.lstrip(" \t\r\n\ufffd")
            try:
                float(start)
                continue  # a number
            except ValueError:
                pass
            if start.startswith(signs) and not c.startswith("'"):
                found.append(c)
    return found


def hostile_inputs(tmp_path: Path) -> Path:
    """A bill, a Claude Code project and a provider's usage report carrying ``BREAKING``
    names: app, key, model, project folder, bucket model."""
    folder = tmp_path / "in"
    folder.mkdir()
    rows = [
        or_row(i, app_name=BREAKING[i % 4], api_key_name=BREAKING[(i + 1) % 4]) for i in range(8)
    ]
    rows[0]["model_permaslug"] = "anthropic/" + CR_FORMULA
    write_csv(folder / "activity.csv", rows)
    [transcript] = (BILLS / "claude-projects").rglob("*.jsonl")
    project = folder / "claude" / "projects" / CR_FORMULA
    project.mkdir(parents=True)
    (project / transcript.name).write_bytes(transcript.read_bytes())
    page = json.loads((BILLS / "usage_report_messages.json").read_text(encoding="utf-8"))
    page["data"][0]["results"][0]["model"] = CR_FORMULA
    (folder / "usage.json").write_text(json.dumps(page), encoding="utf-8")
    return folder


def test_every_csv_output_quotes_line_breaks_and_neutralises_formulas(tmp_path: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    run = CliRunner()
    ingested = run.invoke(cli, ["ingest", "--db", db, str(hostile_inputs(tmp_path))])
    assert ingested.exit_code == 0, ingested.output
    with open_store(db) as store:  # an incident named by the same names
        store.con.execute(
            """INSERT INTO incidents (incident_id, detector, severity, wasted_usd, n_calls,
                                      summary, app, api_key, model, project)
               VALUES ('x:1', 'constant_input_low_output', 'high', 1.5, 3, ?, ?, ?, ?, ?)""",
            [BREAKING[1], *BREAKING[:3], CR_FORMULA],
        )
    outputs = {}
    views = ("daily", "weekly", "monthly", "session", "project", "model")
    for view in views:
        for more in ([], ["--breakdown"]):
            made = run.invoke(cli, ["usage", view, "--db", db, "--csv", *more])
            assert made.exit_code == 0, made.output
            outputs[f"usage {view} {more}"] = made.stdout
    for view in ("bills", "reconcile"):
        made = run.invoke(cli, ["usage", view, "--db", db, "--csv"])
        assert made.exit_code == 0, made.output
        outputs[f"usage {view}"] = made.stdout
    made = run.invoke(cli, ["report", "--db", db, "-o", str(tmp_path / "incidents.csv")])
    assert made.exit_code == 0, made.output
    outputs["incidents"] = (tmp_path / "incidents.csv").read_text(encoding="utf-8")

    for what, text in outputs.items():
        rows = spreadsheet_rows(text)
        assert rows and all(len(r) == len(rows[0]) for r in rows), what  # no row broken
        assert not formula_cells(rows), (what, formula_cells(rows))
        # the names are there, neutralised (a view by date names none without --breakdown)
        dated = what.startswith(("usage daily [", "usage weekly [", "usage monthly ["))
        assert dated or "=cmd|' /C calc'!A0" in text, what
