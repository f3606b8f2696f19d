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

from analyzer.cli.main import cli
from analyzer.engine.store import Store, open_store
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from tests.helpers import assert_accounted, q, shared_samples, truth_at_collection

CENT = Decimal("0.005")


def corpus() -> Path:
    return shared_samples() / "real-loops"


# The files, as the tests are collected (none without ../shared: see truth_at_collection).
COLLECTED = truth_at_collection("real-loops")


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


@pytest.mark.parametrize("rel", sorted(COLLECTED))
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
        # The Claude Code CLI's own <synthetic> replies are calls too (priced $0).
        assert calls == want["calls"], rel
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


@pytest.mark.parametrize("rel", sorted(COLLECTED))
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


@pytest.mark.parametrize("rel", sorted(COLLECTED))
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


# --- the loops found in them -----------------------------------------------------------------


def _truth_runs(want: dict[str, Any]) -> list[tuple[int, int]]:
    """The labelled loop's runs of calls (first, last; 1-based), as truth.json states them:
    of 4 or more (a run of 3 is what the agents tolerate; a healthy run in the corpus has one)."""
    for field in ("format_error_runs_ge3", "same_result_runs_ge3", "identical_action_runs_ge3"):
        runs = [(r[0], r[0] + r[1] - 1) for r in want.get(field) or [] if r[1] >= 4]
        if runs:
            return runs
    return []


@pytest.fixture(scope="module")
def found(loaded: tuple[Store, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The incidents of each file: detector, severity, first and last call's place, waste."""
    from analyzer.detect.detectors import bind_all, detect, discover

    store, reports = loaded
    detect(store, bind_all(discover(), {}))
    rows = q(
        store,
        """SELECT c.source_id, i.detector, i.severity, f.seq, l.seq, i.wasted_usd, i.cost_basis,
                  i.evidence, (SELECT sum(x.cost_usd) FROM incident_calls w
                               JOIN calls x ON x.call_id = w.call_id
                               WHERE w.incident_id = i.incident_id)
           FROM incidents i
           JOIN calls c ON c.call_id = i.first_call_id
           LEFT JOIN calls f ON f.call_id = i.first_call_id
           LEFT JOIN calls l ON l.call_id = i.last_call_id""",
    )
    by_source: dict[int, list[dict[str, Any]]] = {}
    for sid, det, sev, first, last, usd, basis, evidence, calls_usd in rows:
        by_source.setdefault(int(sid), []).append(
            {
                "detector": det,
                "severity": sev,
                "first": first,
                "last": last,
                "usd": usd,
                "basis": basis,
                "evidence": json.loads(evidence),
                "calls_usd": calls_usd,
            }
        )
    return {rel: by_source.get(_source(store, reports, rel), []) for rel in truth()}


LOOPS = sorted(rel for rel, t in COLLECTED.items() if t["label"].get("loop") is True)
HEALTHY = sorted(rel for rel, t in COLLECTED.items() if t["label"].get("loop") is False)


@pytest.mark.parametrize("rel", LOOPS)
def test_every_labelled_loop_is_found_where_it_is(
    found: dict[str, list[dict[str, Any]]], rel: str
) -> None:
    want = truth()[rel]
    mine = [i for i in found[rel] if i["severity"] in ("medium", "high")]
    assert mine, rel
    for i in mine:  # priced: its waste is its wasted calls' dollars, with their basis
        assert i["usd"] == (i["calls_usd"] or 0), (rel, i)
        assert i["basis"] or not i["usd"], (rel, i)
    if "consecutive_error_run_streaks_ge3" in want:  # relaunches: a range of runs
        [[start, length]] = want["consecutive_error_run_streaks_ge3"]
        [storm] = [i for i in mine if i["detector"] == "relaunch_same_failure"]
        got = (storm["evidence"]["first_run"], storm["evidence"]["last_run"])
        assert got == (start, start + length - 1)
        return
    runs = _truth_runs(want)
    assert runs, rel
    for first, last in runs:
        near = [i for i in mine if abs(i["first"] - first) <= 1 and abs(i["last"] - last) <= 1]
        assert near, (rel, (first, last), [(i["detector"], i["first"], i["last"]) for i in mine])


@pytest.mark.parametrize("rel", HEALTHY)
def test_no_waste_on_healthy_runs(found: dict[str, list[dict[str, Any]]], rel: str) -> None:
    assert [i for i in found[rel] if i["usd"]] == [], rel


def test_the_agents_own_guards_replayed_on_them(
    loaded: tuple[Store, dict[str, Any]], found: dict[str, list[dict[str, Any]]]
) -> None:
    """Which of the real agents' guards would have stopped what these runs had."""
    from analyzer.guards.backtest import guard_run
    from analyzer.guards.policy import all_policies

    store, _ = loaded
    names = {
        "mini_swe_agent_format_errors",
        "swe_agent_requeries",
        "openhands_action_observation",
        "gemini_repeat_tool",
        "opencode_doom_loop",
        "cline_mistakes",
    }
    results = {
        r.policy: r
        for r in guard_run(store, [p for p in all_policies() if p.name in names]).results
    }
    mini = results["mini_swe_agent_format_errors"]
    assert mini.incidents_stopped == mini.incidents_total == 7  # every format-error loop
    # ... and its one false trip is the hard negative's run of 3 refusals, on which it worked on
    [trip] = [t for t in mini.trips if t.incident_id is None]
    assert trip.session_id.startswith("sphinx-doc__sphinx-7985@")
    assert results["swe_agent_requeries"].false_trips == 0
    # The idle loop (79 x `true`) is stopped by each identical-call guard.
    for name in ("openhands_action_observation", "gemini_repeat_tool", "opencode_doom_loop"):
        stopped = {s["incident_id"] for s in results[name].stopped}
        assert len(stopped) >= 1, name
    assert results["cline_mistakes"].incidents_stopped >= 12
