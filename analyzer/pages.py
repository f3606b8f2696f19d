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

import click
import jinja2
from markupsafe import Markup

from analyzer import cache
from analyzer.backtest import GuardRun
from analyzer.errors import ForensicsError
from analyzer.export import incident_csv, write_incident_parquet
from analyzer.formatting import money
from analyzer.report import DEFAULT_TOP_INCIDENTS, Report, build_report
from analyzer.resources import resource_dir
from analyzer.store import Store
from analyzer.summary import Summary

REPORT_FORMATS = ("html", "md", "json", "csv", "parquet")
_EXTENSIONS = {"html": "html", "htm": "html", "md": "md", "markdown": "md", "json": "json",
               "csv": "csv", "parquet": "parquet"}  # fmt: skip
STDOUT = "-"


def format_for(output: str | Path, fmt: str | None = None) -> str:
    """The report format: as asked, else from the file's extension (a file without one is
    HTML; ``-``, standard output, is Markdown). An extension it does not know is an error
    naming those it does: csv and parquet write the incident table, the others the report.

    >>> format_for("x.md"), format_for("x.json"), format_for("x"), format_for("x.txt", "md")
    ('md', 'json', 'html', 'md')
    >>> format_for("x.txt")
    Traceback (most recent call last):
    ValueError: x.txt: unknown extension .txt (known: .html, .htm, .md, .markdown, .json, .csv, \
.parquet; or give --format)
    """
    if fmt:
        return fmt
    if str(output) == STDOUT:
        return "md"
    suffix = Path(output).suffix.lower()
    if not suffix:
        return "html"
    if suffix.lstrip(".") not in _EXTENSIONS:
        known = ", ".join("." + e for e in _EXTENSIONS)
        raise ValueError(f"{output}: unknown extension {suffix} (known: {known}; or give --format)")
    return _EXTENSIONS[suffix.lstrip(".")]


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
    """Write the report to ``out`` (atomically; ``-`` is standard output): the page, or for
    ``csv`` and ``parquet`` the incident table. With ``reuse``, a page kept from an earlier
    run over the same data, incidents, guards and options is written again as it was (the same
    inputs give the same bytes), and a newly built one is kept."""
    if fmt == "parquet":
        if str(out) == STDOUT:
            raise ForensicsError("a Parquet file cannot be written to standard output")
        return write_incident_parquet(store, out)
    text = incident_csv(store) if fmt == "csv" else None
    k = ""
    if reuse and text is None:
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
    if str(out) == STDOUT:
        click.echo(text, nl=False)
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    tmp.replace(out)  # never a half-written report
    return out
