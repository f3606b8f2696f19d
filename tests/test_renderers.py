"""The output seam: views computed once (``analyzer.views.view``), their tables
(``analyzer.views.table``: the one CSV writer and the one Parquet schema), the renderers
registered by format (``analyzer.report.render``) and the command line's choice of one
(``cli.options.output_choice`` and ``emit``)."""

from __future__ import annotations

import io
from datetime import datetime
from decimal import Decimal
from typing import Any

import click
import pyarrow.parquet as pq
import pytest

from analyzer.cli.options import emit, output_choice
from analyzer.errors import ForensicsError
from analyzer.report.render import RENDERERS, render, render_text
from analyzer.views.table import Column, Table, arrow_table, csv_text
from analyzer.views.view import How, View

TS = datetime(2025, 12, 13, 6, 12, 58)


class Tiny(View):
    """A view of two rows: what a new view has to give the renderers."""

    name = "tiny"

    def text(self, how: How) -> str:
        return f"tiny at {how.width} in {how.tz}\n"

    def json(self) -> Any:
        return {"usd": Decimal("0.1000000001"), "n": 2}

    def table(self) -> Table:
        return Table(
            [
                Column("name"),
                Column("calls", "int", "calls"),
                Column("usd", "usd", "USD"),
                Column("first", "time", "UTC"),
                Column("formats", "list"),
            ],
            [
                ["=SUM(A1)", 3, Decimal("6.1600000000"), TS, ["a", "b"]],
                [None, 0, Decimal(0), None, []],
            ],
        )


def test_every_format_has_one_renderer() -> None:
    assert set(RENDERERS) == {"text", "json", "csv", "md", "html", "parquet"}
    assert [f for f, r in RENDERERS.items() if r.binary] == ["parquet"]


def test_text_json_and_csv_of_a_view() -> None:
    view = Tiny()
    assert render(view, "text", How(80, "Europe/Berlin")) == "tiny at 80 in Europe/Berlin\n"
    # money with all its digits, one document and a newline
    assert render(view, "json") == '{\n  "usd": 0.1000000001,\n  "n": 2\n}\n'
    # dollars without trailing zeros, times in ISO with a Z, lists joined, nothing empty,
    # a cell that would start a formula quoted
    assert render(view, "csv") == (
        "name,calls,usd,first,formats\n'=SUM(A1),3,6.16,2025-12-13T06:12:58Z,a;b\n,0,0,,\n"
    )


def test_parquet_schema_comes_from_the_column_types() -> None:
    data = render(Tiny(), "parquet")
    assert isinstance(data, bytes)
    table = pq.read_table(io.BytesIO(data))
    assert [str(t) for t in table.schema.types] == [
        "string",
        "int64",
        "decimal128(18, 10)",
        "timestamp[us, tz=UTC]",
        "list<element: string>",  # as Parquet names a list's item
    ]
    assert table.column("usd").to_pylist() == [Decimal("6.16"), Decimal(0)]


def test_a_format_a_view_cannot_take_is_an_error() -> None:
    with pytest.raises(ForensicsError, match="not a page"):
        render(Tiny(), "md")
    with pytest.raises(ForensicsError, match="no output format 'xlsx'"):
        render(Tiny(), "xlsx")
    with pytest.raises(ForensicsError, match="not text"):
        render_text(Tiny(), "parquet")
    with pytest.raises(NotImplementedError, match="the view view is not a table"):
        render(View(), "csv")


def test_a_table_of_no_rows() -> None:
    columns = [Column("a"), Column("b", "int")]
    assert csv_text(Table(columns)) == "a,b\n"
    assert csv_text(Table(columns, heading_if_empty=False)) == ""
    assert arrow_table(Table(columns)).num_rows == 0
    with pytest.raises(ValueError, match="unknown type 'money'"):
        Column("c", "money")


def test_the_command_line_picks_one_format() -> None:
    assert output_choice() == "text"
    assert output_choice(as_json=True) == "json"
    assert output_choice(as_csv=True) == "csv"
    assert output_choice(output="x.parquet") == "parquet"
    with pytest.raises(click.UsageError, match="one of --json and --csv"):
        output_choice(as_json=True, as_csv=True)
    with pytest.raises(click.UsageError, match="not both"):
        output_choice(as_json=True, output="x.csv")
    with pytest.raises(click.BadParameter, match=r"unknown extension \.txt"):
        output_choice(output="x.txt")


def test_emit_writes_stdout_or_a_file(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    emit(Tiny(), "json")
    assert capsys.readouterr().out.endswith('"n": 2\n}\n')
    emit(Tiny(), "parquet", output=str(tmp_path / "t.parquet"))
    assert pq.read_table(tmp_path / "t.parquet").num_rows == 2
    emit(Tiny(), "csv", output=str(tmp_path / "t.csv"))
    assert (tmp_path / "t.csv").read_text(encoding="utf-8").startswith("name,calls")
    with pytest.raises(click.UsageError, match="standard output"):
        emit(Tiny(), "parquet")


def test_no_recommendation_says_why_in_text_and_json() -> None:
    from analyzer.guards.recommend import Budget
    from analyzer.views.backtest import RecommendView

    view = RecommendView(None, Budget(max_false_trips=0), 12, 0)
    reason = (
        "No guard would have saved money on this history: none of the 12 policy and threshold "
        f"pairs weighed (0 of them within the budget, {Budget(0).describe()}) prevents waste "
        "worth at least a cent more than the work it would kill."
    )
    text = render(view, "text")
    assert isinstance(text, str) and text.endswith(".\n")
    assert " ".join(text.splitlines()) == reason  # wrapped to the terminal, a sentence
    assert view.json() == {
        "recommendation": None,
        "reason": reason,
        "policy": None,
        "budget": Budget(0).describe(),
        "variants_weighed": 12,
        "variants_within_budget": 0,
    }


def test_a_record_is_its_fields_in_order() -> None:
    from analyzer.views.lineage import Parent
    from analyzer.views.view import record

    assert record(Parent("s1", "forked_from")) == {"session_id": "s1", "relation": "forked_from"}
    with pytest.raises(TypeError, match="not a dataclass"):
        record(Parent)
