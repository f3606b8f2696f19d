"""Every file of ../shared/samples/real-loops (real runs with loops, recorded and labelled by
others; read in place) is read, and its figures are truth.json's: calls, prompt and output
tokens, and dollars equal to the file's own stated cost wherever it states one, with a cost
basis everywhere else. (Each format's own test holds the details.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli import cli
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from analyzer.store import Store, open_store
from tests.helpers import assert_accounted, q, shared_samples

CENT = Decimal("0.005")


def corpus() -> Path:
    return shared_samples() / "real-loops"


def truth() -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = json.loads((corpus() / "truth.json").read_text())["files"]
    return files


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, dict[str, Any]]]:
    with open_store(tmp_path_factory.mktemp("loops") / "l.duckdb") as store:
        reports = ingest_paths(store, [str(corpus())], IngestOptions(progress=False))
        yield store, {str(Path(r.path).relative_to(corpus())): r for r in reports}


def test_every_labelled_file_is_read(loaded: tuple[Store, dict[str, Any]]) -> None:
    store, reports = loaded
    assert set(truth()) <= set(reports)
    for rel in truth():
        r = reports[rel]
        assert (r.status, r.rows_rejected) == ("loaded", 0), (rel, r)
    # Beside them only the corpus's own notes, scripts and truth, which are no agent's logs.
    others = {rel: r.status for rel, r in reports.items() if rel not in truth()}
    assert others == {
        "README.md": "unrecognised",
        "truth.json": "unrecognised",
        "truth.py": "unrecognised",
        "truth_second_set.py": "unrecognised",
    }
    assert_accounted(store)


def _source(store: Store, reports: dict[str, Any], rel: str) -> int:
    sid = reports[rel].source_id
    assert sid is not None, rel
    return int(sid)


@pytest.mark.parametrize("rel", sorted(truth()))
def test_calls_and_tokens_equal_the_truth(loaded: tuple[Store, dict[str, Any]], rel: str) -> None:
    store, reports = loaded
    want = truth()[rel]
    sid = _source(store, reports, rel)
    [(calls, prompt, output, with_tokens)] = q(
        store,
        """SELECT count(*), sum(input_tokens), sum(output_tokens), count(input_tokens)
           FROM calls WHERE source_id = ?""",
        [sid],
    )
    [(run_prompt, run_output)] = q(
        store,
        "SELECT sum(reported_input_tokens), sum(reported_output_tokens) FROM runs "
        "WHERE source_id = ?",
        [sid],
    )
    if want.get("calls") is not None:
        # The Claude Code CLI's own <synthetic> replies are no model calls (kept as messages).
        assert calls == want["calls"] - want.get("synthetic_calls", 0), rel
    else:  # a stream with no usage per call: its calls are inferred, one per model response
        assert calls > 0
    if want.get("prompt_tokens") is None and "final_stats" not in want:
        assert with_tokens == 0 and run_prompt is None  # the log states no tokens at all
    elif with_tokens:  # tokens per call
        assert (prompt, output) == (want["prompt_tokens"], want["output_tokens"]), rel
    else:  # the run's stated totals only (SWE-agent, Gemini CLI's stream)
        stats = want.get("final_stats") or {}
        assert (run_prompt, run_output) == (
            want.get("prompt_tokens", stats.get("input_tokens")),
            want.get("output_tokens", stats.get("output_tokens")),
        ), rel


@pytest.mark.parametrize("rel", sorted(truth()))
def test_dollars_are_the_files_own_or_carry_a_basis(
    loaded: tuple[Store, dict[str, Any]], rel: str
) -> None:
    store, reports = loaded
    want = truth()[rel]
    sid = _source(store, reports, rel)
    stated = want.get("reported_cost_usd")
    if stated:  # the file states its cost (0 is what an agent writes when it could not price)
        [(usd,)] = q(
            store,
            """SELECT sum(c.cost_usd) FROM calls c
               WHERE c.source_id = $s
                 AND (NOT EXISTS (SELECT 1 FROM runs r WHERE r.source_id = $s)
                      OR c.session_id IN (SELECT session_id FROM runs WHERE source_id = $s
                                          AND reported_cost_usd IS NOT NULL))""",
            {"s": sid},
        )
        assert abs(usd - Decimal(str(stated))) < CENT, (rel, usd, stated)
    # Every call carries a basis, but where its log gives neither tokens nor a cost for it or
    # its run (a run cut off before its totals).
    bare = q(
        store,
        """SELECT count(*) FROM calls c
           WHERE c.source_id = $s AND c.cost_basis IS NULL
             AND NOT (c.input_tokens IS NULL AND c.output_tokens IS NULL
                      AND c.session_id IN (SELECT session_id FROM runs
                                           WHERE source_id = $s
                                             AND reported_cost_usd IS NULL
                                             AND cost_estimate_usd IS NULL))""",
        {"s": sid},
    )
    assert bare == [(0,)], rel


@pytest.mark.parametrize("rel", sorted(truth()))
def test_each_run_keeps_what_its_log_says_of_its_end(
    loaded: tuple[Store, dict[str, Any]], rel: str
) -> None:
    store, reports = loaded
    want = truth()[rel]
    sid = _source(store, reports, rel)
    runs = q(store, "SELECT exit_status, is_error FROM runs WHERE source_id = ?", [sid])
    if "exit_status" in want:  # mini-swe-agent and SWE-agent
        assert [s for s, _ in runs] == [want["exit_status"]], rel
    if "result_lines" in want:  # Claude Code's stream: each run's result line
        errors = sum(1 for r in want["result_lines"] if r["is_error"])
        assert sum(1 for _, e in runs if e) == errors
    if "instances" in want:  # OpenHands: each instance's error
        assert sorted(s or "" for s, _ in runs) == sorted(
            i["error"] or "" for i in want["instances"]
        )


def test_audit_reads_the_corpus_and_says_what_it_did_not(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["audit", str(corpus()), "--json"])
    # The corpus's own truth.json is JSON no reader recognises: the one input not read.
    assert result.exit_code == 4, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        f"exit 4: 1 file not read ({corpus() / 'truth.json'})"
    )
    data = json.loads(result.stdout)
    assert data["calls"] > 0 and data["rejects"] == 0
    assert set(data["runs_by_outcome"]) >= {"completed", "step_limit", "error"}
