"""The report written out: HTML (one self-contained page), Markdown or JSON, from the typed
``Report`` that ``analyzer.report`` builds. Templates live in ``reports/``.

Untrusted text is escaped wherever it lands: Jinja autoescape for HTML text and attributes,
backslash escapes for Markdown (``md_escape``), matplotlib's XML escaping for SVG labels.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from analyzer import cache
from analyzer.backtest import GuardRun
from analyzer.formatting import money
from analyzer.report import DEFAULT_TOP_INCIDENTS, Report, build_report
from analyzer.resources import resource_dir
from analyzer.store import Store
from analyzer.summary import Summary

REPORT_FORMATS = ("html", "md", "json")


def format_for(output: str | Path, fmt: str | None = None) -> str:
    """The report format: as asked, else from the file's extension, else HTML.

    >>> format_for("x.md"), format_for("x.json"), format_for("x.txt"), format_for("x", "md")
    ('md', 'json', 'html', 'md')
    """
    if fmt:
        return fmt
    suffix = Path(output).suffix.lower().lstrip(".")
    return {"md": "md", "markdown": "md", "json": "json"}.get(suffix, "html")


def _num(x: float | int | None) -> str:
    return "–" if x is None else f"{x:,}"


def _pct(x: float) -> str:
    return f"{x:.1%}"


def html_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("reports"))),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters.update(money=money, num=_num, pct=_pct, ts=lambda x: x or "–")
    return env


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&\"'=$:])")


class MdText(str):
    """Text already fit for Markdown (numbers we formatted, our own markup)."""


def md_escape(value: Any) -> str:
    """Every value printed into the Markdown report: untrusted text has every ASCII punctuation
    backslash-escaped (CommonMark renders it literally: no raw HTML, links or emphasis) and
    line breaks flattened; our own formatted values pass."""
    if isinstance(value, MdText):
        return value
    if value is None:
        return "–"
    text = str(value).replace("\r", " ").replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("reports"))),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        finalize=md_escape,
        keep_trailing_newline=True,
    )
    env.filters.update(
        money=lambda x: MdText(money(x)),
        num=lambda x: MdText(_num(x)),
        pct=lambda x: MdText(_pct(x)),
        ts=lambda x: MdText(x or "–"),  # our own ISO times
    )
    return env


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report.to_json(), indent=2, default=str) + "\n"
    if fmt == "md":
        return md_env().get_template("report.md.j2").render(r=report)
    css = (resource_dir("reports") / "report.css").read_text(encoding="utf-8")
    return (
        html_env()
        .get_template("report.html.j2")
        .render(r=report, css=Markup(css), svg=lambda s: Markup(s))
    )


def write_report(
    store: Store, out: Path, fmt: str = "html", top_incidents: int = DEFAULT_TOP_INCIDENTS,
    summary: Summary | None = None, guards: GuardRun | None = None, top: int = 10,
    reuse: bool = False,
) -> Path:  # fmt: skip
    """Write the report to ``out`` (atomically). With ``reuse``, a page kept from an earlier
    run over the same data, incidents, guards and options is written again as it was (the same
    inputs give the same bytes), and a newly built one is kept."""
    text = None
    if reuse:
        if guards is None or guards.key is not None:
            digest = guards.key if guards else None
        else:
            shown = json.dumps(guards.to_json(), sort_keys=True, default=str)
            digest = hashlib.sha256(shown.encode()).hexdigest()
        k = cache.key(store, "report", fmt, top_incidents, top, digest)
        text = cache.get(store, "report", k)
    if text is None:
        report = build_report(store, top_incidents=top_incidents, top=top, summary=summary,
                              charts_on=fmt == "html", guards=guards)  # fmt: skip
        text = render(report, fmt)
        if reuse:
            cache.put(store, "report", k, text)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    tmp.replace(out)  # never a half-written report
    return out
