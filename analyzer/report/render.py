"""Every output format, registered in one place: a renderer per format (text, JSON, CSV,
Markdown, HTML, Parquet), each turning a computed view (``analyzer.views.view``) into what is
written. The command line picks one (``cli.options.emit``: ``--json``, ``--csv`` or the
extension of ``-o FILE``); a new format is one renderer here.

* ``text``: the view's own terminal layout (``View.text``);
* ``json``: the view's data through the one serialisation (``formatting.json_text``: money
  with all its digits), one document and a newline;
* ``csv`` and ``parquet``: the view's table (``View.table``) through the one CSV writer and
  the one Arrow schema of ``analyzer.views.table``;
* ``md`` and ``html``: a page (a view with a ``template`` in ``reports/``: the report, a
  composition of views and charts) through the templates of ``analyzer.report.templates``.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from analyzer.engine.files import atomic_file
from analyzer.errors import ForensicsError
from analyzer.model.formatting import json_text
from analyzer.views.table import arrow_table, csv_text
from analyzer.views.view import How, View

STDOUT = "-"  # the output named "-" is stdout


@dataclass(frozen=True)
class Renderer:
    """A format: how a view is written in it, and whether what it writes is bytes."""

    format: str
    write: Callable[[View, How], str | bytes]
    binary: bool = False


def _text(view: View, how: How) -> str:
    return view.text(how)


def _json(view: View, how: How) -> str:
    return json_text(view.json()) + "\n"


def _csv(view: View, how: How) -> str:
    return csv_text(view.table())


def _parquet(view: View, how: How) -> bytes:
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(arrow_table(view.table()), buf)
    return buf.getvalue()


def _template(view: View) -> str:
    template = getattr(view, "template", None)
    if not isinstance(template, str):
        raise ForensicsError(f"the {view.name} view is not a page (Markdown and HTML are pages)")
    return template


def _markdown(view: View, how: How) -> str:
    from analyzer.report.templates import md_env

    return md_env().get_template(f"{_template(view)}.md.j2").render(r=view)


def _html(view: View, how: How) -> str:
    from markupsafe import Markup

    from analyzer.engine.resources import resource_dir
    from analyzer.report.templates import html_env

    css = (resource_dir("reports") / f"{_template(view)}.css").read_text(encoding="utf-8")
    return (
        html_env()
        .get_template(f"{_template(view)}.html.j2")
        .render(r=view, css=Markup(css), svg=lambda s: Markup(s))
    )


RENDERERS: dict[str, Renderer] = {
    r.format: r
    for r in (
        Renderer("text", _text),
        Renderer("json", _json),
        Renderer("csv", _csv),
        Renderer("md", _markdown),
        Renderer("html", _html),
        Renderer("parquet", _parquet, binary=True),
    )
}


def render(view: View, fmt: str, how: How | None = None) -> str | bytes:
    """``view`` in format ``fmt`` (text, or bytes for a binary format)."""
    if fmt not in RENDERERS:
        raise ForensicsError(f"no output format {fmt!r} (known: {', '.join(RENDERERS)})")
    return RENDERERS[fmt].write(view, how or How())


def write_file(written: str | bytes, output: Path) -> Path:
    """What a renderer wrote, into the file ``output``: written whole, then moved into place
    (never a half-written file)."""
    with atomic_file(output) as tmp:
        if isinstance(written, bytes):
            tmp.write_bytes(written)
        else:
            tmp.write_text(written, encoding="utf-8", newline="\n")
    return output


def render_text(view: View, fmt: str, how: How | None = None) -> str:
    """``view`` in a text format (every format but Parquet)."""
    written = render(view, fmt, how)
    if not isinstance(written, str):
        raise ForensicsError(f"{fmt} is not text: it is written to a file")
    return written
