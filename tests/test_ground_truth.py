"""The replay's ground truth (analyzer/sql/detect/truth*.sql): which incidents a guard should
stop, which are one event, and how a user's labels change them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analyzer.engine.store import Store, open_store
from analyzer.guards.replay import Replay
from tests.helpers import fill_calls, insert


def _incident(incident_id: str, severity: str, calls: list[str]) -> dict[str, Any]:
    return {
        "incident_id": incident_id,
        "detector": "d",
        "severity": severity,
        "stream_key": "s",
        "first_call_id": calls[0],
        "last_call_id": calls[-1],
    }


# incident: (severity, its wasted calls)
INCIDENTS = {
    "high_a": ("high", ["c1", "c2"]),
    "high_b": ("high", ["c2"]),  # shares c2 with high_a: one event with it
    "low": ("low", ["c3"]),  # not ground truth by its severity
    "medium": ("medium", ["c4", "c5"]),
    "high_c": ("high", ["c6"]),
}


def _store() -> Store:
    store = open_store(":memory:")
    insert(store, "calls", fill_calls([{"cost_usd": 1.0} for _ in range(8)]))
    insert(store, "incidents", [_incident(i, s, c) for i, (s, c) in INCIDENTS.items()])
    rows = [{"incident_id": i, "call_id": c} for i, (_, calls) in INCIDENTS.items() for c in calls]
    insert(store, "incident_calls", rows)
    return store


def _truth(store: Store) -> dict[str, str]:
    return dict(store.engine.rows("SELECT incident_id, event_id FROM lf_truth"))


def test_medium_and_high_incidents_sharing_calls_are_one_event() -> None:
    with _store() as store:
        Replay(store)
        assert _truth(store) == {
            "high_a": "high_a",
            "high_b": "high_a",  # the least id of the event
            "medium": "medium",
            "high_c": "high_c",
        }
        assert store.engine.scalar("SELECT count(*) FROM lf_waste") == 5  # c1, c2, c4, c5, c6


def test_labels_add_runaways_and_remove_what_is_legitimate(tmp_path: Path) -> None:
    labels = tmp_path / "labels.csv"
    # low: a runaway whatever its severity; high_c: legitimate; c5: a legitimate call, so its
    # incident (medium) is not ground truth; c8: a runaway call in no incident.
    labels.write_text("id,label\nlow,runaway\nhigh_c,legitimate\nc5,legitimate\nc8,runaway\n")
    with _store() as store:
        Replay(store, labels=labels)
        assert _truth(store) == {
            "high_a": "high_a",
            "high_b": "high_a",
            "low": "low",
            "label:s": "label:s",
        }
        calls = store.engine.rows(
            "SELECT incident_id, call_id FROM lf_truth_calls ORDER BY incident_id, call_id"
        )
        assert calls == [
            ("high_a", "c1"),
            ("high_a", "c2"),
            ("high_b", "c2"),
            ("label:s", "c8"),
            ("low", "c3"),
        ]
        # the labels' own table lived only while they were applied
        assert ("TABLE", "lf_labels") not in store.engine.temporaries()
