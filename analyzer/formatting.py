"""How values are written for people and for JSON, defined once: times, dollars, severities."""

from __future__ import annotations

import re
import textwrap
from datetime import datetime
from decimal import Decimal

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


def money(usd: Decimal | float | None) -> str:
    """Dollars to the cent, with thousands separators (``–`` when there is no figure).

    >>> money(Decimal("1234.5")), money(None), money(-0.014)
    ('$1,234.50', '–', '-$0.01')
    """
    if usd is None:
        return "–"
    text = f"${abs(usd):,.2f}"
    return "-" + text if usd < 0 and text != "$0.00" else text


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
        text, width=max(width, len(indent) + 10), initial_indent=indent,
        subsequent_indent=indent, break_on_hyphens=False,
    ) or [indent.rstrip()]  # fmt: skip


def tokens(n: int | None) -> str:
    """A token count for a table: ``56,065``; ``1.2M`` past ten million.

    >>> tokens(56065), tokens(123_456_789), tokens(None)
    ('56,065', '123.5M', '–')
    """
    if n is None:
        return "–"
    return f"{n / 1e6:,.1f}M" if abs(n) >= 10_000_000 else f"{n:,}"
