"""The page's templates (``reports/``) and what they print values with: the Jinja
environments of the HTML page and of the Markdown report, their filters, and the escaping of
untrusted text wherever it lands (Jinja autoescape for HTML text and attributes, backslash
escapes for Markdown: ``md_escape``).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape

from analyzer.engine.resources import resource_dir
from analyzer.model.formatting import cost, money, number, visible

if TYPE_CHECKING:  # imported where used: a command that writes no page does without it
    import jinja2


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
