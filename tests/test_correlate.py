"""Billing <-> log reconciliation: matched, and unmatched on each side."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from analyzer.detect.link import reconciliation
from analyzer.engine.store import Store
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from analyzer.views.audit import build_summary
from tests.helpers import or_row, write_csv


def bill(i: int, ts: str, prompt: int, out: int, cost: str, **kw: Any) -> dict[str, object]:
    return or_row(
        i,
        created_at=f"2025-12-09 {ts}",
        tokens_prompt=str(prompt),
        tokens_completion=str(out),
        cost_total=cost,
        model_permaslug="openai/gpt-5-mini",
        api_key_name="ops-key",
        app_name="Ops Bot",
        **kw,
    )


def said(ts: str, prompt: int, out: int, **kw: Any) -> dict[str, Any]:
    usage = {"prompt_tokens": prompt, "completion_tokens": out}
    return {
        "role": "assistant",
        "content": "ok",
        "model": "gpt-5-mini",
        "timestamp": f"2025-12-09T{ts}Z",
        "usage": usage,
        **kw,
    }


def load(
    store: Store, tmp_path: Path, bills: list, messages: list, logs_first: bool = False
) -> None:
    csv = write_csv(tmp_path / "bill.csv", bills)
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps({"id": "conv", "messages": messages}))
    order = [conv, csv] if logs_first else [csv, conv]
    for f in order:  # one at a time: linking must work whichever arrives first
        ingest_paths(store, [str(f)], IngestOptions())


def links(store: Store) -> list[tuple]:
    return store.con.execute(
        """SELECT l.native_id, b.native_id, l.cost_usd, l.cost_basis, l.app, l.api_key
           FROM calls l JOIN calls b ON b.call_id = l.billing_call_id
           WHERE b.superseded_by = l.call_id ORDER BY l.seq"""
    ).fetchall()


def test_matching_by_time_model_and_tokens(store: Store, tmp_path: Path) -> None:
    bills = [
        bill(0, "10:00:00.400", 1000, 50, "0.0101"),
        bill(1, "10:00:30.000", 1100, 60, "0.0202"),
        bill(2, "10:01:00.000", 1200, 70, "0.0303"),  # no log: a request the agent did not keep
    ]
    messages = [
        said("10:00:01.500", 1000, 50),  # 1.1 s after the bill: same call
        said("10:00:30.000", 1100, 61),  # output differs: a different call
        said("10:00:40.000", 5000, 10),  # nothing billed near it
    ]
    load(store, tmp_path, bills, messages)
    assert links(store) == [
        ("conv:1", bills[0]["generation_id"], Decimal("0.0101"), "billed", "Ops Bot", "ops-key")
    ]
    rec = reconciliation(store)
    assert rec is not None
    assert rec.to_dict() == {
        "billing_rows": 3,
        "log_calls": 3,
        "matched": 1,
        "log_calls_unmatched": 2,
        "billing_rows_unmatched": 2,
    }
    summary = build_summary(store)
    assert summary.calls == 5  # 3 billed + 3 logged - 1 counted twice
    assert summary.usd_by_basis["billed"] == Decimal("0.0606")


def test_unmatched_bills_are_counted_near_a_logged_session_of_their_model(
    store: Store, tmp_path: Path
) -> None:
    """A bill counts as "should have matched" only within 300 s of a logged session of the same
    model, however the model is written (the bill's vendor prefix, the log's bare name)."""
    bills = [
        bill(0, "10:00:00.000", 1000, 50, "0.01"),  # matched by the log
        bill(1, "10:04:59.000", 900, 10, "0.01"),  # 299 s after the session: unmatched
        bill(2, "10:05:01.000", 900, 10, "0.01"),  # 301 s after: not near the logs
        bill(3, "09:55:00.000", 900, 10, "0.01"),  # 300 s before: unmatched
        bill(4, "10:00:30.000", 900, 10, "0.01"),  # another model: not its logs
    ]
    bills[4]["model_permaslug"] = "anthropic/claude-opus-4.5"
    load(store, tmp_path, bills, [said("10:00:00.000", 1000, 50)])
    rec = reconciliation(store)
    assert rec is not None
    assert rec.matched == 1
    assert rec.billing_rows_unmatched == 2  # bills 1 and 3


@pytest.mark.parametrize(
    ("bill_at", "linked"),
    [
        ("10:00:02.000", True),
        ("09:59:58.000", True),
        ("10:00:02.001", False),
        ("09:59:57.999", False),
        ("10:00:01.999", True),
    ],
)
def test_the_time_window_is_two_seconds_each_way(
    store: Store, tmp_path: Path, bill_at: str, linked: bool
) -> None:
    """Bills are found by buckets of the window's width: a bill at the window's very edge, in
    the bucket beside the log's, is still linked, and one a millisecond beyond is not."""
    load(store, tmp_path, [bill(0, bill_at, 1000, 50, "0.01")], [said("10:00:00.000", 1000, 50)])
    assert len(links(store)) == (1 if linked else 0)


def test_logs_hours_apart_are_each_linked(store: Store, tmp_path: Path) -> None:
    bills = [bill(0, "01:00:00.500", 1000, 50, "0.01"), bill(1, "23:00:00.500", 2000, 60, "0.02")]
    messages = [said("01:00:00.000", 1000, 50), said("23:00:00.000", 2000, 60)]
    load(store, tmp_path, bills, messages)
    assert [(r[0], r[2]) for r in links(store)] == [
        ("conv:1", Decimal("0.01")),
        ("conv:2", Decimal("0.02")),
    ]


def test_linking_works_when_logs_arrive_first(store: Store, tmp_path: Path) -> None:
    load(
        store,
        tmp_path,
        [bill(0, "10:00:00.000", 1000, 50, "0.01")],
        [said("10:00:00.000", 1000, 50)],
        logs_first=True,
    )
    assert len(links(store)) == 1


def test_matching_by_generation_id_ignores_the_clock(store: Store, tmp_path: Path) -> None:
    b = bill(0, "10:00:00.000", 1000, 50, "0.01")
    load(store, tmp_path, [b], [said("10:00:09.000", 999, 49, id=b["generation_id"])])
    assert [r[1] for r in links(store)] == [b["generation_id"]]


def test_each_side_is_linked_once_nearest_first(store: Store, tmp_path: Path) -> None:
    bills = [bill(0, "10:00:00.000", 1000, 50, "0.01"), bill(1, "10:00:01.000", 1000, 50, "0.02")]
    messages = [said("10:00:00.900", 1000, 50), said("10:00:01.100", 1000, 50)]
    load(store, tmp_path, bills, messages)
    # Both logged calls are nearest to the second bill; the first wins it (tie broken by id),
    # and the other takes its next candidate.
    assert [(r[0], r[2]) for r in links(store)] == [
        ("conv:1", Decimal("0.02")),
        ("conv:2", Decimal("0.01")),
    ]
    used = store.con.execute(
        "SELECT count(billing_call_id), count(DISTINCT billing_call_id) FROM calls"
    ).fetchall()
    assert used[0][0] == used[0][1]


def test_unsaved_penguin_replies_take_the_billed_tokens(store: Store, tmp_path: Path) -> None:
    csv = write_csv(
        tmp_path / "bill.csv",
        [
            or_row(
                0,
                created_at="2025-12-13 06:12:58.000",
                tokens_prompt="56065",
                tokens_completion="3",
                cost_total="0.28",
                model_permaslug="anthropic/claude-opus-4.5",
            )
        ],
    )
    session = {
        "id": "s1",
        "messages": [{"role": "user", "content": "go", "category": "DIALOG"}],
        "llm_request_lifecycles": [
            {
                "request_id": "r1",
                "model": "anthropic/claude-opus-4.5",
                "finish_reason": "stop",
                "started_at": 1765606378.0,
                "ended_at": 1765606379.5,
            }
        ],
    }
    conv = tmp_path / "s1.json"
    conv.write_text(json.dumps(session))
    ingest_paths(store, [str(csv), str(conv)], IngestOptions())
    got = store.con.execute(
        """SELECT reply_saved, input_tokens, output_tokens, cost_usd, response_kind
           FROM calls WHERE format = 'conversation_json'"""
    ).fetchall()
    assert got == [(False, 56065, 3, Decimal("0.28"), "text")]
