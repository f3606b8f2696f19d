"""The one text renderer of tables: a key column (left-aligned, cut to fit), then columns of
figures right-aligned under their headings, optionally a rule and a totals row in bold,
fitted to the terminal's width - on a narrow terminal the columns that may give way do
(the least needed first), then the key column is cut.

Every table the terminal shows is laid out here (usage, bills, reconcile, the guard replay,
the spend tables of ``audit``); a view gives its columns (heading, width, how a row's value
is written) and its rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from analyzer.console import strong
from analyzer.model.formatting import cut

KEEP = 9  # a column that never gives way


@dataclass(frozen=True)
class TextColumn:
    """A column of figures: its heading, its width, how a row's value is written, and how
    firmly it stays on a narrow terminal (the lowest ``keep`` gives way first; ``KEEP``:
    never)."""

    heading: str
    width: int
    value: Callable[[Any], str]
    keep: int = KEEP


@dataclass
class TextTable:
    """A table to lay out: the key column's heading, the columns, the rows (each its key as
    shown and the row the columns read), and how it is fitted."""

    key: str
    columns: list[TextColumn]
    rows: list[tuple[str, Any]]
    total: tuple[str, Any] | None = None  # under a rule, in bold
    below: dict[int, str] = field(default_factory=dict)  # a line under the row at that index
    key_min: int = 8  # the key column is never narrower
    squeeze: int | None = None  # columns give way only while the key is wider than this
    indent: str = ""
    gap: str = " "  # between columns
    margin: int = 0  # columns left free at the right of the widest line


@dataclass
class Laid:
    """A table laid out: its lines, and the headings of the columns left out to fit."""

    lines: list[str]
    left_out: list[str]


def lay_out(t: TextTable, width: int) -> Laid:
    """``t`` fitted to ``width`` columns."""
    cols = list(t.columns)
    keys = [k for k, _ in t.rows] + ([t.total[0]] if t.total else [])
    natural = max([len(k) for k in keys] + [len(t.key)])
    fit = natural if t.squeeze is None else min(natural, t.squeeze)

    def used(columns: list[TextColumn]) -> int:
        return len(t.indent) + sum(c.width + len(t.gap) for c in columns) + t.margin

    left_out: list[str] = []
    while fit + used(cols) > width:
        weakest = min((c for c in cols if c.keep < KEEP), key=lambda c: c.keep, default=None)
        if weakest is None:
            break
        cols.remove(weakest)
        left_out.append(weakest.heading)
    key_w = max(t.key_min, min(natural, width - used(cols)))

    def line(key: str, cells: list[str]) -> str:
        shown = "".join(f"{t.gap}{v:>{c.width}}" for c, v in zip(cols, cells, strict=True))
        return t.indent + cut(key, key_w).ljust(key_w) + shown

    lines = [line(t.key, [c.heading for c in cols])]
    for i, (key, row) in enumerate(t.rows):
        lines.append(line(key, [c.value(row) for c in cols]))
        if i in t.below:
            lines.append(cut(t.below[i], len(lines[0])))
    if t.total is not None:
        key, row = t.total
        lines.append("-" * len(lines[0]))
        lines.append(strong(line(key, [c.value(row) for c in cols])))
    return Laid(lines, left_out)
