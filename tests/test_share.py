"""One team history (``llm-forensics share DIR``): two machines share their calls into one
folder, twice each; a third machine's store reads the folder with each call once, under the
machine that read it; nothing of another machine's is ever written again; a damaged file is one
line naming it; and Spark reads the same folder with the same incidents as DuckDB.

The machines' logs are the committed sample (``sample_data/``): machine alpha read the Claude
Code project and the nexus3 log, machine beta the nexus3 log (the file both have) and the
penguin conversations.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner, Result

from analyzer.cli.main import cli
from analyzer.detect import spark_engine
from analyzer.engine.export_layout import SHARE_FORMAT, share_batches

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
ALPHA = [SAMPLE / "claude-code", SAMPLE / "nexus3"]
BETA = [SAMPLE / "nexus3", SAMPLE / "penguin"]
ANA = '{"user.email":"ana@example.com"}'


def run(*args: object) -> Result:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result


def ok(*args: object) -> Result:
    result = run(*args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def files_of(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``folder``: its modification time and SHA-256."""
    return {
        str(p.relative_to(folder)): (
            p.stat().st_mtime_ns,
            hashlib.sha256(p.read_bytes()).hexdigest(),
        )
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two machines' stores, each shared into ``team/`` twice."""
    base = tmp_path_factory.mktemp("share")
    folder = base / "team"
    for name, paths in (("alpha", ALPHA), ("beta", BETA)):
        db = base / f"{name}.duckdb"
        ok("ingest", "--db", db, "--machine", name, "-q", *paths)
        if name == "alpha":  # who made them, as an OpenTelemetry export says it (calls.labels)
            with duckdb.connect(str(db)) as con:
                con.execute(f"UPDATE calls SET labels = '{ANA}' WHERE format = 'claude_code'")
            found = run("detect", "--db", db, "-q")  # what alpha found is shared with its calls
            assert found.exit_code in (0, 1), found.output
        first = ok("share", "--db", db, "--machine", name, folder, "--json")
        assert json.loads(first.stdout)["batch"] is not None
        again = ok("share", "--db", db, "--machine", name, folder, "--json")
        assert json.loads(again.stdout)["batch"] is None, "nothing new: nothing written"
    yield folder


def distinct_calls(base: Path) -> dict[str, tuple[Any, ...]]:
    """The calls of both machines' stores, each id once (alpha's first): what the team has."""
    found: dict[str, tuple[Any, ...]] = {}
    for name in ("alpha", "beta"):
        sql = "SELECT call_id, input_tokens, output_tokens, cost_usd, machine FROM calls"
        for row in rows(base / f"{name}.duckdb", sql):
            found.setdefault(row[0], row)
    return found


def test_a_third_machine_reads_every_call_once_under_its_machine(
    team: Path, tmp_path: Path
) -> None:
    batches = share_batches(team)
    assert [(b.parent.name, m["machine"]) for b, m in batches] == [
        ("alpha", "alpha"),
        ("beta", "beta"),
    ]
    assert all(m["format"] == SHARE_FORMAT and m["digest"] for _b, m in batches)
    db = tmp_path / "gamma.duckdb"
    ok("ingest", "--db", db, "--machine", "gamma", team)
    want = distinct_calls(team.parent)
    got = rows(db, "SELECT call_id, input_tokens, output_tokens, cost_usd, machine FROM calls")
    assert len(got) == len({r[0] for r in got}) == len(want)
    assert {r[0]: r for r in got} == want
    # the nexus3 log both machines read: its calls once, under alpha (whose batch is read first)
    nexus = rows(db, "SELECT DISTINCT machine FROM calls WHERE format = 'nexus3_raw'")
    assert nexus == [("alpha",)]
    # the sources' accounting closes, the nexus3 calls beta shared counted as duplicates
    ((read, loaded, dup, rej, skip),) = rows(
        db,
        "SELECT sum(rows_read), sum(rows_loaded), sum(rows_duplicate), sum(rows_rejected), "
        "sum(rows_skipped) FROM sources WHERE format = 'share'",
    )
    assert read == loaded + dup + rej + skip and dup > 0
    nexus_calls = rows(db, "SELECT count(*) FROM calls WHERE format = 'nexus3_raw'")[0][0]
    assert dup >= nexus_calls > 0
    # the usage views: the totals of the distinct calls, by machine
    usage = json.loads(ok("usage", "daily", "--db", db, "--json").stdout)["totals"]
    assert usage["calls"] == len(want)
    assert usage["machines"] == ["alpha", "beta"]
    tokens = sum((r[1] or 0) for r in want.values())
    assert usage["input"] + usage["cache_read"] + usage["cache_write"] == tokens
    cost = sum((r[3] or Decimal(0)) for r in want.values())
    assert Decimal(str(usage["usd"])) == cost
    # ... and by user: the labels a call was shared with
    by_user = json.loads(ok("usage", "daily", "--db", db, "--by", "user.email", "--json").stdout)
    users: dict[str, int] = {}
    for day in by_user["daily"]:
        for part in day["breakdown"]:
            users[part["key"]] = users.get(part["key"], 0) + part["calls"]
    ana = rows(team.parent / "alpha.duckdb", f"SELECT count(*) FROM calls WHERE labels = '{ANA}'")
    assert users == {
        "user.email=ana@example.com": ana[0][0],
        "user.email=(none)": len(want) - ana[0][0],
    }


def test_a_batch_holds_the_incidents_found_in_its_calls(team: Path, tmp_path: Path) -> None:
    """Alpha's batch carries the incidents its store found in the calls it shared (and their
    calls); beta's store found none. Reading the folder does not take them for calls: each
    reader finds the incidents again, over every machine's calls."""
    alpha = team.parent / "alpha.duckdb"
    want = rows(alpha, "SELECT incident_id, detector, wasted_usd FROM incidents ORDER BY 1")
    assert want, "the sample's loops are found on alpha"
    by_machine = {b.parent.name: b for b, _m in share_batches(team)}
    got = rows(
        alpha,
        f"SELECT incident_id, detector, wasted_usd FROM read_parquet("
        f"'{by_machine['alpha'] / 'incidents.parquet'}') ORDER BY 1",
    )
    assert got == want
    calls = rows(
        alpha,
        f"SELECT count(*) FROM read_parquet('{by_machine['alpha'] / 'incident_calls.parquet'}')",
    )
    assert calls == rows(alpha, "SELECT count(*) FROM incident_calls")
    assert rows(
        alpha, f"SELECT count(*) FROM read_parquet('{by_machine['beta'] / 'incidents.parquet'}')"
    ) == [(0,)]
    db = tmp_path / "gamma.duckdb"
    done = ok("ingest", "--db", db, team)
    assert "incidents.parquet" not in done.output.replace("read with", "")
    assert rows(db, "SELECT count(*) FROM incidents") == [(0,)]
    detected = run("detect", "--db", db, "-q")
    assert detected.exit_code in (0, 1), detected.output
    assert {r[1] for r in rows(db, "SELECT * FROM incidents")} >= {r[1] for r in want}


def test_the_same_messages_as_reading_the_logs_themselves(team: Path, tmp_path: Path) -> None:
    shared, direct = tmp_path / "shared.duckdb", tmp_path / "direct.duckdb"
    ok("ingest", "--db", shared, team)
    ok("ingest", "--db", direct, "-q", *sorted(set(ALPHA + BETA)))
    cols = "session_id, idx, role, kind, ts, tool_name, tool_args_hash, tool_result_hash, call_id"
    sql = f"SELECT {cols} FROM messages ORDER BY ALL"
    assert rows(shared, sql) == rows(direct, sql) and rows(shared, sql)
    calls = "SELECT call_id, ts, stream_key, seq, session_id, cost_usd FROM calls ORDER BY ALL"
    assert rows(shared, calls) == rows(direct, calls)


def test_reading_the_folder_again_or_into_a_sharing_machine_adds_no_call(
    team: Path, tmp_path: Path
) -> None:
    db = tmp_path / "gamma.duckdb"
    ok("ingest", "--db", db, team)
    before = rows(db, "SELECT count(*) FROM calls")
    ok("ingest", "--db", db, team)
    copy = tmp_path / "copy"
    shutil.copytree(team, copy)  # the same batches at another path: read as new files
    ok("ingest", "--db", db, copy)
    assert rows(db, "SELECT count(*) FROM calls") == before
    # alpha's own calls read back into its own store are duplicates; beta's are new
    alpha = tmp_path / "alpha.duckdb"
    shutil.copy(team.parent / "alpha.duckdb", alpha)
    own = rows(alpha, "SELECT count(*) FROM calls")[0][0]
    ok("ingest", "--db", alpha, "--machine", "alpha", team)
    assert rows(alpha, "SELECT count(*) FROM calls")[0][0] == len(distinct_calls(team.parent))
    assert rows(alpha, "SELECT count(*) FROM calls WHERE machine = 'alpha'")[0][0] == own
    # and what alpha read from the folder is not shared again as its own
    again = ok("share", "--db", alpha, "--machine", "alpha", copy, "--json")
    assert json.loads(again.stdout)["batch"] is None


def test_a_new_share_writes_only_new_files_and_never_touches_another_machines(
    team: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "team"
    shutil.copytree(team, folder)
    before = files_of(folder)
    alpha = tmp_path / "alpha.duckdb"
    shutil.copy(team.parent / "alpha.duckdb", alpha)
    ok("ingest", "--db", alpha, "--machine", "alpha", "-q", SAMPLE / "netclaw")
    shared = json.loads(ok("share", "--db", alpha, "--machine", "alpha", folder, "--json").stdout)
    after = files_of(folder)
    assert {k: v for k, v in after.items() if k in before} == before, "nothing changed"
    new = sorted(set(after) - set(before))
    assert new and all(k.startswith("alpha/") for k in new)
    assert shared["manifest"]["tables"]["sources"]["rows"] == 1  # only the file read since
    db = tmp_path / "gamma.duckdb"
    ok("ingest", "--db", db, folder)
    netclaw = rows(alpha, "SELECT count(*) FROM calls WHERE format = 'conversation_json'")[0][0]
    total = rows(db, "SELECT count(*) FROM calls")[0][0]
    assert total == len(distinct_calls(team.parent)) + netclaw > netclaw > 0


def test_a_lost_share_costs_duplicates_never_calls(team: Path, tmp_path: Path) -> None:
    folder = tmp_path / "team"
    shutil.copytree(team, folder)
    alpha = tmp_path / "alpha.duckdb"
    shutil.copy(team.parent / "alpha.duckdb", alpha)
    (batch,) = (b for b, m in share_batches(folder) if m["machine"] == "alpha")
    shutil.move(batch, tmp_path / "kept-batch")  # what alpha shared is gone from the folder
    ok("share", "--db", alpha, "--machine", "alpha", folder)
    (batch,) = (b for b, m in share_batches(folder) if m["machine"] == "alpha")
    shutil.move(tmp_path / "kept-batch", batch.parent / "restored")  # and found again
    db = tmp_path / "gamma.duckdb"
    ok("ingest", "--db", db, folder)
    assert rows(db, "SELECT count(*) FROM calls")[0][0] == len(distinct_calls(team.parent))


def test_a_damaged_file_is_one_line_naming_it_and_the_rest_is_read(
    team: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "team"
    shutil.copytree(team, folder)
    (beta,) = (b for b, m in share_batches(folder) if m["machine"] == "beta")
    calls = beta / "calls.parquet"
    data = bytearray(calls.read_bytes())
    data[len(data) // 2] ^= 0xFF
    calls.write_bytes(bytes(data))
    db = tmp_path / "gamma.duckdb"
    result = run("ingest", "--db", db, folder)
    assert result.exit_code == 4, result.output
    said = [line for line in result.stderr.splitlines() if "calls.parquet" in line]
    assert len(said) == 1 and "damaged" in said[0] and str(calls) in said[0]
    alpha = rows(team.parent / "alpha.duckdb", "SELECT count(*) FROM calls")[0][0]
    assert rows(db, "SELECT count(*) FROM calls") == [(alpha,)]
    assert rows(
        db, "SELECT count(*) FROM messages WHERE source_id NOT IN (SELECT source_id FROM sources)"
    ) == [(0,)]
    named = run("ingest", "--db", db, beta / "manifest.json")
    assert named.exit_code == 3
    assert named.stderr.strip().splitlines()[-1].startswith(f"Error: {calls}: damaged")


def test_a_machine_name_that_cannot_be_a_folder_is_refused(team: Path, tmp_path: Path) -> None:
    db = tmp_path / "alpha.duckdb"
    shutil.copy(team.parent / "alpha.duckdb", db)
    result = run("share", "--db", db, "--machine", "../up", tmp_path / "team")
    assert result.exit_code == 3 and "cannot name a folder" in result.stderr
    assert not (tmp_path / "team").exists() and not (tmp_path / "up").exists()


@pytest.mark.slow  # a Spark session (a minute); the DuckDB reading above is the default run's
def test_spark_reads_the_shared_folder_with_the_same_incidents(team: Path, tmp_path: Path) -> None:
    reason = spark_engine.why_not()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the Spark tests: {reason}")
        pytest.skip(reason)
    folder = tmp_path / "team"
    shutil.copytree(team, folder)
    db = tmp_path / "gamma.duckdb"
    ok("ingest", "--db", db, folder)
    spark_db = tmp_path / "spark.duckdb"
    shutil.copy(db, spark_db)
    duck = json.loads(ok("detect", "--db", db, "--json").stdout)
    on_spark = ok("detect", "--db", spark_db, "--engine", "spark", "--parquet", folder, "--json")

    def key(i: dict[str, Any]) -> tuple[Any, ...]:
        return (
            i["incident_id"],
            i["n_calls"],
            round(i["wasted_usd"], 2),
            i["first_call_id"],
            i["last_call_id"],
            i["summary"],
        )

    assert duck and [key(i) for i in json.loads(on_spark.stdout)] == [key(i) for i in duck]
    assert (folder / "detected" / "incidents.parquet").exists()
    again = run("ingest", "--db", db, folder)  # what Spark wrote beside is no data unread
    assert again.exit_code == 0, again.output


def test_the_default_store_shares_this_machines_calls(tmp_path: Path) -> None:
    """Without --db: the default store, refreshed from the agents' places, shared under this
    machine's name; a refresh's usage-first reads are read whole first (the messages go too)."""
    from analyzer.engine.default_store import this_machine
    from tests.helpers import env_of

    home = tmp_path / "home"
    shutil.copytree(SAMPLE / "claude-code" / "projects", home / ".claude" / "projects")
    env = env_of(home, LLM_FORENSICS_DB=str(tmp_path / "default.duckdb"))
    runner = CliRunner(env=env)
    usage = runner.invoke(cli, ["usage", "daily", "--json"])  # a usage-first refresh
    assert usage.exit_code == 0, usage.output
    done = runner.invoke(cli, ["share", str(tmp_path / "team"), "--json"])
    assert done.exit_code == 0, done.output
    shared = json.loads(done.stdout)
    assert shared["machine"] == this_machine()
    tables = shared["manifest"]["tables"]
    calls = json.loads(usage.stdout)["totals"]["calls"]
    assert tables["calls"]["rows"] == calls > 0 and tables["messages"]["rows"] > 0
    assert Path(shared["batch"]).parent == tmp_path / "team" / this_machine()
    again = runner.invoke(cli, ["share", str(tmp_path / "team"), "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["batch"] is None
