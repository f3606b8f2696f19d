"""The rows a format module emits, declared once: their columns and their types.

A format module builds each row as a ``CallRow`` or a ``MessageRow`` and hands it to its
``Lowering``; the Arrow tables the sink writes take their columns and types from these
declarations (``MESSAGE_COLUMNS``, ``CALL_COLUMNS``), so a column is added in one place.
Those two are made when first asked for (pyarrow is imported then, not with this module, which
the live reader of a transcript imports without the store: ``analyzer.guards.live_claude``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# The Arrow type of each annotation a row field may have (annotations are read as text), by
# the name of its pyarrow function.
_ARROW: dict[str, tuple[str, ...]] = {
    "str": ("string",),
    "int": ("int64",),
    "float": ("float64",),
    "bool": ("bool_",),
    "datetime": ("timestamp", "us"),
}


def columns(row_type: type) -> dict[str, pa.DataType]:
    """The declared columns of a row type and their Arrow types (a field's ``arrow`` metadata,
    the name of a pyarrow type, overrides the type its annotation names)."""
    import pyarrow as pa

    out: dict[str, pa.DataType] = {}
    for f in fields(row_type):
        declared = f.metadata.get("arrow")
        make, *args = (declared,) if declared else _ARROW[str(f.type).removesuffix(" | None")]
        out[f.name] = getattr(pa, make)(*args)
    return out


@dataclass
class MessageRow:
    """A message of a session: what was said or called, in order (``idx``)."""

    session_id: str | None
    idx: int | None
    role: str | None
    kind: str | None
    ts: datetime | None = None
    turn_id: str | None = None
    text_chars: int | None = None
    visible_chars: int | None = None
    tool_name: str | None = None
    tool_args_hash: str | None = None
    tool_use_id: str | None = None
    tool_result_hash: str | None = None
    is_error: bool | None = None
    call_id: str | None = None
    excerpt: str | None = None
    meaning_key: str | None = None  # what it means, masked (``ingest.meaning``)
    n_records: int | None = 0  # input records this message accounts for

    def values(self) -> dict[str, Any]:
        """The row by column name (its own mapping, not a copy)."""
        return self.__dict__


@dataclass
class CallRow:
    """The columns a log's call may fill (everything else in ``calls`` stays NULL; the raw
    finish reason is normalised and the kind derived in SQL)."""

    native_id: str | None = None
    response_id: str | None = None
    line: int | None = None
    ts: datetime | None = None
    stream_key: str | None = None
    session_id: str | None = None
    turn_id: str | None = None
    seq: int | None = None
    agent_id: str | None = None
    parent_session_id: str | None = None
    model: str | None = None
    provider: str | None = None
    app: str | None = None
    project: str | None = None
    variant: str | None = None  # 'fast': Anthropic's fast mode, priced at its own rate
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    output_final: bool | None = None
    cost_usd: float | None = None  # a cost the log states itself (cost_basis 'reported')
    cost_basis: str | None = None
    web_search_requests: int | None = None
    finish_reason_raw: str | None = None
    content_chars: int | None = None
    visible_chars: int | None = None
    reasoning_chars: int | None = None
    tool_call_count: int | None = None
    http_status: int | None = field(default=None, metadata={"arrow": "int32"})
    received_done: bool | None = None
    event_count: int | None = None
    duration_ms: float | None = None
    ttft_ms: float | None = None
    streamed: bool | None = None
    cancelled: bool | None = None
    reply_saved: bool | None = None
    n_records: int | None = None  # records this call accounts for (loaded or duplicate)
    parts: int | None = None  # records that shaped it, incl. ones accounted for elsewhere
    # A replay: if a call of this format with the same response_id (one API response) is
    # stored already, or came earlier in this file, this one is a duplicate of it.
    replay: bool | None = None
    # Where output_tokens is a placeholder: the output estimated from what the call wrote
    # (priced: cost_basis 'estimated_output'), and whether that is a lower bound.
    output_estimate_tokens: int | None = None
    output_estimate_floor: bool | None = None
    # What the log says the call was made for (OpenTelemetry resource attributes, a trace
    # platform's user and tags): JSON text from ``values.labels_text``.
    labels: str | None = None

    def values(self) -> dict[str, Any]:
        """The row by column name (its own mapping, not a copy: what changes in the row after
        it is handed over is what is stored)."""
        return self.__dict__

    def update(self, values: Mapping[str, Any]) -> None:
        """Set the columns ``values`` names (a usage object's token counts, say)."""
        for name, value in values.items():
            if name not in _CALL_NAMES:
                raise KeyError(f"calls has no column {name!r}")
            setattr(self, name, value)

    def add(self, **amounts: int) -> None:
        """Add to counters (``call.add(content_chars=n)``); a counter a row starts gets its
        0 where the row is made, so a count nothing added to is 0 and one never started NULL."""
        for name, amount in amounts.items():
            setattr(self, name, (getattr(self, name) or 0) + amount)


_CALL_NAMES = frozenset(f.name for f in fields(CallRow))
_MADE: dict[str, dict[str, pa.DataType]] = {}


def __getattr__(name: str) -> dict[str, pa.DataType]:
    """``CALL_COLUMNS`` and ``MESSAGE_COLUMNS``: the declared columns of calls and messages
    and their Arrow types, made when first asked for."""
    rows = {"CALL_COLUMNS": CallRow, "MESSAGE_COLUMNS": MessageRow}
    if name not in rows:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _MADE:
        _MADE[name] = columns(rows[name])
    return _MADE[name]
