"""The one JSON serialiser of records: a record is a dataclass, its fields declared once; how
its JSON differs from its fields (keys renamed, fields left out, values converted, computed
values placed among them, keys moved first, fields written only when set) is stated once per
class, as data: a ``JSON_FORM`` class attribute (a :class:`JsonForm`). ``json_record`` writes
any record by its form (a class without one: every field, in order).

Values are written as they are (money stays a ``Decimal``, which ``formatting.json_text``
writes as a number with all its digits); a record inside a record, a list or a mapping is
written by the same rules (a nested class with a ``to_json`` of its own is written by it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from decimal import Decimal
from typing import Any


@dataclass(frozen=True)
class JsonForm:
    """How a record's JSON differs from its fields, each change named once."""

    rename: Mapping[str, str] = field(default_factory=dict)  # attribute -> its JSON key
    omit: tuple[str, ...] = ()  # fields not written
    convert: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)  # how written
    # Computed attributes (properties) written too: each after the attribute named (or, for
    # "", at the end), in the order given.
    derived: tuple[tuple[str, str], ...] = ()
    first: tuple[str, ...] = ()  # attributes written before all the others
    unless_none: tuple[str, ...] = ()  # attributes left out when None

    def attributes(self, names: list[str]) -> list[str]:
        """The attributes written, in order, of a record whose fields are ``names``."""
        shown = [n for n in names if n not in self.omit]
        for attr, after in self.derived:
            shown.insert(shown.index(after) + 1 if after else len(shown), attr)
        return [*self.first, *(n for n in shown if n not in self.first)]


PLAIN = JsonForm()
_PLANS: dict[type, list[tuple[str, str, Callable[[Any], Any] | None, bool]]] = {}


def _plan(cls: type) -> list[tuple[str, str, Callable[[Any], Any] | None, bool]]:
    """(attribute, key, conversion, left out when None) for each value a class writes (worked
    out once per class: a replay writes hundreds of thousands of trips)."""
    found = _PLANS.get(cls)
    if found is None:
        form: JsonForm = getattr(cls, "JSON_FORM", PLAIN)
        names = form.attributes([f.name for f in fields(cls)])
        found = [
            (n, form.rename.get(n, n), form.convert.get(n), n in form.unless_none) for n in names
        ]
        _PLANS[cls] = found
    return found


def json_record(obj: Any) -> dict[str, Any]:
    """A record (a dataclass instance) as JSON data, by its class's ``JSON_FORM``.

    >>> @dataclass
    ... class Row:
    ...     JSON_FORM = JsonForm(rename={"n": "calls"}, omit=("note",), first=("name",))
    ...     n: int
    ...     name: str
    ...     note: str = ""
    >>> json_record(Row(3, "a"))
    {'name': 'a', 'calls': 3}
    """
    if not is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"not a dataclass instance: {obj!r}")
    out: dict[str, Any] = {}
    for attr, key, convert, unless_none in _plan(type(obj)):
        value = getattr(obj, attr)
        if value is None and unless_none:
            continue
        out[key] = convert(value) if convert is not None else json_value(value)
    return out


def json_value(value: Any) -> Any:
    """A value inside a record as JSON data: records by their form (or their own
    ``to_json``), lists and mappings copied with their values written the same way."""
    if isinstance(value, str | int | float | Decimal) or value is None:
        return value
    if is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_json", None)
        return own() if callable(own) else json_record(value)
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: json_value(v) for k, v in value.items()}
    return value


def fixed(usd: Decimal | None) -> str | None:
    """Dollars as exact fixed-point text (``usage bills``/``reconcile`` write them so).

    >>> fixed(Decimal("1.50")), fixed(None)
    ('1.50', None)
    """
    return None if usd is None else format(usd, "f")


def str_or_none(value: Any) -> str | None:
    """A value as its text (a ``Decimal`` as it is printed: ``str``), or None.

    >>> str_or_none(Decimal("0.0100")), str_or_none(None)
    ('0.0100', None)
    """
    return None if value is None else str(value)
