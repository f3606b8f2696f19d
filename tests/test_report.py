"""The incident report: opened in a real browser, hostile strings kept inert, the same totals as
``audit --json``, byte-identical when rendered twice, small with many incidents."""

from __future__ import annotations

import json
import os
import re
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.engine.store import open_store
from analyzer.model.formatting import mask_keys
from analyzer.report import charts
from analyzer.report.build import build_report
from analyzer.report.pages import md_escape, render, write_report
from tests.helpers import SAMPLE_DATA, or_row, write_csv

CHROMIUM = "/usr/bin/chromium"
HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "{{7*7}}"]
KEY = "sk-or-v1-0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("report")
    runner = CliRunner()
    db = out / "store.duckdb"
    html = out / "report.html"
    result = runner.invoke(
        cli, ["audit", str(SAMPLE_DATA), "--db", str(db), "-o", str(html), "--json"]
    )
    assert result.exit_code == 0, result.output
    return {"dir": out, "db": db, "html": html, "audit": json.loads(result.stdout)}


def chromium_or_skip() -> str:
    if not (os.path.exists(CHROMIUM) and shutil.which("chromium")):
        if os.environ.get("CI"):
            pytest.fail("CI must provide Debian's chromium (.ci/run installs it)")
        pytest.skip("Debian's chromium is not installed")
    return CHROMIUM


# a real browser: CI runs it; the default run checks the page's content
@pytest.mark.slow
def test_the_page_in_a_real_browser(sample_report: dict[str, Any]) -> None:
    from playwright.sync_api import sync_playwright

    exe = chromium_or_skip()
    html: Path = sample_report["html"]
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=exe,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on(
            "console",
            lambda m: (
                errors.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None
            ),
        )
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(html.as_uri())
        page.wait_for_load_state("load")
        charts_seen = page.locator(".chart svg")
        n = charts_seen.count()
        sizes = [charts_seen.nth(i).bounding_box() for i in range(n)]
        headline = page.locator("#total-usd").inner_text()
        page.screenshot(path=str(sample_report["dir"] / "report.png"), full_page=True)
        browser.close()
    assert errors == []
    assert requests == [html.as_uri()]  # the page itself, and nothing else
    assert n >= 3
    assert all(b is not None and b["width"] > 50 and b["height"] > 50 for b in sizes)
    assert headline == f"${sample_report['audit']['total_usd']:,.2f}"
    assert (sample_report["dir"] / "report.png").stat().st_size > 10_000


def test_the_page_shows_the_audit_totals(sample_report: dict[str, Any]) -> None:
    page = sample_report["html"].read_text(encoding="utf-8")
    data = sample_report["audit"]

    def card(name: str) -> str:
        m = re.search(rf'id="{name}">([^<]*)<', page)
        assert m, name
        return m.group(1)

    assert card("total-usd") == f"${data['total_usd']:,.2f}"
    assert card("wasted-usd") == f"${data['wasted_usd']:,.2f}"
    assert card("incident-count") == str(len(data["incidents"]))
    # Every incident is in the table, and each of the top ones has its section and chart.
    for inc in data["incidents"]:
        assert f'id="incident-{inc["number"]}"' in page  # the incident's own number: its id
        assert f"${inc['wasted_usd']:,.2f}" in page
    assert page.count('<section class="incident"') == len(data["incidents"])
    # The backtest's results: a row per guard, as `audit --json` has them.
    guards = page[page.index('id="guards"') : page.index('id="inputs"')]
    for b in data["backtest"]:
        assert f">{b['policy']}<" in guards


def test_without_a_backtest_the_guards_section_is_absent(sample_report: dict[str, Any]) -> None:
    with open_store(sample_report["db"]) as store:
        page = render(build_report(store, charts_on=False), "html")
    assert 'id="guards"' not in page and "Guards" not in page


def test_report_command_formats_agree(sample_report: dict[str, Any]) -> None:
    runner = CliRunner()
    out: Path = sample_report["dir"]
    for name in ("r.md", "r.json"):
        result = runner.invoke(
            cli, ["report", "--db", str(sample_report["db"]), "-o", str(out / name)]
        )
        assert result.exit_code == 0, result.output
    data = json.loads((out / "r.json").read_text())
    assert data["headline"]["total_usd"] == sample_report["audit"]["total_usd"]
    assert data["headline"]["wasted_usd"] == sample_report["audit"]["wasted_usd"]
    assert [i["incident_id"] for i in data["incidents"]] == [
        i["incident_id"] for i in sample_report["audit"]["incidents"]
    ]
    md = (out / "r.md").read_text()
    assert md.startswith("# LLM spend and runaway-loop incident report")
    assert f"${sample_report['audit']['total_usd']:,.2f}" in md
    assert "Same context re-sent, near-empty answers (constant_input_low_output)" in md


def test_rendering_twice_is_byte_identical(sample_report: dict[str, Any], tmp_path: Path) -> None:
    from analyzer.guards.backtest import guard_run
    from analyzer.guards.policy import all_policies

    with open_store(sample_report["db"]) as store:
        guards = guard_run(store, all_policies())
        for fmt in ("html", "md", "json"):
            a = write_report(store, tmp_path / f"a.{fmt}", fmt, guards=guards).read_bytes()
            b = write_report(store, tmp_path / f"b.{fmt}", fmt, guards=guards).read_bytes()
            assert a == b, fmt
    assert (tmp_path / "a.html").read_bytes() == sample_report["html"].read_bytes()


def hostile_store(tmp_path: Path) -> Path:
    """A bill whose app, model and user are hostile, with a planted constant-input run, and a
    saved conversation whose text carries hostile markup and an API key."""
    rows = [or_row(0, tokens_prompt="50000", tokens_completion="500")]
    rows += [
        or_row(
            i,
            tokens_prompt="56065",
            tokens_completion="3",
            cost_total="0.28",
            app_name=HOSTILE[0],
            model_permaslug=HOSTILE[1],
            user=HOSTILE[2],
        )
        for i in range(1, 6)
    ]
    csv = write_csv(tmp_path / "bill.csv", rows)
    conv = tmp_path / "conv.json"
    conv.write_text(
        json.dumps(
            {
                "id": f"sess {HOSTILE[1]}",
                "messages": [
                    {"role": "user", "content": f"{HOSTILE[0]} my key is {KEY}"},
                    {"role": "assistant", "content": ""},
                ],
            }
        )
    )
    broken = tmp_path / "broken.csv"
    write_csv(broken, [or_row(50, tokens_prompt=f"{HOSTILE[0]} {KEY}")])
    db = tmp_path / "h.duckdb"
    result = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(csv), str(conv), str(broken)])
    # broken.csv's one row is rejected: read, nothing of it loaded (exit 4; its reject is kept).
    assert result.exit_code == 4, result.output
    assert CliRunner().invoke(cli, ["detect", "--db", str(db)]).exit_code == 0
    return db


def test_hostile_strings_are_inert_everywhere(tmp_path: Path) -> None:
    db = hostile_store(tmp_path)
    with open_store(db) as store:
        report = build_report(store)
        html = render(report, "html")
        md = render(report, "md")
        js = render(report, "json")
    assert report.incidents  # the hostile stream's run was found and is shown
    # HTML: no live markup from the data, in text or attributes; no template evaluation.
    assert "<script" not in html and "<img" not in html
    assert re.search(r"<[^>]*onerror", html) is None  # no handler inside any tag
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in html
    assert "{{7*7}}" in html and "49" not in re.findall(r"\b49\b", html.split("<style>")[0])
    # SVG labels (the waste-by-model chart names the hostile model) are escaped text.
    svg = report.charts["by_model"]
    assert "&lt;img src=x onerror=alert(2)&gt;" in svg and "<img" not in svg
    # Markdown: every punctuation of untrusted text is escaped, so no raw HTML passes: the
    # template itself writes no "<", and every "<" from the data is backslash-escaped.
    assert re.search(r"(?<!\\)<", md) is None
    assert "\\<script\\>alert\\(1\\)\\</script\\>" in md
    assert "\\{\\{7\\*7\\}\\}" in md
    # API keys are masked in every output, excerpts and rejects included.
    for text in (html, md, js):
        assert KEY not in text
    assert "sk-or-…[masked]" in html


def test_charts_escape_labels_and_refuse_active_content() -> None:
    svg = charts.waste_by(["<script>alert(1)</script>", "$x$ & co"], [1.0, 2.0], "t")
    assert "<script" not in svg and "&lt;script&gt;" in svg
    assert "$x$ &amp; co" in svg  # a dollar is a dollar: no maths parsing


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("key sk-or-v1-abcdef0123456789", "key sk-or-…[masked]"),
        ("sk-ant-api03-AbCdEf012345_-x", "sk-ant-…[masked]"),
        ("OPENAI_API_KEY=sk-proj-abc123def456", "OPENAI_API_KEY=sk-proj-…[masked]"),
        ("sk-1234567890abcdef", "sk-…[masked]"),
        ("task-sk-nothing", "task-sk-nothing"),  # not a key: too short, and inside a word
    ],
)
def test_mask_keys(text: str, masked: str) -> None:
    assert mask_keys(text) == masked


def test_md_escape() -> None:
    assert md_escape("<b>*x*</b> [a](http://e.x)") == (
        "\\<b\\>\\*x\\*\\</b\\> \\[a\\]\\(http\\:/\\/e\\.x\\)"
    ).replace("\\/", "/")
    assert md_escape("line\nbreak") == "line break"


def test_ten_thousand_incidents_stay_under_ten_megabytes(tmp_path: Path) -> None:
    with open_store(tmp_path / "many.duckdb") as store:
        store.con.execute(
            """INSERT INTO incidents (incident_id, detector, severity, stream_key, session_id,
                                      start_ts, end_ts, n_calls, first_call_id, last_call_id,
                                      wasted_usd, wasted_tokens, cost_basis, summary, evidence,
                                      app, api_key, model, project)
               SELECT 'x:' || i, 'constant_input_low_output', 'high', 'key|app|user|model',
                      'session-' || i, TIMESTAMP '2025-12-13 06:00:00' + INTERVAL (i) SECOND,
                      TIMESTAMP '2025-12-13 06:01:00' + INTERVAL (i) SECOND, 22,
                      'or:gen-first-' || i, 'or:gen-last-' || i, (i % 997) / 100.0, 1000,
                      'billed', '22 calls re-sent the same 56,065-token prompt',
                      '{"calls": 22}', 'App A', 'key-a', 'model-a', NULL
               FROM range(10000) t(i)"""
        )
        out = write_report(store, tmp_path / "many.html")
    size = out.stat().st_size
    assert size < 10 * 1024 * 1024, size
    text = out.read_text()
    assert len(re.findall(r"<tr[ >]", text)) >= 10_000
    assert text.count('<section class="incident"') == 20


def test_report_needs_a_store(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", "--db", str(tmp_path / "none.duckdb")])
    assert result.exit_code == 3


def test_audit_decimal_totals_match_the_report_json(sample_report: dict[str, Any]) -> None:
    with open_store(sample_report["db"]) as store:
        data = build_report(store, charts_on=False).to_json()
    assert Decimal(str(data["headline"]["total_usd"])) == Decimal(
        str(sample_report["audit"]["total_usd"])
    )
