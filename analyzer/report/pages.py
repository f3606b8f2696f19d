"""The report written out: HTML (one self-contained page), Markdown or JSON, from the typed
``Report`` that ``analyzer.report.build`` builds, or the incident table as CSV or Parquet; the
format from ``--format`` or the file's extension, each written by its renderer
(``analyzer.report.render``). Templates live in ``reports/`` (``analyzer.report.templates``).

Untrusted text is escaped wherever it lands: Jinja autoescape for HTML text and attributes,
backslash escapes for Markdown (``md_escape``), matplotlib's XML escaping for SVG labels.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from analyzer.engine import cache
from analyzer.engine.store import Store
from analyzer.errors import ForensicsError
from analyzer.report.render import STDOUT, render, render_text, write_file
from analyzer.report.templates import html_env as html_env
from analyzer.report.templates import md_env as md_env
from analyzer.report.templates import md_escape as md_escape
from analyzer.views.audit import Summary

if TYPE_CHECKING:  # imported where used: a command that writes no page does without them
    from analyzer.guards.backtest import GuardRun

REPORT_FORMATS = ("html", "md", "json", "csv", "parquet")
_EXTENSIONS = {
    "html": "html",
    "htm": "html",
    "md": "md",
    "markdown": "md",
    "json": "json",
    "csv": "csv",
    "parquet": "parquet",
}


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


def write_report(
    store: Store,
    out: Path,
    fmt: str = "html",
    top_incidents: int | None = None,
    summary: Summary | None = None,
    guards: GuardRun | None = None,
    top: int = 10,
    reuse: bool = False,
) -> Path:
    """Write the report to ``out`` (atomically; ``-`` is standard output): the page, or for
    ``csv`` and ``parquet`` the incident table, each by its format's renderer. With ``reuse``,
    a page kept from an earlier run over the same data, incidents, guards and options is
    written again as it was (the same inputs give the same bytes), and a newly built one is
    kept."""
    from analyzer.detect.detectors import load_incidents
    from analyzer.report.build import DEFAULT_TOP_INCIDENTS

    if top_incidents is None:
        top_incidents = DEFAULT_TOP_INCIDENTS
    if fmt == "parquet" and str(out) == STDOUT:
        raise ForensicsError("a Parquet file cannot be written to standard output")
    if fmt in ("csv", "parquet"):  # the incident table
        from analyzer.views.terminal import IncidentsView

        written = render(IncidentsView(load_incidents(store)), fmt)
    else:
        written = _page(store, fmt, top_incidents, summary, guards, top, reuse)
    if str(out) != STDOUT:
        return write_file(written, out)
    assert isinstance(written, str)  # every format but Parquet is text
    click.echo(written, nl=False)
    return out


def _page(
    store: Store,
    fmt: str,
    top_incidents: int,
    summary: Summary | None,
    guards: GuardRun | None,
    top: int,
    reuse: bool,
) -> str:
    """The report page in ``fmt`` (html, md or json) by that format's renderer; with
    ``reuse``, the one kept for the same inputs (and a new one kept)."""
    from analyzer.report.build import build_report

    k = ""
    if reuse:
        if guards is None or guards.key is not None:
            digest = guards.key if guards else None
        else:
            shown = json.dumps(guards.to_json(), sort_keys=True, default=str)
            digest = hashlib.sha256(shown.encode()).hexdigest()
        k = cache.key(store, "report", fmt, top_incidents, top, digest)
        kept = cache.get(store, "report", k)
        if kept is not None:
            return kept
    report = build_report(
        store,
        top_incidents=top_incidents,
        top=top,
        summary=summary,
        charts_on=fmt == "html",
        guards=guards,
    )
    text = render_text(report, fmt)
    if reuse:
        cache.put(store, "report", k, text)
    return text
