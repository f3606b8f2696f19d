"""Forked and sub-agent Codex rollouts (issue 32): the parent's history a fork copies into its
file is the parent's, counted once, and the child is linked to its parent (what ``show`` and
``usage session`` say of it: ``tests/test_fork_views.py``). On the fixtures in
``tests/fixtures/codex_forks`` (the shape Codex's source writes, see that folder's README) and
on variants of them made here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from analyzer.engine.store import Store, open_store
from analyzer.formats.codex_forks import Lineage, lineage, uuid7_ms
from analyzer.ingest.base import IngestOptions
from analyzer.load.flow import FileReport
from analyzer.pipeline import ingest_paths
from tests.helpers import assert_accounted, q

FIXTURES = Path(__file__).parent / "fixtures" / "codex_forks"
P = "019cadc6-9a80-7a41-a2c3-d4e5f6071829"  # the parent: 5 calls in 2 turns
F = "019cadcf-c240-7c51-a2e3-f4a5b6c7d8e9"  # a user fork of it before its 2nd turn: 3 copied, 2 own
S = "019cadca-b930-7e71-a2a3-b4c5d6e7f8a9"  # the sub-agent it spawned, forked: 4 copied, 2 own
Q = "019cb3ff-9f00-7a91-a2c3-d4e5f6a7b8c9"  # a paginated parent (line ordinals): 2 calls
R = "019cb3ff-c228-7c91-a2e3-f4a5b6c7d8e9"  # its sub-agent: 1 copied (below the ordinal), 1 own
FILES = {sid: next(FIXTURES.glob(f"rollout-*-{sid}.jsonl")) for sid in (P, F, S, Q, R)}


def ingest(store: Store, *paths: Path) -> list[FileReport]:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions())


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def usage_of(rec: dict[str, Any], key: str) -> dict[str, int]:
    return dict(rec["payload"]["info"][key])


def token_counts(path: Path) -> list[dict[str, Any]]:
    """A rollout's token_count events that carry usage."""
    return [
        r for r in lines(path) if r["payload"].get("type") == "token_count" and r["payload"]["info"]
    ]


def per_session(store: Store) -> dict[str, tuple[Any, ...]]:
    rows = q(
        store,
        """SELECT session_id, count(*), sum(input_tokens), sum(cached_input_tokens),
                  sum(output_tokens), sum(reasoning_tokens), min(parent_session_id),
                  min(agent_id), sum(cost_usd)
           FROM calls GROUP BY 1""",
    )
    return {r[0]: r[1:] for r in rows}


def snapshot(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """The store's rows, each file named by its name (source ids follow the order read)."""
    name = "regexp_extract(s.path, '[^/]+$')"
    return {
        "sources": q(
            store,
            f"""SELECT {name}, format, sha256, rows_read, rows_loaded,
                                       rows_rejected, rows_duplicate, rows_skipped, skipped_kinds
                                FROM sources s ORDER BY 1""",
        ),
        "calls": q(
            store,
            f"""SELECT {name}, c.* EXCLUDE (source_id) FROM calls c
                              JOIN sources s USING (source_id) ORDER BY c.call_id""",
        ),
        "messages": q(
            store,
            f"""SELECT {name}, m.* EXCLUDE (source_id) FROM messages m
                                JOIN sources s USING (source_id)
                                ORDER BY m.session_id, m.idx""",
        ),
        "rejects": q(store, "SELECT * EXCLUDE (source_id) FROM rejects ORDER BY ALL"),
    }


# -- what the fixtures hold ---------------------------------------------------------------------


def test_the_fixtures_have_the_shape_codex_writes() -> None:
    """The fork files start with their own session_meta, then the parent's, copied as it is."""
    parent_meta = lines(FILES[P])[0]["payload"]
    for child in (F, S):
        first, second = lines(FILES[child])[:2]
        assert first["payload"]["id"] == child
        assert first["payload"]["forked_from_id"] == P
        assert second["type"] == "session_meta" and second["payload"] == parent_meta
    spawn = lines(FILES[S])[0]["payload"]["source"]["subagent"]["thread_spawn"]
    assert spawn["parent_thread_id"] == P
    # The copy is the parent's lines, payload for payload, up to the fork; the user fork copies
    # everything, the forked sub-agent no reasoning, tool calls or their outputs.
    fork_copy = [r["payload"] for r in lines(FILES[F])[1:22]]
    assert fork_copy == [r["payload"] for r in lines(FILES[P])[:21]]
    sub_copy = [r["payload"] for r in lines(FILES[S])[1:20]]
    assert all(
        p.get("type") not in ("reasoning", "function_call", "function_call_output")
        for p in sub_copy
    )
    assert all(p in [r["payload"] for r in lines(FILES[P])] for p in sub_copy)
    # Codex stamps each copied line as it writes it: the copy carries the fork's instant.
    stamps = [r["timestamp"] for r in lines(FILES[F])[1:23]]
    assert stamps[0] >= "2026-03-02T09:10:00" and stamps[-1] < "2026-03-02T09:10:01"
    # The ordinal sub-agent states where its own lines begin.
    r_lines = lines(FILES[R])
    start = r_lines[0]["payload"]["subagent_history_start_ordinal"]
    assert [r["ordinal"] for r in r_lines] == list(range(len(r_lines)))
    assert r_lines[1]["payload"]["id"] == Q and r_lines[start]["type"] == "event_msg"


def test_lineage_reads_every_spelling() -> None:
    assert lineage({"id": "c", "forked_from_id": "p"}) == Lineage("p", None, None)
    assert lineage({"id": "c", "parent_thread_id": "p", "thread_source": "subagent"}).parent == "p"
    spawn = {
        "subagent": {
            "thread_spawn": {"parent_thread_id": "p", "depth": 1, "agent_nickname": "Tesla"}
        }
    }
    assert (lineage({"source": spawn}).parent, lineage({"source": spawn}).agent) == ("p", "Tesla")
    assert lineage({"source": {"subagent": "review"}}).agent == "review"
    assert lineage({"source": {"subagent": {"other": "guardian"}}}).agent == "guardian"
    assert lineage({"source": "vscode", "session_id": "root"}) == lineage({})
    assert lineage({"subagent_history_start_ordinal": 7}).start_ordinal == 7
    assert uuid7_ms(P) == 1772442000000  # 2026-03-02T09:00:00Z
    assert uuid7_ms("01997e76-d124-4592-9cac-2ec05abbca08") is None  # not a v7


# -- each call once -------------------------------------------------------------------------


def test_each_call_is_counted_once(store: Store) -> None:
    [*reports] = ingest(store, *FILES.values())
    assert {r.status for r in reports} == {"loaded"}
    got = per_session(store)
    assert {sid: row[0] for sid, row in got.items()} == {P: 5, F: 2, S: 2, Q: 2, R: 1}
    # The parent's calls are its own last_token_usage, as in any rollout.
    p_usage = [usage_of(r, "last_token_usage") for r in token_counts(FILES[P])]
    assert got[P][1:5] == tuple(sum(u[k] for u in p_usage) for k in KEYS)
    # A child's own calls are what its cumulative counter grew by after the copy: its last
    # total less the parent's total at the fork (Codex carries the counter on into the fork).
    for child, copied in ((F, 3), (S, 4)):
        counts = token_counts(FILES[child])
        at_fork = usage_of(counts[copied - 1], "total_token_usage")
        assert at_fork == usage_of(token_counts(FILES[P])[copied - 1], "total_token_usage")
        end = usage_of(counts[-1], "total_token_usage")
        assert got[child][1:5] == tuple(end[k] - at_fork[k] for k in KEYS)
    # So the totals are the parent's and each child's own, no more (the copies would add 7).
    assert q(store, "SELECT count(*) FROM calls WHERE session_id IN ($1, $2, $3)", [P, F, S]) == [
        (9,)
    ]
    assert_accounted(store)


def test_copied_lines_are_skipped_and_accounted(store: Store) -> None:
    ingest(store, *FILES.values())
    kinds = {
        Path(path).name.split("-", 6)[-1][:36]: json.loads(k)
        for path, k in q(store, "SELECT path, skipped_kinds FROM sources")
    }
    # F copies the parent's first 21 lines (3 calls among them) and writes its own context in
    # the same burst; S copies 19 lines (4 calls); R's one copied call is below its ordinal.
    assert (kinds[F]["fork_replay_call"], kinds[F]["fork_replay"]) == (3, 19)
    assert (kinds[S]["fork_replay_call"], kinds[S]["fork_replay"]) == (4, 15)
    assert (kinds[R]["fork_replay_call"], kinds[R]["fork_replay"]) == (1, 6)
    assert "fork_replay" not in kinds[P] and "fork_replay" not in kinds[Q]
    # No message of the parent's is stored again under a child.
    assert q(store, "SELECT kind FROM messages WHERE session_id = $1 ORDER BY idx", [F]) == [
        ("prompt",),
        ("tool_call",),
        ("tool_result",),
        ("text",),
    ]
    prompts = q(
        store,
        "SELECT session_id, excerpt FROM messages WHERE kind = 'prompt' "
        "AND session_id IN ($1, $2) ORDER BY 1",
        [F, S],
    )
    assert prompts == [
        (S, "Run the full test suite"),
        (F, "Use a pytest fixture for the cart instead"),
    ]
    assert_accounted(store)


def test_children_are_linked_to_their_parents(store: Store) -> None:
    ingest(store, *FILES.values())
    got = per_session(store)
    assert {sid: (row[5], row[6]) for sid, row in got.items()} == {
        P: (None, None),
        F: (P, None),  # a fork: no agent
        S: (P, "/root/tester"),  # a sub-agent: its agent path
        Q: (None, None),
        R: (Q, "/root/profiler"),
    }
    # Each session is named by its own (first) session_meta, never by the copied one.
    assert q(store, "SELECT DISTINCT session_id FROM messages ORDER BY 1") == sorted(
        [(P,), (F,), (S,), (Q,), (R,)]
    )


@pytest.mark.parametrize("order", ["parent first", "children first", "one folder"])
def test_the_store_is_the_same_whichever_file_comes_first(tmp_path: Path, order: str) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    for f in FILES.values():
        shutil.copy(f, folder / f.name)
    copies = {sid: folder / f.name for sid, f in FILES.items()}
    with open_store(tmp_path / "want.duckdb") as want:
        for sid in (P, Q, F, S, R):  # one by one, the parents first
            ingest(want, copies[sid])
        expected = snapshot(want)
    with open_store(tmp_path / f"{order}.duckdb") as store:
        if order == "one folder":
            ingest(store, folder)
        elif order == "children first":
            for sid in (R, S, F, Q, P):
                ingest(store, copies[sid])
        else:
            for sid in (P, F, S, Q, R):
                ingest(store, copies[sid])
        assert snapshot(store) == expected
        assert_accounted(store)
    assert len(expected["calls"]) == 12


def test_a_child_without_its_parent_counts_only_its_own_calls(store: Store) -> None:
    """The parent's file not read (deleted, archived): the copy is still not the child's."""
    [r] = ingest(store, FILES[F])
    assert (r.rows_read, r.rows_loaded, r.rows_duplicate, r.rows_skipped) == (36, 6, 0, 30)
    assert per_session(store) == {F: per_session_of_fork()}
    assert q(store, "SELECT count(*) FROM calls WHERE session_id = $1", [P]) == [(0,)]
    assert_accounted(store)


def per_session_of_fork() -> tuple[Any, ...]:
    with open_store(":memory:") as s:
        ingest(s, *FILES.values())
        return per_session(s)[F]


# -- how the copy is told from the child's own lines ------------------------------------------


def test_a_copy_that_kept_the_parents_times(store: Store, tmp_path: Path) -> None:
    """Some forks copy the parent's lines with their own times (minutes apart, before the fork
    was made): those are the parent's too."""
    recs = lines(FILES[F])
    parent = lines(FILES[P])
    for i in range(1, 22):
        recs[i]["timestamp"] = parent[i - 1]["timestamp"]
    f = write(tmp_path / FILES[F].name, recs)
    ingest(store, f)
    assert per_session(store) == {F: per_session_of_fork()}


def test_without_turn_ids_a_pause_ends_the_copy(store: Store, tmp_path: Path) -> None:
    """Older rollouts name no turn: the copy is written in one burst, the child's own first
    turn a pause later. The forked sub-agent's first prompt is written in the burst, so it is
    taken for the copy; its calls, a model's answer later, are its own."""
    recs = lines(FILES[S])
    for r in recs:
        r["payload"].pop("turn_id", None)
    ingest(store, write(tmp_path / FILES[S].name, recs))
    with open_store(":memory:") as full:
        ingest(full, *FILES.values())
        assert per_session(store) == {S: per_session(full)[S]}
    assert q(store, "SELECT count(*) FROM messages WHERE kind = 'prompt'") == [(0,)]


def test_a_sub_agent_that_copies_nothing_is_only_linked(store: Store, tmp_path: Path) -> None:
    """A sub-agent spawned without the parent's history: every line is its own."""
    recs = lines(FILES[S])
    own = [recs[0], *recs[20:]]
    del own[0]["payload"]["forked_from_id"]
    ingest(store, write(tmp_path / FILES[S].name, own))
    assert per_session(store)[S][:1] + per_session(store)[S][5:7] == (2, P, "/root/tester")
    assert "fork_replay" not in q(store, "SELECT skipped_kinds FROM sources")[0][0]
    assert q(store, "SELECT excerpt FROM messages WHERE kind = 'prompt'") == [
        ("Run the full test suite",)
    ]


def test_a_second_session_meta_in_an_ordinary_rollout_is_not_its_name(
    store: Store, tmp_path: Path
) -> None:
    """An old fork that names no parent: the copied session_meta after its own is the parent's
    (the link is taken from it), and the copy is skipped as in any fork."""
    recs = lines(FILES[F])
    del recs[0]["payload"]["forked_from_id"]
    ingest(store, write(tmp_path / FILES[F].name, recs))
    assert per_session(store)[F][:1] + per_session(store)[F][5:7] == (2, P, None)
