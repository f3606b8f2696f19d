"""A call's identity from what it is, never from where its file sits or its line number alone
(issue 45, causes 1-4): two runs of one task in two output folders, two saved conversations of
one name, a NEXUS3 log truncated, rotated or replaced, and a trajectory read while its agent
runs are each stored as the calls of reading every finished file once.

The files are the real ones in ../shared/samples (read in place; what a test writes is made from
them in its own folder) and the sample data's NEXUS3 log; the property at the end draws the runs,
the folders and the points at which a growing file is read.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from analyzer.engine.store import Store, open_store
from analyzer.errors import NothingFound
from analyzer.ingest.base import IngestOptions
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import SAMPLE_DATA, assert_accounted, q, shared_samples

# Two mini-swe-agent 2.x runs of one SWE-bench instance (two models), a benchmark's own output.
PR816 = "real-loops-2/conversation_json/SWE-agent__mini-swe-agent__pr816"
INSTANCE = "pvlib__pvlib-python-1707"
RUNS_2X = {
    "deepseek-chat": f"{PR816}/deepseek_chat_dev__{INSTANCE}.traj.json",  # 95 calls
    "deepseek-reasoner": f"{PR816}/deepseek_reasoner_dev__{INSTANCE}.traj.json",  # 16 calls
}
# A mini-swe-agent 1.17.3 run of 40 calls (its cost stated for the run only: apportioned).
RUN_1X = (
    "real-loops/conversation_json/wudi-alex__mini-swe-agent-CaM/"
    "mini-output__django__django-12713.traj.json"
)
NEXUS3_LOG = SAMPLE_DATA / "nexus3" / "logs" / "2025-12-11_091502_a7c3" / "raw.jsonl"
NEXUS3_SESSION = "2025-12-11_091502_a7c3"

Totals = tuple[int, int, int, Decimal]  # calls, prompt tokens, output tokens, dollars


def ingest(store: Store, *paths: Path) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(progress=False))


def totals(store: Store) -> Totals:
    """The store's calls: how many, their tokens and their dollars."""
    [(n, prompt, output, usd)] = q(
        store,
        """SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),
                  coalesce(sum(cost_usd), 0) FROM calls""",
    )
    return int(n), int(prompt), int(output), Decimal(usd)


def alone(*files: Path) -> Totals:
    """The calls of reading each finished file once, each into a fresh store, added up."""
    sums = [0, 0, 0, Decimal(0)]
    for f in files:
        with open_store(":memory:") as store:
            [r] = ingest(store, f)
            assert r.status == "loaded", r
            for i, v in enumerate(totals(store)):
                sums[i] += v
    return sums[0], sums[1], sums[2], sums[3]


def place(path: Path, data: bytes, stamp: int) -> Path:
    """``data`` written at ``path`` (folders made), with its own time (a refresh sees a change)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (stamp, stamp))
    return path


def mid_run(doc: dict[str, Any], upto: int) -> dict[str, Any]:
    """A mini-swe-agent trajectory as the agent saves it during the run (the whole document
    rewritten after a step): its first ``upto`` messages, no exit status or submission yet, the
    model's calls and cost so far."""
    messages = doc["messages"][:upto]
    replies = sum(1 for m in messages if m.get("role") == "assistant")
    every = sum(1 for m in doc["messages"] if m.get("role") == "assistant")
    info = copy.deepcopy(doc["info"])
    stats = info.setdefault("model_stats", {})
    stats["instance_cost"] = float(stats.get("instance_cost") or 0) * replies / max(every, 1)
    stats["api_calls"] = replies
    info["exit_status"], info["submission"] = None, None
    return {**doc, "info": info, "messages": messages}


def dumped(doc: object) -> bytes:
    return json.dumps(doc, indent=2).encode()


# -- cause 1: two mini-swe-agent 2.x runs of one instance, each in its own output folder ------


def test_two_runs_of_one_instance_in_two_output_folders_are_two_sessions(tmp_path: Path) -> None:
    """``<output>/<instance>/<instance>.traj.json``, the layout a benchmark writes: the same
    name in each output folder. The second run's calls were taken for the first's (95 of 111
    stored)."""
    real = shared_samples()
    files = []
    for n, (output, rel) in enumerate(RUNS_2X.items()):
        data = (real / rel).read_bytes()
        files.append(place(tmp_path / output / INSTANCE / f"{INSTANCE}.traj.json", data, n + 1))
    with open_store(tmp_path / "s.duckdb") as store:
        reports = ingest(store, tmp_path / "deepseek-chat", tmp_path / "deepseek-reasoner")
        assert [(r.format, r.rows_duplicate) for r in reports] == [("conversation_json", 0)] * 2
        assert totals(store) == alone(*files)
        assert totals(store)[0] == 111
        assert q(store, "SELECT count(DISTINCT session_id), count(*) FROM runs") == [(2, 2)]
        assert q(store, "SELECT count(DISTINCT session_id) FROM calls") == [(2,)]
        assert_accounted(store)


# -- cause 2: two saved conversations named conversation.json, no id --------------------------


def conversation(rel: str, replies: int) -> list[dict[str, Any]]:
    """A plain OpenAI-style saved conversation (a list of messages, no id anywhere, the usage
    on each reply) made of a real run's first ``replies`` replies."""
    doc = json.loads((shared_samples() / rel).read_text(encoding="utf-8"))
    out: list[dict[str, Any]] = []
    for m in doc["messages"]:
        if m["role"] == "assistant" and sum(x["role"] == "assistant" for x in out) == replies:
            break
        kept = {k: m[k] for k in ("role", "content", "tool_calls", "tool_call_id") if k in m}
        if m["role"] == "assistant":
            kept["usage"] = m["extra"]["response"]["usage"]
        out.append(kept)
    return out


def test_two_conversations_of_one_name_in_two_folders(tmp_path: Path) -> None:
    """``a/conversation.json`` and ``b/conversation.json``, neither naming an id: two
    conversations, all six calls (3 of 6 were kept)."""
    files = [
        place(tmp_path / folder / "conversation.json", dumped(conversation(rel, 3)), n + 1)
        for n, (folder, rel) in enumerate(zip("ab", RUNS_2X.values(), strict=True))
    ]
    with open_store(tmp_path / "s.duckdb") as store:
        reports = ingest(store, tmp_path / "a", tmp_path / "b")
        assert [(r.format, r.calls, r.rows_duplicate) for r in reports] == [
            ("conversation_json", 3, 0)
        ] * 2
        assert totals(store) == alone(*files)
        assert totals(store)[0] == 6
        assert q(store, "SELECT count(DISTINCT session_id) FROM calls") == [(2,)]
        assert_accounted(store)


# -- cause 3: a NEXUS3 raw.jsonl truncated and written again, rotated, replaced ---------------


def nexus3_lines() -> list[bytes]:
    return NEXUS3_LOG.read_bytes().splitlines(keepends=True)


def test_a_nexus3_log_truncated_and_written_again_keeps_its_new_requests(tmp_path: Path) -> None:
    """The log read with its first two requests, then truncated, NEXUS3 going on writing the
    next four into it: the new requests sit on the lines the old ones had (5 of 6 were kept)."""
    lines = nexus3_lines()
    log = tmp_path / "logs" / NEXUS3_SESSION / "raw.jsonl"
    whole = place(tmp_path / "whole" / NEXUS3_SESSION / "raw.jsonl", b"".join(lines), 1)
    with open_store(tmp_path / "s.duckdb") as store:
        ingest(store, place(log, b"".join(lines[:14]), 1))
        [r] = ingest(store, place(log, b"".join(lines[14:]), 2))
        assert (r.calls, r.rows_duplicate) == (4, 0)
        assert totals(store) == alone(whole)
        assert totals(store)[0] == 6
        assert_accounted(store)


def test_a_rotated_nexus3_log_is_read_once(tmp_path: Path) -> None:
    """``raw.jsonl`` moved to ``raw.jsonl.1`` and a new one begun: every request once, and the
    history the new file's first request carries again is not stored twice."""
    lines = nexus3_lines()
    folder = tmp_path / "logs" / NEXUS3_SESSION
    with open_store(":memory:") as fresh:
        ingest(fresh, NEXUS3_LOG)
        messages = q(fresh, "SELECT count(*) FROM messages")
    with open_store(tmp_path / "s.duckdb") as store:
        ingest(store, place(folder / "raw.jsonl", b"".join(lines[:14]), 1))
        os.replace(folder / "raw.jsonl", folder / "raw.jsonl.1")
        place(folder / "raw.jsonl", b"".join(lines[14:]), 2)
        ingest(store, folder)
        assert totals(store) == alone(NEXUS3_LOG)
        assert q(store, "SELECT count(*) FROM messages") == messages
        assert_accounted(store)


def test_a_nexus3_log_replaced_by_another_is_read_as_new(tmp_path: Path) -> None:
    """The log replaced whole (written beside it, moved over it) by another run's log of the
    same shape, its requests on the same lines at other times: new calls, none a duplicate."""
    lines = nexus3_lines()
    other = [
        json.dumps({**(o := json.loads(line)), "timestamp": o["timestamp"] + 86_400}).encode()
        + b"\n"
        for line in lines
    ]
    log = tmp_path / "logs" / NEXUS3_SESSION / "raw.jsonl"
    with open_store(tmp_path / "s.duckdb") as store:
        ingest(store, place(log, b"".join(lines), 1))
        new = place(log.with_suffix(".tmp"), b"".join(other), 2)
        os.replace(new, log)
        [r] = ingest(store, log)
        assert (r.calls, r.rows_duplicate) == (6, 0)
        assert totals(store)[0] == 12
        assert_accounted(store)


# -- cause 4: a mini-swe-agent 1.x trajectory read while the agent runs, then at its end ------


def test_a_trajectory_read_during_its_run_and_at_its_end_is_one_run(tmp_path: Path) -> None:
    """Read after its 20th step (the agent rewrites the document after each) and again when
    the run ended: one session of 40 calls and the run's $0.102, not 60 calls and $0.159."""
    doc = json.loads((shared_samples() / RUN_1X).read_text(encoding="utf-8"))
    replies = [i for i, m in enumerate(doc["messages"]) if m["role"] == "assistant"]
    path = tmp_path / "out" / "django__django-12713" / "django__django-12713.traj.json"
    with open_store(tmp_path / "s.duckdb") as store:
        [early] = ingest(store, place(path, dumped(mid_run(doc, replies[19] + 2)), 1))
        assert (early.format, early.calls) == ("mini_swe_agent", 20)
        [late] = ingest(store, place(path, dumped(doc), 2))
        assert late.calls == 40
        assert totals(store) == alone(path)
        calls, _, _, usd = totals(store)
        assert (calls, round(usd, 3)) == (40, Decimal("0.102"))
        assert q(store, "SELECT count(*), count(exit_status) FROM runs") == [(1, 1)]
        assert_accounted(store)


# -- audit: Gemini CLI's stream, a run's calls wherever in a file the run is written ----------

GEMINI_STREAMS = (
    "real-loops/gemini_stream_json/metaphi-agent__figma-eval-010ac575-1280-41fe-be26-"
    "130311bef5ed-gemini_cli/transcript.jsonl",
    "real-loops-3/gemini_stream_json/metaphi-agent__figma-eval-49bdd49a-5831-4dca-ad1b-"
    "a66b7b9901fa-gemini_cli/transcript.jsonl",
)


def test_a_gemini_run_read_again_below_another_run_is_the_same_calls(tmp_path: Path) -> None:
    """A harness's transcript of one run, then a file holding another run and that one after
    it (transcripts concatenated): the second run's calls sit on other lines there, and are
    still the calls already stored (they were counted twice)."""
    first, second = ((shared_samples() / rel).read_bytes() for rel in GEMINI_STREAMS)
    one = place(tmp_path / "run-2" / "transcript.jsonl", second, 1)
    both = place(tmp_path / "all" / "transcript.jsonl", first + second, 2)
    alone_first = place(tmp_path / "run-1" / "transcript.jsonl", first, 3)
    with open_store(tmp_path / "s.duckdb") as store:
        ingest(store, one)
        [r] = ingest(store, both)
        assert r.format == "gemini_stream_json"
        assert totals(store) == tuple(
            a + b for a, b in zip(alone(alone_first), alone(one), strict=True)
        )
        assert_accounted(store)


# -- the property: any two runs in any two folders, any file read at any points of its growth --

# Real runs of each format touched, each a (name, bytes) to be placed under one file name.
POOL_1X = (
    "real-loops/conversation_json/gruckion__mini-swe-agent/astropy__astropy-12907.traj.json",
    "real-loops/conversation_json/richardzhuang0412__mini-swe-agent-automate-repo-installation/"
    "agent-result/babel-babel__trajectory.json",  # 1.9.1: no response ids, no times
    "real-loops/conversation_json/wudi-alex__mini-swe-agent-CaM/"
    "nano-output__django__django-12774.traj.json",
)
POOL_2X = (
    "real-loops-3/conversation_json/RussellRyanH__CSCI-635-LiveSWE-Agent/"
    "gpt-5-mini__django__django-11066.traj.json",
    RUNS_2X["deepseek-reasoner"],
)
FILE_NAMES = {
    "mini_swe_agent": "x__y-1.traj.json",
    "trajectory_2x": "x__y-1.traj.json",
    "conversation": "conversation.json",
    "nexus3_raw": f"{NEXUS3_SESSION}/raw.jsonl",
}
FOLDERS = ("a", "b", "out/run-1", "out/run-2/x__y-1")


@functools.cache
def pool(kind: str) -> list[Any]:
    """The finished runs of a kind: a document, or a log's bytes."""
    real = shared_samples()
    if kind == "mini_swe_agent":
        return [json.loads((real / rel).read_text(encoding="utf-8")) for rel in POOL_1X]
    if kind == "trajectory_2x":
        return [json.loads((real / rel).read_text(encoding="utf-8")) for rel in POOL_2X]
    if kind == "conversation":
        return [conversation(rel, 4) for rel in RUNS_2X.values()]
    later = [  # the same agent's log a day later: another run, another time on every line
        json.dumps({**(o := json.loads(line)), "timestamp": o["timestamp"] + 86_400}) + "\n"
        for line in NEXUS3_LOG.read_text(encoding="utf-8").splitlines()
    ]
    return [NEXUS3_LOG.read_bytes(), "".join(later).encode()]


def size(kind: str, run: Any) -> int:
    """How far a run can be cut: its messages, or a log's bytes."""
    if kind == "nexus3_raw":
        return len(run)
    return len(run if kind == "conversation" else run["messages"])


def version(kind: str, run: Any, upto: int | None) -> bytes:
    """A run as its file stood part way (``upto`` messages or bytes), or finished (None)."""
    if kind == "nexus3_raw":
        return bytes(run if upto is None else run[:upto])
    if upto is None:
        return dumped(run)
    return dumped(run[:upto] if kind == "conversation" else mid_run(run, upto))


def histories(data: st.DataObject, kind: str) -> tuple[list[Any], list[str], list[list[int]]]:
    """Two runs of a kind, the two folders they sit in under one file name, and for each the
    points at which it was read while it grew (what is drawn is noted, not the runs)."""
    runs = pool(kind)
    picked = data.draw(st.permutations(range(len(runs))), label="runs")[:2]
    folders = data.draw(st.permutations(FOLDERS), label="folders")[:2]
    growth = [
        sorted(
            data.draw(st.sets(st.integers(1, size(kind, runs[i]) - 1), max_size=3), label="cuts")
        )
        for i in picked
    ]
    return [runs[i] for i in picked], folders, growth


_ALONE: dict[bytes, Totals] = {}


def alone_once(path: Path) -> Totals:
    data = path.read_bytes()
    if data not in _ALONE:
        _ALONE[data] = alone(path)
    return _ALONE[data]


@pytest.mark.parametrize("kind", sorted(FILE_NAMES))
@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_any_runs_in_any_folders_read_at_any_points_store_each_finished_file_once(
    kind: str, data: st.DataObject
) -> None:
    """Two distinct runs of one kind under the same file name in two folders, each read at any
    set of points while it grew (then finished), into one store: exactly the calls (how many,
    their tokens, their dollars) of reading each finished file once into a fresh store."""
    shared_samples()
    runs, folders, growth = histories(data, kind)
    with tempfile.TemporaryDirectory(prefix="lf-identity-") as tmp:
        root = Path(tmp) / "logs"
        paths = [root / folder / FILE_NAMES[kind] for folder in folders]
        with open_store(":memory:") as store:
            for step in range(max(len(g) for g in growth)):
                for path, run, cuts in zip(paths, runs, growth, strict=True):
                    if step < len(cuts):
                        place(path, version(kind, run, cuts[step]), step + 1)
                with contextlib.suppress(NothingFound):  # a log's first line, half written
                    ingest(store, root)
            for path, run in zip(paths, runs, strict=True):
                place(path, version(kind, run, None), 100)
            ingest(store, root)
            expected = [alone_once(p) for p in paths]
            assert totals(store) == tuple(
                sum((e[i] for e in expected), start=Decimal(0) if i == 3 else 0) for i in range(4)
            )
            assert_accounted(store)
