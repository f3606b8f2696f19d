"""Claude Code's placeholder output counts, on the real files and in the shapes of each version.

Before 2.1.97 Claude Code writes a response as one line per content block, each with the usage
of the start of the stream: ``output_tokens`` is a placeholder and ``stop_reason`` null (every
real file of 2.0.14-2.1.39 in ../shared/samples/real-world). From 2.1.87 the last line of most
calls carries the final count with its ``stop_reason`` (the 2.1.90 file in real-loops); from
2.1.97 every line does. What a call's lines show decides, call by call, here checked against
the raw files read independently of the loader.
"""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from analyzer.detect.detectors import detect, select
from analyzer.engine.store import Store, open_store
from analyzer.ingest.content import args_text
from analyzer.ingest.output_estimate import OutputTally, estimate_tokens
from analyzer.model.pricing import tier_prices
from tests.helpers import q, shared_samples
from tests.test_claude_code import SESSION, assistant, ingest, user, write


def raw_calls(path: Path) -> dict[str, dict[str, Any]]:
    """Each call of a transcript as its lines show it: whether one says how it stopped, the
    largest output count, and whether its thinking is only a signature."""
    calls: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"stopped": False, "out": 0, "redacted": False, "tools": 0, "version": None}
    )
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or obj.get("type") != "assistant":
            continue
        msg = obj.get("message")
        if not isinstance(msg, dict) or not isinstance(msg.get("id"), str):
            continue
        request = obj.get("requestId") or ""
        c = calls[f"{msg['id']}:{request}" if request else msg["id"]]
        c["version"] = obj.get("version")
        c["stopped"] |= bool(msg.get("stop_reason"))
        c["out"] = max(c["out"], (msg.get("usage") or {}).get("output_tokens") or 0)
        for b in msg.get("content") if isinstance(msg.get("content"), list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_use":
                c["tools"] += 1
            if isinstance(b, dict) and (
                b.get("type") == "redacted_thinking"
                or (b.get("type") == "thinking" and not b.get("thinking") and b.get("signature"))
            ):
                c["redacted"] = True
    return calls


def folders() -> list[Path]:
    samples = shared_samples()
    return [samples / "real-world" / "claude_code", samples / "real-loops" / "claude_code"]


def on_disk(stored_path: str) -> Path:
    """A stored path (named from the folder given) back to its file."""
    [found] = [f.parent / stored_path for f in folders() if (f.parent / stored_path).is_file()]
    return found


@pytest.fixture(scope="module")
def real_cc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("placeholders") / "cc.duckdb"
    result = CliRunner().invoke(cli, ["ingest", "--db", str(db), *map(str, folders())])
    assert result.exit_code == 0, result.output
    return db


def stored(db: Path) -> dict[tuple[str, str], tuple[Any, ...]]:
    with open_store(db, read_only=True) as store:
        found = q(
            store,
            """SELECT s.path, c.native_id, c.output_final, c.output_tokens,
                      c.output_estimate_tokens, c.output_estimate_floor, c.cost_basis,
                      c.cost_usd, c.cost_logged_usd, c.cost_estimate_usd, c.model,
                      c.ts::DATE, c.input_tokens, c.tool_call_count
               FROM calls c JOIN sources s USING (source_id)""",
        )
    return {(str(r[0]), str(r[1])): r[2:] for r in found}


def test_each_real_call_is_final_or_a_placeholder_as_its_own_lines_show(real_cc: Path) -> None:
    calls = stored(real_cc)
    paths = {p for p, _ in calls}
    seen = {"final": 0, "placeholder": 0, "floor": 0}
    for path in paths:
        for native, raw in raw_calls(on_disk(path)).items():
            if (path, native) not in calls:
                continue  # a replayed sidechain call, counted once elsewhere
            final, logged, estimate, floor, basis, *_ = calls[path, native]
            assert final == raw["stopped"], (path, native)
            assert logged == raw["out"]  # the logged figure is kept as it is
            if final:
                seen["final"] += 1
                assert estimate is None and basis == "estimated"
            else:
                seen["placeholder"] += 1
                assert basis == "estimated_output" and estimate >= logged
                assert estimate >= 48 * raw["tools"]  # each tool call's framing at least
                assert floor == raw["redacted"]  # a lower bound where thinking is hidden
                seen["floor"] += bool(floor)
    # Every call of the real-world files (2.0.14-2.1.39) is a placeholder but the
    # hand-written ones; the 2.1.90 file has 33 final calls of 36.
    assert seen == {"final": 41, "placeholder": 683, "floor": 1}


def test_the_real_files_show_the_facts_the_issue_states(real_cc: Path) -> None:
    """A sub-agent's call that wrote five or six tool calls logs 1-3 output tokens; a
    compaction summary of 15,848 characters logs 1. Their estimates are of what they wrote."""
    calls = stored(real_cc).values()
    busy = [c for c in calls if not c[0] and c[11] >= 5 and c[1] <= 3]
    assert busy and all(c[2] >= 400 for c in busy)
    with open_store(real_cc, read_only=True) as store:
        [(logged, estimate)] = q(
            store,
            """SELECT output_tokens, output_estimate_tokens FROM calls
               WHERE content_chars = 15848 AND NOT output_final""",
        )
    assert (logged, estimate) == (1, 4953)  # ceil(15,848 / 3.2)


def test_a_placeholder_call_is_priced_at_its_estimate_and_keeps_its_logged_price(
    real_cc: Path,
) -> None:
    """cost_usd - cost_logged_usd is exactly the estimated extra output at the model's output
    price (looked up here from the price data, not from the store)."""
    checked = 0
    for final, logged, estimate, _, basis, usd, at_logged, est, model, day, inp, _ in stored(
        real_cc
    ).values():
        if final or usd is None:
            continue
        assert basis == "estimated_output" and usd == est
        tiers = tier_prices(str(model), "anthropic", day)
        assert tiers is not None
        [tier] = [t for t in tiers if inp > t.above and (t.upto is None or inp <= t.upto)]
        assert usd - at_logged == pytest.approx(
            Decimal(estimate - logged) * tier.output, abs=Decimal("1e-9")
        )
        checked += 1
    assert checked == 683


def test_no_detector_reads_a_placeholder_and_the_estimate_tells_the_totals(real_cc: Path) -> None:
    result = CliRunner().invoke(
        cli, ["audit", "--db", str(real_cc), *map(str, folders()), "--json", "-q"]
    )
    assert result.exit_code == 0, result.output
    audit = json.loads(result.stdout)
    assert {i["detector"] for i in audit["incidents"]} <= {"session_cost_outlier"}
    ph = audit["placeholder_output"]
    assert ph["calls"] == 683 and ph["lower_bound_calls"] == 1
    assert ph["output_tokens_estimated"] > ph["output_tokens_logged"]
    assert ph["usd_at_estimated_output"] > ph["usd_at_logged_output"]
    # one figure: the same as the usage views say
    usage = CliRunner().invoke(cli, ["usage", "session", "--db", str(real_cc), "--json"])
    assert json.loads(usage.stdout)["totals"]["placeholder_output"] == ph


def test_the_estimator_against_the_final_counts_of_a_real_transcript() -> None:
    """The figures output_estimate's docstring quotes: on the 2.1.90 file's final counts with
    all their content visible, the estimates add up to 0.98 of the final counts."""
    [path] = (shared_samples() / "real-loops" / "claude_code").rglob("*.jsonl")
    tallies: dict[str, tuple[OutputTally, int, bool]] = {}
    for text in path.read_text(encoding="utf-8").splitlines():
        obj = json.loads(text)
        if obj.get("type") != "assistant":
            continue
        msg = obj["message"]
        t, out, stopped = tallies.get(msg["id"], (OutputTally(), 0, False))
        for b in msg["content"]:
            if b["type"] == "text":
                t.text_chars += len(b["text"])
            elif b["type"] == "tool_use":
                t.add_args(b["name"], args_text(b["input"]))
            elif b["type"] == "thinking":
                t.add_thinking(b)
        stopped = stopped or bool(msg.get("stop_reason"))
        tallies[msg["id"]] = (t, max(out, msg["usage"]["output_tokens"]), stopped)
    pairs = [
        (estimate_tokens(t), out)
        for t, out, stopped in tallies.values()
        if stopped and not t.redacted
    ]
    assert len(pairs) == 27
    ratio = sum(e for e, _ in pairs) / sum(o for _, o in pairs)
    assert 0.95 < ratio < 1.0
    hidden = [
        (estimate_tokens(t), out) for t, out, stopped in tallies.values() if stopped and t.redacted
    ]
    assert max(out - e for e, out in hidden) > 1000  # why a redacted estimate is a lower bound


# -- the shapes of each version, written here --------------------------------------------------

PROMPT = "Check the build"


def tiny_replies(version: str, stop: str | None) -> list[dict[str, Any]]:
    """Six calls re-sending the same prompt, each answering three tokens ("ok")."""
    lines: list[dict[str, Any]] = [user(1, PROMPT, version=version)]
    for i in range(6):
        lines.append(
            assistant(
                2 + i,
                f"msg_{i}",
                f"req_{i}",
                {"type": "text", "text": "ok"},
                3,
                stop=stop,
                version=version,
            )
        )
    return lines


@pytest.mark.parametrize(
    ("version", "stop", "final"),
    [
        ("2.1.39", None, False),  # placeholders: not evidence of anything
        ("2.1.90", "end_turn", True),  # the line that says how it stopped carries the count
        ("2.1.101", None, True),  # 2.1.97+: every line carries the final count
    ],
)
def test_the_low_output_detector_reads_final_counts_only(
    store: Store, tmp_path: Path, version: str, stop: str | None, final: bool
) -> None:
    ingest(store, write(tmp_path / f"{SESSION}.jsonl", tiny_replies(version, stop)))
    assert q(store, "SELECT DISTINCT output_final FROM calls") == [(final,)]
    assert q(store, "SELECT DISTINCT cost_basis FROM calls") == [
        ("estimated" if final else "estimated_output",)
    ]
    found = detect(store, select(only=["constant_input_low_output"]))
    assert [i.n_calls for i in found] == ([6] if final else [])
