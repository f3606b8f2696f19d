"""The one text renderer of tables (``views.text_table``): the columns that may give way do,
the least needed first, then the key column is cut; a line under a row; a totals row."""

from __future__ import annotations

import click

from analyzer.views.text_table import TextColumn, TextTable, lay_out


def _table(**kw: object) -> TextTable:
    columns = [
        TextColumn("calls", 5, lambda r: f"{r[0]:,}"),
        TextColumn("tokens", 9, lambda r: f"{r[1]:,}", 2),
        TextColumn("cached", 8, lambda r: f"{r[2]:,}", 1),
    ]
    rows = [("alpha", (1, 1200, 3)), ("a-much-longer-key", (20, 5, 0))]
    return TextTable("key", columns, rows, **kw)  # type: ignore[arg-type]


def test_a_wide_terminal_shows_every_column() -> None:
    laid = lay_out(_table(), 80)
    assert laid.left_out == []
    assert laid.lines == [
        "key               calls    tokens   cached",
        "alpha                 1     1,200        3",
        "a-much-longer-key    20         5        0",
    ]


def test_the_least_needed_column_gives_way_first_then_the_key_is_cut() -> None:
    laid = lay_out(_table(), 40)
    assert laid.left_out == ["cached"]
    assert laid.lines[0] == "key               calls    tokens"
    laid = lay_out(_table(), 20)
    assert laid.left_out == ["cached", "tokens"]
    assert laid.lines == ["key            calls", "alpha              1", "a-much-longer…    20"]


def test_a_squeezed_key_lets_columns_stay() -> None:
    laid = lay_out(_table(squeeze=8), 33)
    assert laid.left_out == []
    assert laid.lines[2] == "a-much-…    20         5        0"


def test_lines_below_rows_and_a_totals_row_under_a_rule() -> None:
    laid = lay_out(_table(total=("Total", (21, 1205, 3)), below={0: "  ↳ note"}), 80)
    assert laid.lines[2] == "  ↳ note"
    assert laid.lines[-2] == "-" * len(laid.lines[0])
    assert click.unstyle(laid.lines[-1]) == "Total                21     1,205        3"


def test_indent_gap_and_margin() -> None:
    laid = lay_out(_table(indent="  ", gap="  ", margin=2, key_min=4), 40)
    assert laid.left_out == ["cached"]
    assert laid.lines == [
        "  key                calls     tokens",
        "  alpha                  1      1,200",
        "  a-much-longer-key     20          5",
    ]
