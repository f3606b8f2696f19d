"""``daily``, ``weekly``, ``monthly`` and ``session`` beside ccusage 20's (issue 50): on a home
of the real-world Claude Code transcripts (``tests/ccusage_side.py``), our ``--json`` against
ccusage's, field by field - the periods, the four token counts and totals, ``modelsUsed``, the
model breakdowns, and the dollars at the logged output counts (what ccusage prices).

Two differences remain, each asserted as itself, computed from the files:

- ccusage reads only the lines Claude Code writes, compact JSON (``"type":"assistant"``): the
  hand-written records of the claude-code-log sample, written with spaces (``"type":
  "assistant"``), are calls to us and nothing to ccusage;
- a sub-agent's calls that Claude Code 2.1 also streams into its parent's transcript, as
  ``agent_progress`` records, ccusage's ``daily`` (and weekly, monthly) counts and its
  ``session`` does not; we read a sub-agent's calls from its own transcript only (a full home
  has it, under ``<session>/subagents/``), which this sample lacks.

Then the views' own options: ``--order``, ``--sub-agents``, the CSV's columns (the JSON's),
and the top-level commands (``daily`` is ``usage daily``).
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterator
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from tests.ccusage_side import ccusage_command, ccusage_json, ccusage_work, real_world_home

VIEWS = ("daily", "weekly", "monthly", "session")
TOKENS = ("inputTokens", "outputTokens", "cacheCreationTokens", "cacheReadTokens")


@pytest.fixture(scope="module")
def side(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The home, our store of it, and ccusage's answer for each view."""
    root = tmp_path_factory.mktemp("ccusage_views")
    home = real_world_home(root)
    db = root / "rw.duckdb"
    loaded = CliRunner().invoke(cli, ["ingest", "--db", str(db), "-q", str(home)])
    assert loaded.exit_code == 0, loaded.output
    command, _version = ccusage_command(ccusage_work(tmp_path_factory))
    theirs = {view: ccusage_json(command, home, view) for view in VIEWS}
    return {"home": home, "db": db, "theirs": theirs}


def ours(db: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, [*args, "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout, parse_float=Decimal)  # type: ignore[no-any-return]


# -- what the files hold that one side reads and the other does not --------------------------


def _records(home: Path) -> Iterator[tuple[Path, str, dict[str, Any]]]:
    for path in sorted((home / ".claude" / "projects").rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield path, line, record


def _call(ts: str, message: dict[str, Any]) -> tuple[str, str, tuple[int, ...]]:
    u = message["usage"]
    counts = ("input_tokens", "output_tokens", "cache_creation_input_tokens")
    tokens = (*(u.get(k, 0) for k in counts), u.get("cache_read_input_tokens", 0))
    return ts, message["model"], tokens


def spaced_calls(home: Path) -> list[tuple[str, str, str, tuple[int, ...]]]:
    """Calls in lines not written as Claude Code writes them (``"type": "assistant"``, with a
    space): ccusage skips them. (file stem, time, model, the four token counts)"""
    found = []
    for path, line, r in _records(home):
        message = r.get("message")
        call = r.get("type") == "assistant" and isinstance(message, dict) and "usage" in message
        if call and '"type":"assistant"' not in line:
            found.append((path.stem, *_call(r["timestamp"], message)))
    return found


def progress_calls(home: Path) -> list[tuple[str, str, str, tuple[int, ...]]]:
    """A sub-agent's calls streamed into its parent's transcript (``agent_progress``) and in
    no transcript of their own here, once each (by message and request id, as ccusage counts
    them)."""
    seen: dict[tuple[str, str], tuple[str, str, str, tuple[int, ...]]] = {}
    logged: set[tuple[str, str]] = set()
    for path, _line, r in _records(home):
        message = r.get("message")
        if r.get("type") == "assistant" and isinstance(message, dict) and "id" in message:
            logged.add((message["id"], r.get("requestId", "")))
        inner = (r.get("data") or {}).get("message") if r.get("type") == "progress" else None
        message = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(message, dict) and "usage" in message:
            key = (message["id"], inner.get("requestId", ""))  # type: ignore[union-attr]
            seen[key] = (path.stem, *_call(inner["timestamp"], message))  # type: ignore[index]
    return [call for key, call in seen.items() if key not in logged]


def period(view: str, ts: str) -> str:
    day = date.fromisoformat(ts[:10])
    if view == "weekly":
        return (day - timedelta(days=day.weekday())).isoformat()
    return ts[:7] if view == "monthly" else ts[:10]


def _at_logged(r: dict[str, Any]) -> Decimal:
    """A row's dollars at the logged output counts (ccusage's way of pricing them)."""
    ph = r["placeholder_output"]
    return Decimal(str(r["usd"])) - ph["usd_at_estimated_output"] + ph["usd_at_logged_output"]


# -- the period views -----------------------------------------------------------------------


@pytest.mark.parametrize("view", ["daily", "weekly", "monthly"])
def test_a_period_view_is_ccusages_but_for_the_calls_one_side_reads(
    side: dict[str, Any], view: str
) -> None:
    theirs = side["theirs"][view]
    mine = ours(side["db"], view, "--breakdown")
    assert list(mine) == ["view", "tz", view, "totals"] and mine["view"] == view
    # The documented differences, per period and model: what we read and ccusage does not
    # (spaced lines), and what ccusage reads and we do not (progress records).
    extra: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for _stem, ts, model, tokens in spaced_calls(side["home"]):
        extra[period(view, ts), model] = [
            a + b for a, b in zip(extra[period(view, ts), model], tokens, strict=True)
        ]
    for _stem, ts, model, tokens in progress_calls(side["home"]):
        extra[period(view, ts), model] = [
            a - b for a, b in zip(extra[period(view, ts), model], tokens, strict=True)
        ]
    assert extra, "the sample holds both kinds of difference"

    cc = {r["period"]: r for r in theirs[view]}
    rows = {r["period"]: r for r in mine[view]}
    assert sorted(rows) == sorted(cc) == [r["period"] for r in mine[view]]  # (time order)
    documented_usd = Decimal(0)  # ours at the logged counts - ccusage's, where the calls differ
    for key, row in rows.items():
        theirs_models = {b["modelName"]: b for b in cc[key]["modelBreakdowns"]}
        mine_models = {b["key"]: b for b in row["breakdown"]}
        assert {b["modelName"] for b in row["modelBreakdowns"]} == set(mine_models)
        expected: dict[str, list[int]] = {
            m: [b[t] for t in TOKENS] for m, b in theirs_models.items()
        }
        for (p, model), diff in extra.items():
            if p == key:
                now = expected.get(model, [0, 0, 0, 0])
                expected[model] = [a + b for a, b in zip(now, diff, strict=True)]
        expected = {m: t for m, t in expected.items() if any(t)}
        got = {b["modelName"]: [b[t] for t in TOKENS] for b in row["modelBreakdowns"]}
        assert got == expected, key
        assert set(row["modelsUsed"]) == set(expected)
        assert [row[t] for t in TOKENS] == [sum(t[i] for t in got.values()) for i in range(4)]
        assert row["totalTokens"] == sum(row[t] for t in TOKENS) == row["total_tokens"]
        for model, part in mine_models.items():
            cost = Decimal(str(theirs_models[model]["cost"])) if model in theirs_models else None
            gap = _at_logged(part) - (cost or Decimal(0))
            more = sum(extra.get((key, model), [0]))
            if more == 0:  # the same calls: the same dollars, at the logged output
                assert gap == pytest.approx(0, abs=Decimal("1e-8")), (key, model)
            else:  # the calls only one side reads: dollars on that side
                assert (gap > 0) == (more > 0), (key, model)
                documented_usd += gap
        documented_usd -= sum(
            (Decimal(str(b["cost"])) for m, b in theirs_models.items() if m not in mine_models),
            Decimal(0),
        )
    totals, cc_totals = mine["totals"], theirs["totals"]
    assert totals["totalTokens"] == sum(r["totalTokens"] for r in mine[view])
    assert totals["totalTokens"] - cc_totals["totalTokens"] == sum(sum(t) for t in extra.values())
    gap = _at_logged(totals) - Decimal(str(cc_totals["totalCost"]))
    assert gap == pytest.approx(documented_usd, abs=Decimal("1e-6"))
    assert totals["totalCost"] == totals["usd"] > _at_logged(totals)  # ours: the estimate


# -- the session view -----------------------------------------------------------------------


def _sessions_of_files(home: Path) -> dict[str, set[str]]:
    """Each transcript's name (as ccusage names a session: its file, a sub-agent's that of
    the folder it is in) and the session ids its calls carry."""
    named: dict[str, set[str]] = defaultdict(set)
    for path, _line, r in _records(home):
        if r.get("type") == "assistant" and r.get("sessionId"):
            name = path.parent.parent.name if path.parent.name == "subagents" else path.stem
            sid = r["sessionId"]
            named[name].add(f"{sid}:{r['agentId']}" if r.get("agentId") else sid)
    return named


def last_times(home: Path) -> dict[str, tuple[str, str]]:
    """Each transcript's (named as ccusage names a session) last call at the time of the line
    ccusage keeps of it (of the lines of a streamed reply, the first with the most output),
    and at the time of its first line."""
    lines: dict[str, dict[str, list[tuple[int, str]]]] = defaultdict(lambda: defaultdict(list))
    for path, _line, r in _records(home):
        message = r.get("message")
        if r.get("type") == "assistant" and isinstance(message, dict) and "usage" in message:
            name = path.parent.parent.name if path.parent.name == "subagents" else path.stem
            out = message["usage"].get("output_tokens", 0)
            lines[name][message.get("id", "")].append((out, _z(r["timestamp"])))
    kept = {
        name: max(t[max(range(len(t)), key=lambda i: (t[i][0], -i))][1] for t in calls.values())
        for name, calls in lines.items()
    }
    return {
        name: (kept[name], max(min(x[1] for x in t) for t in calls.values()))
        for name, calls in lines.items()
    }


def _z(ts: str) -> str:
    return ts if "." in ts else ts.replace("Z", ".000Z")


def test_the_session_view_is_ccusages_by_its_session_names(side: dict[str, Any]) -> None:
    home, theirs = side["home"], side["theirs"]["session"]
    mine = ours(side["db"], "session")
    assert list(mine) == ["view", "tz", "session", "totals"]
    rows = {r["key"]: r for r in mine["session"]}
    files = _sessions_of_files(home)
    spaced = defaultdict(lambda: [0, 0, 0, 0])
    for stem, _ts, _model, tokens in spaced_calls(home):
        spaced[stem] = [a + b for a, b in zip(spaced[stem], tokens, strict=True)]
    matched: set[str] = set()
    for cc in theirs["session"]:
        name = cc["period"]
        keys = {k for k in rows if k in files[name] or k.split(":")[0] in files[name]}
        assert keys, name
        matched |= keys
        got = [sum(rows[k][t] for k in keys) for t in TOKENS]
        # ours: every call of the file's sessions; ccusage's: the compact lines only
        assert got == [
            a + b for a, b in zip([cc[t] for t in TOKENS], spaced.get(name, [0] * 4), strict=True)
        ]
        if name not in spaced:
            assert len(keys) == 1
            row = rows[keys.pop()]
            assert set(row["modelsUsed"]) == set(cc["modelsUsed"])
            # ccusage's last activity: the session's last line of a call; ours: its last
            # call, at the time of the call's first line (a reply streamed over several lines
            # is one call, made when it began)
            line, call = last_times(home)[name]
            assert cc["metadata"]["lastActivity"] == line
            assert row["metadata"]["lastActivity"] == row["lastActivity"] == call <= line
            assert _at_logged(row) == pytest.approx(
                Decimal(str(cc["totalCost"])), abs=Decimal("1e-8")
            )
    # The sessions ccusage has no row for: those of a file whose every line it skips.
    unmatched = set(rows) - matched
    assert unmatched and all(
        any(
            k in files[stem]
            for stem in spaced
            if stem not in {c["period"] for c in theirs["session"]}
        )
        for k in unmatched
    )
    # ccusage's session totals leave out the progress records its daily view counts.
    daily = side["theirs"]["daily"]["totals"]
    progress = sum(sum(t) for *_, t in progress_calls(home))
    assert daily["totalTokens"] - theirs["totals"]["totalTokens"] == progress > 0


def test_sessions_fold_their_sub_agents_and_order_as_asked(side: dict[str, Any]) -> None:
    db = side["db"]
    folded = ours(db, "session")["session"]
    apart = ours(db, "session", "--sub-agents")["session"]
    assert len(apart) > len(folded)
    assert sum(r["calls"] for r in apart) == sum(r["calls"] for r in folded)
    subs = [r for r in apart if r.get("parent", {}).get("relation") == "subagent_of"]
    assert subs and not any(r.get("parent", {}).get("relation") == "subagent_of" for r in folded)
    by_key = {r["key"]: r for r in folded}
    for parent in {r["parent"]["session_id"] for r in subs}:
        mine = [
            r
            for r in apart
            if r["key"] == parent or r.get("parent", {}).get("session_id") == parent
        ]
        assert by_key[parent]["calls"] == sum(r["calls"] for r in mine)
        assert by_key[parent]["sub_agents"] == len(mine) - 1
    # Default: most dollars first (as ccusage); recent: latest call first; time: oldest first.
    usd = [r["usd"] for r in folded]
    assert usd == sorted(usd, reverse=True)
    recent = [r["lastActivity"] for r in ours(db, "session", "--order", "recent")["session"]]
    assert recent == sorted(recent, reverse=True)
    oldest = [r["lastActivity"] for r in ours(db, "session", "--order", "time")["session"]]
    assert oldest == sorted(oldest)
    days = [r["period"] for r in ours(db, "daily", "--order", "cost")["daily"]]
    assert days != sorted(days) and sorted(days) == [
        r["period"] for r in ours(db, "daily")["daily"]
    ]
    text = CliRunner().invoke(cli, ["session", "--db", str(db)], env={"COLUMNS": "160"}).stdout
    head = text.splitlines()[0].split()
    assert "models" in head and head[-2:] == ["last", "activity"]
    assert "sub-agents' calls counted in the session that started them" in " ".join(text.split())


# -- one view, its outputs, its names -------------------------------------------------------


@pytest.mark.parametrize("view", VIEWS)
def test_the_top_level_command_is_the_usage_view(side: dict[str, Any], view: str) -> None:
    db = str(side["db"])
    run = CliRunner()
    for fmt in ("--json", "--csv"):
        top = run.invoke(cli, [view, "--db", db, fmt])
        usage = run.invoke(cli, ["usage", view, "--db", db, fmt])
        assert top.exit_code == usage.exit_code == 0, top.output
        assert top.stdout == usage.stdout
    helped = run.invoke(cli, [view, "--help"])
    assert helped.exit_code == 0 and f"llm-forensics {view} --since 7d --json" in helped.stdout


def _flat(record: dict[str, Any], prefix: str = "") -> set[str]:
    names: set[str] = set()
    for name, value in record.items():
        if name in ("breakdown", "modelBreakdowns"):
            continue
        names |= _flat(value, f"{prefix}{name}.") if isinstance(value, dict) else {prefix + name}
    return names


@pytest.mark.parametrize("view", [*VIEWS, "project", "model"])
def test_the_csv_has_every_field_of_the_json(side: dict[str, Any], view: str) -> None:
    db = str(side["db"])
    data = ours(side["db"], "usage", view)
    made = CliRunner().invoke(cli, ["usage", view, "--db", db, "--csv"])
    head, *table = list(csv.reader(io.StringIO(made.stdout)))
    for row in [*data[view], data["totals"]]:
        assert _flat(row) <= set(head), _flat(row) - set(head)
    # a row per key (cells made safe for a spreadsheet: a leading ' before a -), then its
    # models (the JSON's modelBreakdowns), each a row of its own with `model` named
    assert head[:2] == [view, "model"]
    keys = [r[0].removeprefix("'") for r in table if not r[1] and r[0] != "Total"]
    assert keys == [r["key"] for r in data[view]]
    if view == "model":
        return
    at = head.index("inputTokens")
    for r in data[view]:
        parts = [p for p in table if p[0].removeprefix("'") == r["key"] and p[1]]
        assert [p[1] for p in parts] == [b["modelName"] for b in r["modelBreakdowns"]]
        assert [int(p[at]) for p in parts] == [b["inputTokens"] for b in r["modelBreakdowns"]]


def test_projects_are_named_short_and_kept_whole_in_json(side: dict[str, Any]) -> None:
    rows = ours(side["db"], "usage", "project")["project"]
    whole = {r["project"]: r["project_short"] for r in rows}
    assert (
        whole["-home-marco-projects-spotter-worktrees-spotter-fum"]
        == "spotter-worktrees-spotter-fum"
    )
    assert whole["-home-jn-projects-agentcmd"] == "agentcmd"
    assert len(set(whole.values())) == len(whole)
    text = (
        CliRunner()
        .invoke(cli, ["usage", "project", "--db", str(side["db"])], env={"COLUMNS": "120"})
        .stdout
    )
    assert "spotter-worktrees-spotter-fum" in text and "-home-marco" not in text
    sessions = ours(side["db"], "session")["session"]
    assert {r["project_short"] for r in sessions} <= set(whole.values())


def test_models_are_named_short_when_the_terminal_is_narrow(side: dict[str, Any]) -> None:
    wide = (
        CliRunner().invoke(cli, ["daily", "--db", str(side["db"])], env={"COLUMNS": "200"}).stdout
    )
    narrow = (
        CliRunner().invoke(cli, ["daily", "--db", str(side["db"])], env={"COLUMNS": "110"}).stdout
    )
    assert "claude-sonnet-4-5-20250929" in wide
    assert "sonnet-4-5" in narrow and "claude-sonnet-4-5-20250929" not in narrow
    assert max(len(line) for line in narrow.splitlines()) <= 110
