"""How values are written for people and for JSON, defined once: times, dollars, severities."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import secrets
import textwrap
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import IO, Any

# Least to most severe.
SEVERITIES = ("info", "low", "medium", "high")


def severity_rank(severity: str) -> int:
    """0 for info up to 3 for high (an unknown severity ranks below info)."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1


def severity_order_sql(column: str = "severity") -> str:
    """SQL that sorts the most severe first."""
    cases = " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(reversed(SEVERITIES)))
    return f"CASE {column} {cases} ELSE {len(SEVERITIES)} END"


def iso(ts: datetime | None) -> str | None:
    """A stored (naive UTC) time as ISO 8601 with its zone: ``2025-12-13T06:12:58.123000Z``.

    >>> iso(datetime(2025, 12, 13, 6, 12, 58))
    '2025-12-13T06:12:58Z'
    """
    return None if ts is None else ts.isoformat() + "Z"


def iso_seconds(ts: datetime | None) -> str | None:
    """The same to the second, for a page: ``2025-12-13T06:12:58Z``.

    >>> iso_seconds(datetime(2025, 12, 13, 6, 12, 58, 123000))
    '2025-12-13T06:12:58Z'
    """
    return None if ts is None else ts.isoformat(timespec="seconds") + "Z"


def _exact(usd: Decimal | float) -> Decimal:
    """An amount to print: a ``Decimal`` as it is; a float (the guard replay's figures, rounded
    to 10 places) as the decimal it is written as, so that it rounds as that amount would and
    not as its binary neighbour does (0.165 is 0.16500000000000000777 in binary)."""
    return Decimal(repr(usd)) if isinstance(usd, float) else Decimal(usd)


def money(usd: Decimal | float | None) -> str:
    """Dollars to the cent, with thousands separators (``–`` when there is no figure); an exact
    half cent goes to the even cent, as ``Decimal`` rounds, whatever type the amount has.

    >>> money(Decimal("1234.5")), money(None), money(-0.014)
    ('$1,234.50', '–', '-$0.01')
    >>> money(Decimal("0.165")), money(0.165), money(Decimal("0.175"))
    ('$0.16', '$0.16', '$0.18')
    """
    if usd is None:
        return "–"
    usd = _exact(usd)
    text = f"${abs(usd):,.2f}"
    return "-" + text if usd < 0 and text != "$0.00" else text


def cost(usd: Decimal | float | None) -> str:
    """A call's dollars with enough digits to be non-zero: cents from a dime up, four
    decimals below, and two significant digits below a hundredth of a cent, rounded as
    ``money`` rounds (the exact amount, half to even).

    >>> cost(6.16), cost(0.28), cost(0.0041), cost(0.00000412), cost(0), cost(-0.0005)
    ('$6.16', '$0.28', '$0.0041', '$0.0000041', '$0.00', '-$0.0005')
    >>> cost(Decimal("0.00125")), cost(0.00125), cost(Decimal("0.00135"))
    ('$0.0012', '$0.0012', '$0.0014')
    """
    if usd is None:
        return "–"
    usd = _exact(usd)
    x = abs(float(usd))  # only to choose the places
    if x == 0 or x >= 0.1:
        return money(usd)
    places = 4 if x >= 0.0001 else 1 - math.floor(math.log10(x))
    text = f"${abs(usd):,.{places}f}"
    return "-" + text if usd < 0 else text


def number(usd: Decimal) -> str:
    """An exact amount as a JSON number: all its digits, fixed-point, no trailing zeros (but
    one after the point, as a float is written).

    >>> number(Decimal("6.1600000000")), number(Decimal(0)), number(Decimal("1E-11"))
    ('6.16', '0.0', '0.00000000001')
    >>> number(Decimal("10000000.1649999999"))
    '10000000.1649999999'
    """
    if not usd.is_finite():
        return "null"
    text = format(usd, "f")
    if "." not in text:
        return text + ".0"
    text = text.rstrip("0")
    return text + "0" if text.endswith(".") else text


def json_text(data: Any, indent: int | None = 2) -> str:
    """``data`` as JSON, written as ``json.dumps(data, indent=indent, default=str)`` writes
    it, except that a ``Decimal`` (money) is a number with all its digits (``number``), never
    rounded through a float.

    >>> json_text({"usd": Decimal("0.1000000001"), "n": [1, 0.5, "x"]}, indent=None)
    '{"usd": 0.1000000001, "n": [1, 0.5, "x"]}'
    """
    marks: dict[str, str] = {}
    nonce = secrets.token_hex(8)

    def marked(value: Any) -> Any:
        if isinstance(value, Decimal):
            mark = f"\x00{nonce}:{len(marks)}\x00"
            marks[json.dumps(mark)] = number(value)
            return mark
        if isinstance(value, dict):
            return {k: marked(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [marked(v) for v in value]
        return value

    text = json.dumps(marked(data), indent=indent, default=str)
    if not marks:
        return text
    return re.sub(r'"\\u0000[0-9a-f]{16}:\d+\\u0000"', lambda m: marks.get(m[0], m[0]), text)


def label(key: str) -> str:
    """An evidence key in words.

    >>> label("prompt_tokens"), label("turn_usd"), label("first_call_id")
    ('prompt tokens', 'turn ($)', 'first call id')
    """
    words = key.replace("_usd", " ($)").replace("_", " ").strip()
    return words[:1].lower() + words[1:]


def shown(value: Any) -> str:
    """An evidence value as a person reads it: numbers with separators and no ``.0``, lists
    joined, yes/no, nested objects as ``key: value`` pairs.

    >>> shown(56065), shown("56065"), shown(3.0), shown(0.9645864), shown(["Task", "Read"])
    ('56,065', '56,065', '3', '0.9645864', 'Task, Read')
    >>> shown({"a_b": 1, "c": None}), shown(True)
    ('a b: 1; c: –', 'yes')
    """
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{int(value):,}" if value.is_integer() and abs(value) < 1e15 else f"{value:,.10g}"
    if isinstance(value, Decimal):
        return shown(float(value))
    if isinstance(value, str):
        return f"{int(value):,}" if value.isdigit() and len(value) < 16 else value
    if isinstance(value, list | tuple):
        return ", ".join(shown(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{label(str(k))}: {shown(v)}" for k, v in value.items())
    return str(value)


_KEY = re.compile(r"(?<![\w-])sk-(?:or-|ant-|proj-)?[A-Za-z0-9_\-]{6,}")


def mask_keys(text: str) -> str:
    """Hide what looks like an API key (``sk-…``, ``sk-or-…``, ``sk-ant-…``): keep the prefix."""

    def hide(m: re.Match[str]) -> str:
        key = m.group(0)
        prefix = "sk-" + next((p for p in ("or-", "ant-", "proj-") if key[3:].startswith(p)), "")
        return prefix + "…[masked]"

    return _KEY.sub(hide, text)


def printable(text: object) -> str:
    """Text from untrusted logs, safe on a terminal: control characters become ``?``.

    >>> printable("ok\x1b[31m")
    'ok?[31m'
    """
    return "".join(ch if ch.isprintable() else "?" for ch in str(text))


# What a page or a CSV file must not carry from a log as it is: control characters (NUL, ESC,
# DEL, the C1 range; not the tab and line breaks text may hold) and the bidirectional controls
# that reorder what follows them (U+202E shows ``exe.txt`` as ``txt.exe``).
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
REPLACEMENT = "\ufffd"


def visible(text: str) -> str:
    r"""Text from a log as a page or a CSV file shows it: control and bidirectional-override
    characters become U+FFFD (``�``), so nothing in it can reorder, hide or end what
    surrounds it; tabs and line breaks stay.

    >>> visible("a\u202etxt.exe\x00\x1b[2J\tb")
    'a�txt.exe��[2J\tb'
    """
    return _INVISIBLE.sub(REPLACEMENT, text)


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters (cut with ``…``).

    >>> cut("constant_input_low_output", 12), cut("short", 12)
    ('constant_in…', 'short')
    """
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` as lines of at most ``width`` characters, each starting with ``indent``.

    >>> wrap("a guard counting every max_tokens finish", 20, "  ")
    ['  a guard counting', '  every max_tokens', '  finish']
    """
    return textwrap.wrap(
        text,
        width=max(width, len(indent) + 10),
        initial_indent=indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


def tokens(n: int | None) -> str:
    """A token count for a table: ``56,065``; ``1.2M`` past ten million.

    >>> tokens(56065), tokens(123_456_789), tokens(None)
    ('56,065', '123.5M', '–')
    """
    if n is None:
        return "–"
    return f"{n / 1e6:,.1f}M" if abs(n) >= 10_000_000 else f"{n:,}"


# CSV injection (OWASP): a spreadsheet runs a cell that begins with one of these as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
# What a spreadsheet may pass over before a formula's sign: whitespace (line breaks included),
# and control characters, which reach a CSV as the replacement character (``visible``).
_PASSED_OVER = re.compile(r"[\s\ufffd]*")


def csv_cell(value: object) -> object:
    r"""A value for a CSV cell a spreadsheet may open. Text beginning with ``=``, ``+``, ``-``,
    ``@``, a tab or a carriage return - also after any leading whitespace, line break or
    control character, which some spreadsheets pass over - gets a leading ``'`` (OWASP's
    CSV-injection guidance), so an app name such as ``=2+5+cmd|' /C calc'!A0`` from a bill is
    shown, never run; a number (``-3.75`` too, spaces around it or not) is kept as it is.
    Control and bidirectional-override characters are made :func:`visible`.

    >>> csv_cell("=2+5"), csv_cell("-3.75"), csv_cell("@SUM(A1)"), csv_cell(-2), csv_cell("ok")
    ("'=2+5", '-3.75', "'@SUM(A1)", -2, 'ok')
    >>> csv_cell(" =1+1"), csv_cell("\n@x"), csv_cell(" -3.75"), csv_cell("\r")
    ("' =1+1", "'\n@x", ' -3.75', "'\r")
    """
    if not isinstance(value, str):
        return value
    value = visible(value)
    start = value[_PASSED_OVER.match(value).end() :]  # type: ignore[union-attr]
    if _NUMBER.fullmatch(start):
        return value
    if value.startswith(_FORMULA_START) or start.startswith(_FORMULA_START):
        return "'" + value
    return value


class CsvOut:
    """``csv.writer`` for the CSV this tool writes: every cell through :func:`csv_cell`, and
    every cell holding a line break quoted, a lone carriage return too. (Python's writer quotes
    only the characters of its line terminator, so with ``\\n`` alone a CR in a name would stay
    bare: a spreadsheet that ends a row there would start the next row with whatever follows.)
    Rows end with ``\\n``."""

    def __init__(self, buf: IO[str]) -> None:
        self._buf = buf
        self._row = io.StringIO()
        self._w = csv.writer(self._row, lineterminator="\r\n")

    def writerow(self, row: Iterable[object]) -> None:
        self._row.seek(0)
        self._row.truncate()
        self._w.writerow([csv_cell(v) for v in row])
        self._buf.write(self._row.getvalue()[:-2] + "\n")
