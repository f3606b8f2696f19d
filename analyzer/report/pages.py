"""The report written out: HTML (one self-contained page), Markdown or JSON, from the typed
``Report`` that ``analyzer.report.build`` builds. Templates live in ``reports/``.

Untrusted text is escaped wherever it lands: Jinja autoescape for HTML text and attributes,
backslash escapes for Markdown (``md_escape``), matplotlib's XML escaping for SVG labels.
"""

from __future__ import annotations

import hashlib
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from markupsafe import Markup, escape

from analyzer.engine import cache
from analyzer.engine.files import atomic_file
from analyzer.engine.resources import resource_dir
from analyzer.engine.store import Store
from analyzer.errors import ForensicsError
from analyzer.model.formatting import cost, json_text, money, number, visible
from analyzer.views.summary import Summary

if TYPE_CHECKING:  # imported where used: a command that writes no page does without them
    import jinja2

    from analyzer.guards.backtest import GuardRun
    from analyzer.report.build import Report

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
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("reports"))),
        autoescape=True,
        finalize=_html_visible,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters.update(
        money=_money, num=_num, pct=_pct, ts=_when, cost=cost, times=_times, exact=_exact
    )
    return env


def _html_visible(value: Any) -> Any:
    """Every value printed into the page: text from the logs with its control and
    bidirectional-override characters made visible (``formatting.visible``) before it is
    escaped; markup we built (``Markup``) keeps its type."""
    if isinstance(value, Markup):
        return Markup(visible(str(value)))
    return visible(value) if isinstance(value, str) else value


_TIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?Z?")


def _times(text: Any) -> Markup:
    """Free text (a summary, an evidence value), escaped, with every timestamp in it kept on
    one line."""
    escaped = str(escape(text if text is not None else "–"))
    return Markup(_TIME.sub(lambda m: f'<span class="ts">{m.group(0)}</span>', escaped))


def _money(x: Decimal | float | None) -> str:
    """Dollars to the cent, but never ``$0.00`` for an amount that is not zero."""
    return cost(x) if x and abs(float(x)) < 0.005 else money(x)  # (the float only chooses)


def _exact(x: Decimal | float | None) -> str:
    """An amount as a machine reads it (an attribute): all its digits; nothing for none."""
    if x is None:
        return ""
    return number(x) if isinstance(x, Decimal) else str(x)


def _when(x: str | None) -> str:
    """An ISO time as the page shows it (``2025-12-13 06:12:58``; the zone is in the heading)."""
    return "–" if not x else x.replace("T", " ").removesuffix("Z")


class MdText(str):
    """Text already fit for Markdown (numbers we formatted, our own markup)."""


# Markdown escaping: the few characters that can start markup anywhere in a line, each
# backslash-escaped. Backticks open code; ``*``, ``_`` (but not inside a word, as in
# ``constant_input_low_output``) and ``~`` emphasis and strikethrough;
# ``[`` and ``]`` links and images; ``<`` and ``>`` raw HTML and autolinks; ``|`` ends a table
# cell; ``{`` and ``}`` are macros in trackers and wikis (Jira, Confluence, Liquid). A backslash
# is doubled where it would escape what follows, and ``&`` where it would start an entity.
# Letters, digits and other punctuation (``. - ( ) $ ! : / , ' "``) are written as they are.
_MD_INLINE = re.compile(
    r"[`*~\[\]<>|{}]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])"  # ``_`` inside a word opens nothing
    r"|\\(?=[!-/:-@\[-`{-~]|$)|&(?=#?[0-9A-Za-z]+;)"
)
# At the start of a value (where the template may start a line): what would open a block.
_MD_BLOCK = re.compile(r"^(?:#|[-+](?=[ \t]|$)|-(?=-)|(\d{1,9})(?=[.)](?:[ \t]|$)))")
# A value shaped like HTML (a tag, comment or declaration) is hostile, or at least not prose: it
# keeps the thorough escape, a backslash before each punctuation character of ``_MD_ALL``.
_MD_HTML = re.compile(r"<[A-Za-z/!?]")
_MD_ALL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&\"'=$:])")


def _block_escape(m: re.Match[str]) -> str:
    digits = m.group(1)
    return digits + "\\" if digits else "\\" + m.group(0)


def md_escape(value: Any) -> str:
    r"""Every value printed into the Markdown report (the environment's ``finalize``): text
    from the logs is made literal with as few backslashes as that takes.

    Line breaks become spaces (a value never leaves its line or table cell), control and
    bidirectional-override characters U+FFFD (``formatting.visible``), and leading blanks
    go (no indented code). Then the characters that can start inline markup anywhere are
    escaped (``_MD_INLINE``), and at the start of the value whatever would open a block there:
    ``#``, a list marker ``-``, ``+`` or ``1.``, a ``---`` rule. A value that looks like HTML
    has all its punctuation escaped. A float that is a whole number is written without ``.0``;
    our own formatted values (``MdText``) pass.

    >>> md_escape("anthropic/claude-opus-4.5 ($6.16)"), md_escape("| a | b |")
    ('anthropic/claude-opus-4.5 ($6.16)', '\\| a \\| b \\|')
    >>> md_escape("[x](javascript:alert(1))"), md_escape("# 1. *a* `b` &amp;"), md_escape(3.0)
    ('\\[x\\](javascript:alert(1))', '\\# 1. \\*a\\* \\`b\\` \\&amp;', '3')
    """
    if isinstance(value, MdText):
        return value
    if value is None:
        return "–"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = visible(re.sub(r"\r\n?|\n", " ", str(value)))
    if text.strip():
        text = text.lstrip(" \t")
    if _MD_HTML.search(text):
        return _MD_ALL.sub(r"\\\1", text)
    return _MD_BLOCK.sub(_block_escape, _MD_INLINE.sub(lambda m: "\\" + m.group(0), text))


def _md_num(x: float | int | None) -> MdText:
    """A number with thousands separators; a whole float without its ``.0``: ``3``, ``2.5``."""
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    return MdText(_num(x))


def _md_pct(x: float) -> MdText:
    """A share to a tenth of a percent, a whole one without ``.0``: ``11.1%``, ``0%``."""
    return MdText(_pct(x).replace(".0%", "%"))


def _md_whole(value: Any) -> Any:
    """A number written as text (evidence holds JSON-written numbers) without a ``.0``: the
    text ``33.0`` as ``33``; anything else as it is."""
    if isinstance(value, str) and re.fullmatch(r"-?\d+\.0+", value):
        return value.split(".")[0]
    return value


def md_env() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("reports"))),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        finalize=md_escape,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        money=lambda x: MdText(_money(x)),
        cost=lambda x: MdText(cost(x)),
        num=_md_num,
        pct=_md_pct,
        ts=lambda x: MdText(_when(x)),  # our own ISO times
        whole=_md_whole,
    )
    return env


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        return json_text(report.to_json()) + "\n"
    if fmt == "md":
        return md_env().get_template("report.md.j2").render(r=report)
    css = (resource_dir("reports") / "report.css").read_text(encoding="utf-8")
    return (
        html_env()
        .get_template("report.html.j2")
        .render(r=report, css=Markup(css), svg=lambda s: Markup(s))
    )


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
    ``csv`` and ``parquet`` the incident table. With ``reuse``, a page kept from an earlier
    run over the same data, incidents, guards and options is written again as it was (the same
    inputs give the same bytes), and a newly built one is kept."""
    from analyzer.report.build import DEFAULT_TOP_INCIDENTS, build_report
    from analyzer.views.export import incident_csv, write_incident_parquet

    if top_incidents is None:
        top_incidents = DEFAULT_TOP_INCIDENTS
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
        report = build_report(
            store,
            top_incidents=top_incidents,
            top=top,
            summary=summary,
            charts_on=fmt == "html",
            guards=guards,
        )
        text = render(report, fmt)
        if reuse:
            cache.put(store, "report", k, text)
    if str(out) == STDOUT:
        click.echo(text, nl=False)
        return out
    with atomic_file(out) as tmp:  # never a half-written report
        tmp.write_text(text, encoding="utf-8", newline="\n")
    return out
