"""The report page as a person sees it, in a real browser (Playwright driving Debian's chromium):
the sample report and a report with no incident, at a phone's width, a laptop's and a wide
screen's; and printed to PDF on A4.

Screenshots of every width are written to ``build/screenshots/`` (``LLM_FORENSICS_SCREENSHOTS``
to put them elsewhere), to look at: a test can say the page does not overflow, not that it looks
right. The report of a home of real Claude Code logs (``ccusage_side.real_world_home``) is shot
at a phone's width and a wide screen's, into the test's folder too.
"""

from __future__ import annotations

import io
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from tests.ccusage_side import real_world_home
from tests.helpers import REPO, SAMPLE_DATA, env_of, shared_samples
from tests.test_report import chromium_or_skip

# the page in a real browser at every width: CI runs it; the default run checks the page's content
# (test_report)
pytestmark = pytest.mark.slow

WIDTHS = (360, 800, 1400)
ISO = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d)?Z?"


def screenshots() -> Path:
    folder = Path(
        os.environ.get("LLM_FORENSICS_SCREENSHOTS")
        or os.environ.get("LF_SCREENSHOTS")
        or REPO / "build" / "screenshots"
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def healthy_paths() -> list[str]:
    """Real sessions recorded by other people, where no detector fires: Claude Code (a project
    with sub-agents, and four sessions of another) and two Codex rollouts."""
    real = shared_samples() / "real-world"
    spotter = real / "claude_code/marot__spotter/-home-marco-projects-spotter-worktrees-spotter-fum"
    agentcmd = sorted((real / "claude_code/jnarowski__agentcmd").glob("full-session*.jsonl"))
    codex = sorted((real / "codex/jnarowski__agentcmd").glob("rollout-2025-09-25*.jsonl"))
    return [str(spotter), *map(str, agentcmd), *map(str, codex)]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("pages")
    made = {}
    for name, paths in (("sample", [str(SAMPLE_DATA)]), ("quiet", healthy_paths())):
        html = out / f"{name}.html"
        result = CliRunner().invoke(cli, ["audit", *paths, "-q", "-o", str(html)])
        assert result.exit_code == 0, result.output
        made[name] = html
    return made


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    exe = chromium_or_skip()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


# What the page looks like to the test, measured in the browser.
MEASURE = """() => {
  const doc = document.documentElement;
  const charts = [...document.querySelectorAll('.chart svg')].map(svg => {
    const marks = [...svg.querySelectorAll('[id^="mark-"]')].filter(m => {
      const r = m.getBoundingClientRect();
      return r.width > 0 || r.height > 0;
    });
    // A text's size as drawn: its font size in the chart's units times the chart's scale.
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    const texts = [...svg.querySelectorAll('text')]
      .map(t => parseFloat(getComputedStyle(t).fontSize) * scale);
    return {label: svg.parentElement.getAttribute('aria-label'), marks: marks.length,
            smallest_text: texts.length ? Math.min(...texts) : null};
  });
  // Every timestamp in the page's text, and on how many lines it is drawn.
  const broken = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const iso = new RegExp(ISO, 'g');
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const m of node.data.matchAll(iso)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
  }
  const zeroCosts = [...document.querySelectorAll('td.cost[data-usd]')]
    .filter(td => parseFloat(td.dataset.usd) > 0 && /^\\$0\\.0*$/.test(td.innerText.trim()))
    .map(td => td.dataset.usd);
  return {scrollWidth: doc.scrollWidth, innerWidth: window.innerWidth, charts, broken,
          zeroCosts, costCells: document.querySelectorAll('td.cost[data-usd]').length};
}""".replace("ISO", repr(ISO))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["sample", "quiet"])
def test_the_page_at_every_width(
    pages: dict[str, Path], browser: Any, name: str, width: int
) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(pages[name].as_uri())
    seen = page.evaluate(MEASURE)
    page.screenshot(path=str(screenshots() / f"{name}-{width}.png"), full_page=True)
    page.close()
    assert seen["scrollWidth"] <= seen["innerWidth"], f"the page is wider than {width} px"
    assert seen["charts"], "no chart drawn"
    for chart in seen["charts"]:
        assert chart["marks"] > 0, f"{chart['label']}: an empty chart"
        if width >= 800:  # at its natural size (a phone scrolls a chart rather than shrink it)
            assert chart["smallest_text"] >= 11, f"{chart['label']}: text under 11 px"
    assert seen["broken"] == [], "timestamps broken across lines"
    assert seen["zeroCosts"] == []
    if name == "sample":
        assert seen["costCells"] > 50


def test_the_sample_page_shows_incidents_and_the_quiet_page_says_all_clear(
    pages: dict[str, Path], browser: Any
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(pages["sample"].as_uri())
    # Every listed incident with a section links to it, and the section links back.
    links = page.eval_on_selector_all(
        "table.list a[href^='#incident-']", "as => as.map(a => a.hash)"
    )
    assert len(links) >= 10
    for anchor in links:
        assert page.locator(f"section{anchor} a[href^='#row-']").count() == 1
    assert (
        page.locator("#incident-4 h3")
        .inner_text()
        .startswith("#4 high Same context re-sent, near-empty answers constant_input_low_output")
    )
    assert "prompt tokens\n56,065" in page.locator("#incident-4 dl.evidence").inner_text()
    assert page.locator(".card.waste").count() == 1
    page.goto(pages["quiet"].as_uri())
    assert page.locator("#no-incidents").count() == 1
    assert "checked by" in page.locator("#no-incidents").inner_text()
    assert page.locator(".card.waste").count() == 0 and page.locator(".card.calm").count() == 1
    assert page.locator("table.guards").count() == 0  # a sentence, not a table of zeros
    assert "nothing was wasted" in page.locator("#guards-summary").inner_text()
    assert page.locator("table:not(:has(tbody tr))").count() == 0  # no header-only table
    page.close()


def pdf_pages(pdf: bytes) -> list[str]:
    from pypdf import PdfReader

    return [p.extract_text() or "" for p in PdfReader(io.BytesIO(pdf)).pages]


# Marks the start and end of every cell of every table row with a token naming the row, so
# the printed PDF's text tells on which page each part of a row landed.
TAG_ROWS = """() => {
  let n = 0;
  for (const tr of document.querySelectorAll('tbody tr')) {
    n += 1;
    for (const td of tr.cells) {
      td.insertAdjacentHTML('afterbegin', `<span>QX${n}Q </span>`);
      td.insertAdjacentHTML('beforeend', `<span> QX${n}Q</span>`);
    }
  }
  return n;
}"""


@pytest.mark.parametrize("name", ["sample", "quiet"])
def test_printed_to_pdf_no_row_is_split(pages: dict[str, Path], browser: Any, name: str) -> None:
    page = browser.new_page()
    page.goto(pages[name].as_uri())
    rows = page.evaluate(TAG_ROWS)
    pdf = page.pdf(format="A4", print_background=True)
    page.close()
    (screenshots() / f"{name}.pdf").write_bytes(pdf)
    texts = pdf_pages(pdf)
    sections = pages[name].read_text(encoding="utf-8").count('<section class="incident"')
    # A page per incident section at least (each starts a page), and not a page per row.
    assert sections + 1 <= len(texts) <= sections * 4 + 8, len(texts)
    where: dict[str, set[int]] = {}
    for number, text in enumerate(texts):
        for tag in re.findall(r"QX(\d+)Q", text):
            where.setdefault(tag, set()).add(number)
    assert len(where) == rows, "a row's text is missing from the PDF"
    split = {tag: sorted(p) for tag, p in where.items() if len(p) > 1}
    assert split == {}, f"rows split across pages: {split}"


# Every element that reaches past the window's right edge (or starts left of it).
WIDER = """() => {
  const w = window.innerWidth;
  return [...document.querySelectorAll('body *')]
    .filter(e => {
      const r = e.getBoundingClientRect();
      return r.right > w + 0.5 || r.left < -0.5;
    })
    .map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : ''))
    .slice(0, 10);
}"""


@pytest.fixture(scope="module")
def real_home_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of a home of real Claude Code and Codex logs (more sessions than the page
    lists), as its user gets it: ``audit`` with the home's default places (``HOME`` and
    ``XDG_DATA_HOME`` set to the fake home)."""
    out = tmp_path_factory.mktemp("real-home")
    home = real_world_home(out)
    shutil.copytree(shared_samples() / "real-world" / "codex", home / ".codex" / "sessions")
    html = out / "report.html"
    env = env_of(home, XDG_DATA_HOME=str(out / "data"), LLM_FORENSICS_DB=None)
    result = CliRunner().invoke(cli, ["audit", "-q", "-o", str(html)], env=env)
    assert result.exit_code == 0, result.output
    return html


@pytest.mark.parametrize("width", (390, 1400))
def test_the_real_home_page_at_a_phone_and_a_wide_screen(
    real_home_page: Path, browser: Any, width: int
) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(real_home_page.as_uri())
    seen = page.evaluate(MEASURE)
    wider = page.evaluate(WIDER)
    tables = {
        name: page.locator(f"#spend-{name}").is_visible()
        and page.locator(f"#spend-{name} tbody tr").first.is_visible()
        for name in ("projects", "sessions")
    }
    rows = page.locator("#spend-sessions tbody tr").count()
    shot = real_home_page.parent / f"real-home-{width}.png"
    page.screenshot(path=str(shot), full_page=True)
    page.close()
    (screenshots() / shot.name).write_bytes(shot.read_bytes())
    assert seen["scrollWidth"] <= seen["innerWidth"], f"the page is wider than {width} px"
    assert wider == [], f"wider than the window at {width} px: {wider}"
    assert tables == {"projects": True, "sessions": True}
    assert rows == 16  # the top 15 sessions and the rest in one line
    assert seen["broken"] == [], "timestamps broken across lines"
    assert shot.stat().st_size > 10_000
