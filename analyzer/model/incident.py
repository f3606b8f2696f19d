"""An incident: what a detector found, typed, from the detector to the page and the CLI."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, ClassVar

from analyzer.model.formatting import cut, iso, printable
from analyzer.model.records import JsonForm, json_record

# A name in an incident's one-line place (an app, API key or model from a log) is cut beyond this.
PLACE_PART = 60
# What an incident is attributed to: the most common value among its wasted calls, decided
# once when it is recorded (``sql/attribute.sql``) and read by every view.
ATTRIBUTION = ("app", "api_key", "model", "project", "machine", "labels")
# The columns a detector's query returns, in order (queries/README.md).
OUTPUT_COLUMNS = (
    "stream_key",
    "session_id",
    "start_ts",
    "end_ts",
    "n_calls",
    "first_call_id",
    "last_call_id",
    "wasted_usd",
    "wasted_tokens",
    "cost_basis",
    "summary",
    "evidence",
)
# The columns of the incidents table, in its order (sql/schema.sql).
COLUMNS = ("incident_id", "detector", "severity", *OUTPUT_COLUMNS, *ATTRIBUTION)


def labels_of(text: str | None) -> dict[str, str] | None:
    """Labels stored as JSON text (``calls.labels``) as an object (None when there are none,
    or when the text is not an object of labels)."""
    if not text:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else None


def labels_said(text: str | None) -> str | None:
    """Labels in words: ``team.id=platform, user.email=ana@example.com``.

    >>> labels_said('{"team.id":"platform","user.id":"7"}')
    'team.id=platform, user.id=7'
    """
    found = labels_of(text)
    return ", ".join(f"{k}={v}" for k, v in found.items()) if found else None


@dataclass(frozen=True)
class Incident:
    JSON_FORM: ClassVar[JsonForm] = JsonForm(
        first=("number",), convert={"start_ts": iso, "end_ts": iso, "labels": labels_of}
    )

    incident_id: str
    detector: str
    severity: str
    stream_key: str | None
    session_id: str | None
    start_ts: datetime | None  # UTC
    end_ts: datetime | None
    n_calls: int
    first_call_id: str | None
    last_call_id: str | None
    wasted_usd: Decimal  # exact
    wasted_tokens: int | None
    cost_basis: str | None
    summary: str
    evidence: dict[str, Any] | None = None  # what a person needs to believe it
    # Whose calls it is made of: the most common value among its wasted calls (a tie to the
    # value that wasted more dollars, then to the first name), else its first call's.
    app: str | None = None
    api_key: str | None = None
    model: str | None = None
    project: str | None = None
    machine: str | None = None  # the machine whose logs hold them (``ingest --machine``)
    labels: str | None = None  # their labels (``calls.labels``: JSON text), as the above
    number: int | None = None  # its short id (``show N``), kept while it is found again

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Incident:
        """An incident from a row of the incidents table (its columns in ``COLUMNS`` order,
        then optionally its number)."""
        rec = dict(zip(COLUMNS, row[: len(COLUMNS)], strict=True))
        rec["number"] = int(row[len(COLUMNS)]) if len(row) > len(COLUMNS) and row[-1] else None
        evidence = rec["evidence"]
        if isinstance(evidence, str):
            evidence = json.loads(evidence) if evidence else None
        rec.update(
            n_calls=int(rec["n_calls"] or 0),
            wasted_usd=Decimal(rec["wasted_usd"] or 0),
            wasted_tokens=None if rec["wasted_tokens"] is None else int(rec["wasted_tokens"]),
            summary=rec["summary"] or "",
            evidence=evidence if isinstance(evidence, dict | None) else {"value": evidence},
        )
        return cls(**rec)

    def place(self) -> str:
        """Whose calls it is, in one line: its app (else its project), API key and model,
        each cut at ``PLACE_PART`` characters; empty for an incident of no call.

        >>> Incident("i", "d", "low", None, None, None, None, 0, "c1", "c1", Decimal(0), None,
        ...          None, "", app="App A", api_key="key-a", model="m").place()
        'App A · key-a · m'
        """
        parts = [self.app or self.project, self.api_key, self.model]
        if not any(parts) and self.first_call_id is None:
            return ""
        shown = [cut(printable(p), PLACE_PART) for p in parts if p]
        return " · ".join(shown) or "(no app, key or model)"

    def to_json(self) -> dict[str, Any]:
        """As ``audit --json`` and ``detect --json`` print it: its number first, ISO times,
        dollars exact (a ``Decimal``, which ``formatting.json_text`` writes as a number with
        all its digits)."""
        return json_record(self)
