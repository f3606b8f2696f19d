"""The real public transcripts in ../shared/samples: every one loads, with no rejects, and with
the number of calls it really holds. They contain no loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.engine.store import Store
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from tests.helpers import shared_samples

EXPECTED = {  # file: (format, calls)
    "marot__spotter__agent-afc096d.jsonl": ("claude_code", 18),  # 199 lines
    "marot__spotter__agent-acompact-e1f845.jsonl": ("claude_code", 1),
    "oneryalcin__fasthooks__sample_main_transcript.jsonl": ("claude_code", 12),
    "jnarowski__agentcmd__full-session-four.jsonl": ("claude_code", 30),
    "pypi-data__pypi-mirror-400__fasthooks-0.1.4__sample_agent_sidechain.jsonl": (
        "claude_code",
        1,
    ),
    "jnarowski__agentcmd__rollout-2025-09-25T15-12-14-019982b8-3422-79e0-8b3b-05abaf4f3c3e.jsonl": (
        "codex",
        35,
    ),
    "ryoppippi__ccusage__2026-05-12T08-00-00-parent.jsonl": ("codex", 1),
}


@pytest.fixture(scope="module")
def samples() -> Path:
    return shared_samples()


def test_every_sample_loads_with_its_real_call_count(samples: Path, store: Store) -> None:
    # The files at the top of ../shared/samples (real-world/ has its own tests, and
    # more-formats/ holds formats still to support).
    files = sorted(str(p) for p in samples.glob("*.jsonl"))
    reports = ingest_paths(store, files, IngestOptions())
    by_name = {Path(r.path).name: r for r in reports}
    assert set(EXPECTED) <= set(by_name)
    for name, (fmt, n_calls) in EXPECTED.items():
        r = by_name[name]
        assert (r.format, r.status, r.rows_rejected) == (fmt, "loaded", 0), name
        assert r.rows_read == r.rows_loaded + r.rows_duplicate + r.rows_skipped, name
        calls = store.con.execute(
            "SELECT count(*) FROM calls WHERE source_id = ?", [r.source_id]
        ).fetchall()[0][0]
        assert calls == n_calls, name
    assert store.con.execute("SELECT count(*) FROM rejects").fetchall() == [(0,)]


def test_claude_code_output_counts_are_marked_unfinished(samples: Path, store: Store) -> None:
    ingest_paths(store, [str(samples / "marot__spotter__agent-afc096d.jsonl")], IngestOptions())
    got = store.con.execute(
        "SELECT count(*), max(output_tokens), bool_or(output_final) FROM calls"
    ).fetchall()
    # 18 calls whose output never exceeds 4 tokens: snapshots, not a loop signal.
    assert got == [(18, 4, False)]
