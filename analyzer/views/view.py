"""What every view is to a renderer: computed once (its figures, its table, its notes), then
shown in any format the renderers of ``analyzer.report.render`` know.

A view answers ``text`` (the terminal's layout, fitted to a width and times in a zone) and
``json`` (the data, money as ``Decimal``: one serialisation, ``formatting.json_text``, writes
every view); a view that is a table answers ``table`` too (CSV and Parquet are written from
its typed columns by ``analyzer.views.table``). A new view is one class with these methods,
in the module that computes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from analyzer.model.records import json_record, json_value
from analyzer.views.table import Table


def record(obj: Any) -> dict[str, Any]:
    """A dataclass as JSON data, by the one serialiser (``model.records.json_record``): its
    fields in the order it declares them, as its class's ``JSON_FORM`` changes them."""
    return json_record(obj)


@dataclass(frozen=True)
class How:
    """How a view is shown: the width of the terminal and the zone of its times."""

    width: int = 100
    tz: str = "UTC"


class View:
    """A computed view. Subclasses give ``text`` and ``json``, and ``table`` when they are
    a table (a format a view cannot be written in is an error naming the view)."""

    name = "view"

    def text(self, how: How) -> str:
        raise NotImplementedError(f"the {self.name} view has no text layout")

    def json(self) -> Any:
        raise NotImplementedError(f"the {self.name} view has no JSON")

    def table(self) -> Table:
        raise NotImplementedError(f"the {self.name} view is not a table")


class Rows(View):
    """A view of a list of records: laid out on a terminal by ``layout``, each record written
    in JSON by the one serialiser (``model.records``)."""

    def __init__(self, rows: Sequence[Any]) -> None:
        self.rows = list(rows)

    def layout(self, width: int) -> str:
        raise NotImplementedError(f"the {self.name} view has no text layout")

    def text(self, how: How) -> str:
        return self.layout(how.width)

    def json(self) -> Any:
        return [json_value(r) for r in self.rows]
