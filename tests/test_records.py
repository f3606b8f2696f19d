"""The one JSON serialiser of records (``model.records``): a class states once, as data, how
its JSON differs from its fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar

import pytest

from analyzer.model.records import JsonForm, json_record, json_value


@dataclass
class Inner:
    a: int
    b: tuple[str, str] = ("x", "y")


@dataclass
class Own:
    def to_json(self) -> dict[str, Any]:
        return {"own": True}


@dataclass
class Outer:
    JSON_FORM: ClassVar[JsonForm] = JsonForm(
        rename={"n": "count"},
        omit=("secret",),
        convert={"usd": str},
        derived=(("double", "n"), ("tail", "")),
        first=("name",),
        unless_none=("maybe",),
    )

    n: int
    usd: Decimal
    secret: str
    inner: list[Inner]
    own: Own
    maybe: str | None = None
    name: str = "z"
    mapping: dict[str, Inner] = field(default_factory=dict)

    @property
    def double(self) -> int:
        return self.n * 2

    @property
    def tail(self) -> str:
        return "end"


def test_a_form_renames_omits_converts_places_and_moves_first() -> None:
    rec = Outer(2, Decimal("1.50"), "s", [Inner(1)], Own(), mapping={"k": Inner(3)})
    out = json_record(rec)
    assert list(out) == ["name", "count", "double", "usd", "inner", "own", "mapping", "tail"]
    assert out["count"] == 2 and out["double"] == 4 and out["usd"] == "1.50"
    assert out["inner"] == [{"a": 1, "b": ["x", "y"]}]  # a nested record by its own form
    assert out["own"] == {"own": True}  # a nested class with its own to_json
    assert out["mapping"] == {"k": {"a": 3, "b": ["x", "y"]}}
    assert "maybe" not in out
    assert json_record(Outer(1, Decimal(0), "", [], Own(), maybe="m"))["maybe"] == "m"


def test_values_stay_as_they_are() -> None:
    assert json_value(Decimal("0.1")) == Decimal("0.1")
    assert json_record(Inner(1, ("p", "q"))) == {"a": 1, "b": ["p", "q"]}


def test_only_a_record_instance() -> None:
    with pytest.raises(TypeError, match="not a dataclass"):
        json_record(Inner)
