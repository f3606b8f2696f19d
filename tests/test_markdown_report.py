"""The Markdown report as GitHub or a ticket shows it, read back with markdown-it-py (CommonMark
with GFM tables): no backslash before a letter or digit, every table parses and has rows, no
whole number written as ``3.0``, and text from the logs stays literal text wherever it lands."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from analyzer.report.build import build_report
from analyzer.report.pages import md_escape, render
from tests.helpers import SAMPLE_DATA, or_row, shared_samples, write_csv
from tests.test_report import HOSTILE, hostile_store

HEALTHY = "real-world/claude_code/DRMacIver__claude-reliability/hello-world-script.jsonl"
DELIMITER = re.compile(r"\|(?:\s*:?-+:?\s*\|)+")
# Our own markup: headings, paragraphs, lists, tables. Untrusted text adds none, and no inline
# markup at all (the template writes no emphasis, code, link or HTML of its own).
OWN_BLOCKS = {
    "heading",
    "paragraph",
    "bullet_list",
    "list_item",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}
OWN_HEADINGS = re.compile(
    r"LLM spend and runaway-loop incident report|Spend by project|Spend by session|"
    r"Where the waste went|Provider bills per bucket|"
    r"Incidents, most wasted first|Guards|Inputs|"
    r"#\d+ [^|]+ \((info|low|medium|high)\): -?\$[\d,.]+ wasted"
)
HOSTILE_NAME = "# [x](javascript:alert(1)) | `code` ![img](x) *b* _i_ &amp; 1. a.csv"
HOSTILE_SUMMARIES = [
    "# heading | a | b | [x](javascript:alert(1)) ![img](http://x) `code` *em* _em_ ~~s~~ "
    "&amp; &#60;b> {{7*7}} back\\*slash",
    "- item\nsecond line | <script>alert(1)</script> [y](javascript:alert(2))",
    "1. first > quoted\r\n> | --- |",
]


def markdown() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def audit_md(paths: list[str], out: Path) -> str:
    result = CliRunner().invoke(
        cli, ["audit", *paths, "--db", str(out / "store.duckdb"), "-o", str(out / "r.md")]
    )
    assert result.exit_code == 0, result.output
    return (out / "r.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def sample_md(tmp_path_factory: pytest.TempPathFactory) -> str:
    return audit_md([str(SAMPLE_DATA)], tmp_path_factory.mktemp("sample-md"))


@pytest.fixture(scope="module")
def healthy_md(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One healthy real Claude Code session: no incident."""
    return audit_md([str(shared_samples() / HEALTHY)], tmp_path_factory.mktemp("healthy-md"))


@pytest.fixture(scope="module")
def hostile_md(tmp_path_factory: pytest.TempPathFactory) -> str:
    """test_report's hostile bill, conversation and rejects; a bill whose file name is hostile;
    and incidents whose summaries and evidence are."""
    tmp = tmp_path_factory.mktemp("hostile-md")
    db = hostile_store(tmp)
    named = write_csv(tmp / HOSTILE_NAME, [or_row(100 + i) for i in range(3)])
    result = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(named)])
    assert result.exit_code == 0, result.output
    with open_store(db) as store:
        for n, summary in enumerate(HOSTILE_SUMMARIES):
            store.con.execute(
                """INSERT INTO incidents (incident_id, detector, severity, stream_key, session_id,
                       start_ts, end_ts, n_calls, first_call_id, last_call_id, wasted_usd,
                       cost_basis, summary, evidence)
                   VALUES (?, 'constant_input_low_output', 'high', ?, ?,
                           TIMESTAMP '2025-12-13 07:00:00', TIMESTAMP '2025-12-13 07:01:00', 3,
                           'none-1', 'none-2', ?, 'billed', ?, ?)""",
                [
                    f"hostile:{n}",
                    f"k|{HOSTILE[0]}",
                    f"[s](javascript:alert({n}))",
                    100 + n,
                    summary,
                    json.dumps({f"k|{HOSTILE[1]}": summary, "n": 3.0}),
                ],
            )
        return render(build_report(store, charts_on=False), "md")


# -- reading the Markdown back --------------------------------------------------------------


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    parser.close()
    return "".join(parser.parts)


def cells(line: str) -> list[str]:
    """A table line's cells, split at the pipes no backslash escapes (as GFM splits them)."""
    out, cell, escaped = [], "", False
    for ch in line.strip():
        if ch == "|" and not escaped:
            out.append(cell)
            cell = ""
        else:
            cell += ch
        escaped = ch == "\\" and not escaped
    out.append(cell)
    return out[1:-1]  # the line's outer pipes (the report writes both)


def table_blocks(md: str) -> list[list[str]]:
    """Each pipe table in the source: its header line, delimiter line and body lines."""
    lines = md.splitlines()
    blocks = []
    for n, line in enumerate(lines[:-1]):
        if line.startswith("|") and DELIMITER.fullmatch(lines[n + 1]):
            block = [line, lines[n + 1]]
            for body in lines[n + 2 :]:
                if not body.startswith("|"):
                    break
                block.append(body)
            blocks.append(block)
    return blocks


def inline_text(token: Token) -> str:
    return "".join(c.content if c.type == "text" else " " for c in token.children or [])


def following(tokens: list[Token], kind: str) -> list[str]:
    """The text of the inline token after each ``kind`` token (a heading's, a paragraph's)."""
    return [inline_text(tokens[n + 1]) for n, t in enumerate(tokens) if t.type == kind]


def parsed_tables(tokens: list[Token]) -> list[dict[str, Any]]:
    """Each table markdown-it found: its header cells and its body rows' cell texts."""
    tables: list[dict[str, Any]] = []
    body = False
    for n, t in enumerate(tokens):
        if t.type == "table_open":
            tables.append({"head": [], "rows": []})
        elif t.type in ("tbody_open", "tbody_close"):
            body = t.type == "tbody_open"
        elif t.type == "tr_open" and body:
            tables[-1]["rows"].append([])
        elif t.type == "inline" and tokens[n - 1].type == "th_open":
            tables[-1]["head"].append(inline_text(t))
        elif t.type == "inline" and tokens[n - 1].type == "td_open":
            tables[-1]["rows"][-1].append(inline_text(t))
    return tables


def check_well_formed(md: str) -> tuple[list[Token], str]:
    """What holds for every report: (a) no backslash before a letter or digit, in the source
    or the text it renders to; (b) each table in the source parses as one, with rows, and each
    of its lines has as many cells as its header; no markup but our own."""
    assert re.search(r"\\[A-Za-z0-9]", md) is None, re.search(r".{30}\\[A-Za-z0-9].{10}", md)
    tokens = markdown().parse(md)
    html = markdown().render(md)
    text = html_text(html)
    assert re.search(r"\\[A-Za-z0-9]", text) is None
    blocks = table_blocks(md)
    tables = parsed_tables(tokens)
    assert len(tables) == len(blocks) == sum(t.type == "table_open" for t in tokens) > 0
    for block, table in zip(blocks, tables, strict=True):
        assert len(block) > 2 and table["rows"], f"a table without rows: {block[0]}"
        width = len(cells(block[0]))
        assert [len(cells(line)) for line in block] == [width] * len(block), block[0]
        assert len(table["head"]) == width
    for t in tokens:
        kind = t.type.removesuffix("_open").removesuffix("_close")
        assert kind in OWN_BLOCKS | {"inline"}, t.type
        if t.type == "inline":
            kids = t.children or []
            assert {c.type for c in kids} <= {"text", "softbreak", "code_inline"}, t.content
            # The one code span is ours: the command that shows the incident.
            codes = [c.content for c in kids if c.type == "code_inline"]
            assert all(re.fullmatch(r"llm-forensics show \d+", c) for c in codes), codes
    assert all(OWN_HEADINGS.fullmatch(h) for h in following(tokens, "heading_open")), html
    assert sum(t.tag == "h1" for t in tokens if t.type == "heading_open") == 1
    return tokens, html


def no_float_wholes(md: str) -> None:
    """(c) No whole number written as a float (a threshold ``3.0``) in any table cell."""
    for block in table_blocks(md):
        for line in block[2:]:
            for cell in cells(line):
                assert re.search(r"(?<![\d.])\d+\.0\b", cell) is None, line


# -- the reports ----------------------------------------------------------------------------


def test_the_sample_report_reads_well(sample_md: str) -> None:
    tokens, _ = check_well_formed(sample_md)
    no_float_wholes(sample_md)
    # Model names, amounts and summaries as they are: no needless backslash.
    assert "| anthropic/claude-opus-4.5 | 484 |" in sample_md
    assert "back in 69 s ($6.16) |" in sample_md
    assert "(31 days)" in sample_md
    # The guards' thresholds are whole numbers: "3", never "3.0".
    guards = next(b for b in table_blocks(sample_md) if b[0].startswith("| Policy | Stop at |"))
    assert all(re.fullmatch(r"\d+(\.\d+)?", cells(line)[1].strip()) for line in guards[2:])
    assert any(cells(line)[1].strip() == "3" for line in guards[2:])
    # Every incident has its table row and section; each section's evidence table has rows.
    headings = [t for t in tokens if t.type == "heading_open" and t.tag == "h3"]
    assert len(headings) == 10
    assert sample_md.count("| Evidence | Value |") == 10


def test_a_report_without_incidents_has_no_empty_table(healthy_md: str) -> None:
    check_well_formed(healthy_md)
    no_float_wholes(healthy_md)
    assert "No incidents." in healthy_md
    assert "| Detector |" not in healthy_md and "| # | Severity |" not in healthy_md
    assert "| Evidence |" not in healthy_md and "| # | Detector | Stopped by" not in healthy_md
    assert "| claude-opus-4-5-20251101 | 4 |" in healthy_md  # the spend tables have their rows
    assert "| hello-world-script.jsonl | claude_code |" in healthy_md


def test_hostile_text_stays_literal(hostile_md: str) -> None:
    tokens, html = check_well_formed(hostile_md)
    assert "<script" not in html and "<img" not in html and "<a " not in html
    assert '<a href="javascript' not in html and "<em" not in html
    # The only code spans are our own `llm-forensics show N`.
    assert re.findall(r"<code>(.*?)</code>", html) == [
        f"llm-forensics show {n}" for n in re.findall(r"\(`llm-forensics show (\d+)`\)", hostile_md)
    ]
    tables = parsed_tables(tokens)
    tds = {cell for t in tables for row in t["rows"] for cell in row}
    paragraphs = set(following(tokens, "paragraph_open"))
    items = [inline_text(t) for t in tokens if t.type == "inline"]
    for summary in HOSTILE_SUMMARIES:
        literal = re.sub(r"\r\n?|\n", " ", summary)
        assert literal in tds  # one cell, as written: its pipes split nothing
        assert literal in paragraphs  # the section's first line: no heading, list or quote
    assert any(t.endswith(HOSTILE_NAME) for t in tds)  # the hostile file name in Inputs
    assert f"Stream: k|{HOSTILE[0]}" in items and "Session: [s](javascript:alert(0))" in items
    assert HOSTILE[0] in tds and HOSTILE[1] in tds  # the bill's app and model, as text
    # The summary, file name, model and evidence cells sit in tables of unchanged width.
    incidents = next(t for t in tables if t["head"][:2] == ["#", "Severity"])
    assert all(len(row) == 7 for row in incidents["rows"])


# -- md_escape on its own ----------------------------------------------------------------------

BRIEF_HOSTILE = [
    "<script>alert(1)</script>",
    "[x](javascript:alert(1))",
    "| a | b |",
    "`code`",
    "# heading",
    "![img](http://x)",
    "- item",
    "1. item",
    "> quote",
    "---",
    "*em* _em_ **strong** ~~gone~~",
    "&lt;b&gt; &#60;",
    "<http://x>",
    "a\\",
    "\\*",
    "    indented",
    "x\ny",
    "{{7*7}}",
    "[ref]: http://x",
]


def as_paragraph(value: str) -> str:
    return html_text(markdown().render(md_escape(value) + "\n"))


def as_cell(value: str) -> str:
    table = markdown().parse(f"| h | n |\n|---|---|\n| {md_escape(value)} | 1 |\n")
    return str(parsed_tables(table)[0]["rows"][0][0])


def literal(value: str) -> str:
    return re.sub(r"\r\n?|\n", " ", value).strip()


@pytest.mark.parametrize("value", BRIEF_HOSTILE)
def test_md_escape_keeps_markup_literal(value: str) -> None:
    assert as_paragraph(value).strip() == literal(value)
    assert as_cell(value) == literal(value)


@given(st.text(alphabet=st.sampled_from(list("ab1 .-+#>*_~`|[]()<>!&;:/\\{}=\n\t")), max_size=30))
def test_md_escape_keeps_any_text_literal(value: str) -> None:
    assert as_paragraph(value).strip() == literal(value).strip()
    assert as_cell(value) == literal(value)


def test_md_escape_leaves_plain_text_alone() -> None:
    for plain in [
        "anthropic/claude-opus-4.5",
        "22 calls re-sent the same 56,065-token prompt and got 3 tokens back in 69 s ($6.16)",
        "Hello! It's 10:21 (UTC), see docs/a-b.md",
        "-3",
        "2025-12-11_091502",
    ]:
        assert md_escape(plain) == plain  # "_" inside a word opens no emphasis
    assert md_escape(3.0) == "3" and md_escape(2.5) == "2.5" and md_escape(None) == "–"
