"""The OpenRouter activity CSV ingestor on small fixture files."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path

import pytest

from analyzer.engine.store import Store
from analyzer.errors import InputError, StrictRejectError
from analyzer.ingest.base import IngestOptions
from analyzer.pipeline import ingest_paths
from tests.helpers import HEADER, or_row, write_csv

OPTS = IngestOptions()


def rows(n: int, start: int = 0, **overrides: object) -> list[dict[str, object]]:
    return [or_row(i, **overrides) for i in range(start, start + n)]


def ingest(store: Store, *paths: Path, **opts: object) -> list:
    return ingest_paths(store, [str(p) for p in paths], IngestOptions(**opts))  # type: ignore[arg-type]


def q(store: Store, sql: str, params: list[object] | None = None) -> list[tuple]:
    return store.con.execute(sql, params or []).fetchall()


def assert_accounted(store: Store) -> None:
    bad = q(
        store,
        """SELECT path FROM sources
           WHERE rows_read <> rows_loaded + rows_rejected + rows_duplicate + rows_skipped""",
    )
    assert bad == []
    # And the counts match what the tables hold.
    for sid, loaded, rejected in q(
        store, "SELECT source_id, rows_loaded, rows_rejected FROM sources"
    ):
        assert q(store, "SELECT count(*) FROM calls WHERE source_id = ?", [sid])[0][0] == loaded
        assert q(store, "SELECT count(*) FROM rejects WHERE source_id = ?", [sid])[0][0] == rejected


def test_good_file_loads_every_row_typed(store: Store, tmp_path: Path) -> None:
    f = write_csv(tmp_path / "a.csv", rows(20))
    [report] = ingest(store, f)
    assert (report.status, report.format) == ("loaded", "openrouter_csv")
    assert (report.rows_read, report.rows_loaded, report.rows_rejected) == (20, 20, 0)
    row = q(
        store,
        """SELECT call_id, native_id, ts, input_tokens, output_tokens, cost_usd, cost_basis,
                  model, app, api_key, user_id, finish_reason, response_kind, streamed,
                  cancelled, duration_ms, line, stream_key
           FROM calls ORDER BY seq LIMIT 1""",
    )[0]
    assert row[0] == "or:gen-1765605600-row00000"
    assert row[1] == "gen-1765605600-row00000"
    assert str(row[2]) == "2025-12-13 06:00:00"
    assert row[3:7] == (1000, 120, Decimal("0.0123"), "billed")
    assert row[7:11] == ("anthropic/claude-sonnet-4.5", "App A", "key-a", "u1")
    assert row[11:15] == ("stop", "text", True, False)
    assert row[15] == 2100.0
    assert row[16] == 2  # header is line 1
    assert row[17] == "key-a|App A|u1|anthropic/claude-sonnet-4.5"
    assert_accounted(store)


def test_columns_in_any_order_and_optional_columns_missing(store: Store, tmp_path: Path) -> None:
    columns = [
        "model_permaslug",
        "tokens_completion",
        "created_at",
        "generation_id",
        "tokens_prompt",
        "cost_total",
    ]
    f = write_csv(tmp_path / "r.csv", rows(5), columns=columns)
    [report] = ingest(store, f)
    assert report.rows_loaded == 5
    got = q(
        store,
        "SELECT input_tokens, output_tokens, cost_usd, app, provider FROM calls "
        "ORDER BY seq LIMIT 1",
    )
    assert got == [(1000, 120, Decimal("0.0123"), None, None)]


def test_unknown_columns_are_ignored_and_named_once(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    columns = [*HEADER, "shiny_new_column", "another"]
    f = write_csv(tmp_path / "x.csv", rows(3, shiny_new_column="z"), columns=columns)
    [report] = ingest(store, f)
    assert report.rows_loaded == 3
    err = capsys.readouterr().err
    assert err.count("ignoring unknown columns: shiny_new_column, another") == 1


def test_bom_crlf_and_quoted_fields(store: Store, tmp_path: Path) -> None:
    data = rows(4)
    data[1]["app_name"] = 'My "quoted", app'
    f = write_csv(tmp_path / "bom.csv", data, newline="\r\n", bom=True)
    [report] = ingest(store, f)
    assert (report.rows_read, report.rows_loaded, report.rows_rejected) == (4, 4, 0)
    assert q(store, "SELECT app FROM calls WHERE native_id = ?", [data[1]["generation_id"]]) == [
        ('My "quoted", app',)
    ]
    # The BOM did not leak into the first column's name or values.
    assert q(store, "SELECT count(*) FROM calls WHERE native_id LIKE 'gen-%'")[0][0] == 4


def test_gzip_is_sniffed_from_content_not_name(store: Store, tmp_path: Path) -> None:
    gz = write_csv(tmp_path / "export.csv.gz", rows(6), gz=True)
    odd = write_csv(tmp_path / "export.data", rows(3, start=100), gz=True)
    reports = ingest(store, gz, odd)
    assert [r.rows_loaded for r in reports] == [6, 3]
    assert q(store, "SELECT count(*) FROM calls")[0][0] == 9


def test_three_broken_rows_among_100(store: Store, tmp_path: Path) -> None:
    data = rows(100)
    data[9]["created_at"] = "13/12/2025 at dawn"  # line 11
    data[40]["tokens_prompt"] = "n/a"  # line 42
    f = tmp_path / "broken.csv"
    write_csv(f, data)
    lines = f.read_text().splitlines()
    lines[76] = "gen-short-row,2025-12-13 07:00:00.000,0.1"  # line 77: too few fields
    f.write_text("\n".join(lines) + "\n")

    [report] = ingest(store, f)
    assert (report.rows_read, report.rows_loaded, report.rows_rejected) == (100, 97, 3)
    rejects = q(store, "SELECT line, reason, excerpt FROM rejects ORDER BY line")
    assert [r[0] for r in rejects] == [11, 42, 77]
    assert "created_at" in rejects[0][1] and "13/12/2025 at dawn" in rejects[0][1]
    assert "tokens_prompt" in rejects[1][1] and '"n/a"' in rejects[1][1]
    assert "missing columns" in rejects[2][1]
    assert rejects[2][2].startswith("gen-short-row")
    assert rejects[0][2].startswith("gen-1765605609-row00009")
    # Good rows keep their own line numbers, also after the refused one.
    assert q(store, "SELECT line FROM calls WHERE native_id = 'gen-1765605699-row00099'") == [
        (101,)
    ]
    assert_accounted(store)


def test_strict_makes_a_reject_an_error_and_loads_nothing(store: Store, tmp_path: Path) -> None:
    data = rows(10)
    data[3]["tokens_completion"] = "-5"
    f = write_csv(tmp_path / "s.csv", data)
    with pytest.raises(StrictRejectError) as exc:
        ingest(store, f, strict=True)
    assert exc.value.line == 5 and "tokens_completion" in str(exc.value)
    assert q(store, "SELECT count(*) FROM calls")[0][0] == 0
    assert q(store, "SELECT count(*) FROM sources")[0][0] == 0
    assert q(store, "SELECT count(*) FROM rejects")[0][0] == 0


@pytest.mark.parametrize(
    ("column", "value", "fragment"),
    [
        ("cost_total", "abc", "cost_total"),
        ("cost_total", "NaN", "cost_total"),
        ("cost_total", "-1", "cost_total"),
        ("cost_total", "1e30", "cost_total"),
        ("tokens_completion", "12.5", "tokens_completion"),
        ("tokens_completion", "", "tokens_completion is empty"),
        ("generation_id", "", "generation_id is empty"),
        ("model_permaslug", " ", "model_permaslug is empty"),
        ("streamed", "maybe", "streamed"),
        ("generation_time_ms", "-3", "generation_time_ms"),
    ],
)
def test_value_rejects_name_the_column(
    store: Store, tmp_path: Path, column: str, value: str, fragment: str
) -> None:
    data = rows(3)
    data[1][column] = value
    [report] = ingest(store, write_csv(tmp_path / "v.csv", data))
    assert (report.rows_loaded, report.rows_rejected) == (2, 1)
    [(line, reason)] = q(store, "SELECT line, reason FROM rejects")
    assert line == 3 and fragment in reason


def test_negative_cache_cost_is_a_discount_not_an_error(store: Store, tmp_path: Path) -> None:
    f = write_csv(tmp_path / "c.csv", rows(2, cost_cache="-0.0042", tokens_cached="800"))
    [report] = ingest(store, f)
    assert report.rows_loaded == 2
    assert q(store, "SELECT DISTINCT cost_cache_usd, cached_input_tokens FROM calls") == [
        (Decimal("-0.0042"), 800)
    ]


def test_missing_required_column_is_an_error_naming_it(store: Store, tmp_path: Path) -> None:
    columns = [c for c in HEADER if c != "tokens_prompt"]
    f = write_csv(tmp_path / "m.csv", rows(3), columns=columns)
    with pytest.raises(InputError) as exc:
        ingest(store, f)
    assert "missing required column tokens_prompt" in str(exc.value)
    assert str(exc.value).startswith(str(f))
    assert q(store, "SELECT count(*) FROM sources")[0][0] == 0


@pytest.mark.parametrize(
    "content",
    [b'{"not": "a csv"}\n', b"just some words\nand more words\n", bytes(range(256)) * 4],
)
def test_not_a_recognised_format(store: Store, tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "mystery.csv"
    f.write_bytes(content)
    with pytest.raises(InputError) as exc:
        ingest(store, f)
    message = str(exc.value)
    assert message.startswith(str(f)) and "not a recognised input format" in message
    assert "OpenRouter activity export (CSV)" in message


def test_folders_are_walked_and_non_data_files_listed_not_loaded(
    store: Store, tmp_path: Path
) -> None:
    (tmp_path / "exports" / "nested").mkdir(parents=True)
    write_csv(tmp_path / "exports" / "a.csv", rows(4))
    write_csv(tmp_path / "exports" / "nested" / "b.csv.gz", rows(5, start=50), gz=True)
    (tmp_path / "exports" / "notes.md").write_text("# notes\n")
    (tmp_path / "exports" / ".hidden.csv").write_text("garbage")
    reports = ingest(store, tmp_path / "exports")
    assert [(Path(r.path).name, r.status) for r in reports] == [
        ("a.csv", "loaded"),
        ("notes.md", "unrecognised"),
        ("b.csv.gz", "loaded"),
    ]
    assert q(store, "SELECT count(*) FROM calls")[0][0] == 9


def test_same_file_twice_adds_nothing(store: Store, tmp_path: Path) -> None:
    f = write_csv(tmp_path / "a.csv", rows(10))
    first = ingest(store, f)
    copy = tmp_path / "copy-of-a.csv"
    copy.write_bytes(f.read_bytes())
    second = ingest(store, f, copy)
    assert first[0].status == "loaded"
    assert [r.status for r in second] == ["unchanged", "unchanged"]
    assert q(store, "SELECT count(*) FROM calls")[0][0] == 10
    assert q(store, "SELECT count(*) FROM sources")[0][0] == 1


def test_overlapping_exports_load_each_generation_once(store: Store, tmp_path: Path) -> None:
    nov = write_csv(tmp_path / "nov.csv", rows(60))
    dec = write_csv(tmp_path / "dec.csv", rows(60, start=40))  # rows 40..59 in both
    a, b = ingest(store, nov, dec)
    assert (a.rows_loaded, a.rows_duplicate) == (60, 0)
    assert (b.rows_read, b.rows_loaded, b.rows_duplicate) == (60, 40, 20)
    assert q(store, "SELECT count(*), count(DISTINCT native_id) FROM calls") == [(100, 100)]
    again = ingest(store, nov, dec)
    assert [r.status for r in again] == ["unchanged", "unchanged"]
    assert q(store, "SELECT count(*) FROM calls")[0][0] == 100
    assert_accounted(store)


def test_duplicate_rows_inside_one_file(store: Store, tmp_path: Path) -> None:
    data = rows(5)
    data.append(dict(data[2]))
    [report] = ingest(store, write_csv(tmp_path / "d.csv", data))
    assert (report.rows_read, report.rows_loaded, report.rows_duplicate) == (6, 5, 1)
    assert q(store, "SELECT line FROM calls WHERE native_id = ?", [data[2]["generation_id"]]) == [
        (4,)
    ]


def test_repeated_header_is_skipped_and_counted(store: Store, tmp_path: Path) -> None:
    f = tmp_path / "two.csv"
    text = write_csv(tmp_path / "p1.csv", rows(3)).read_text()
    text2 = write_csv(tmp_path / "p2.csv", rows(3, start=10)).read_text()
    f.write_text(text + text2)
    [report] = ingest(store, f)
    assert (report.rows_read, report.rows_loaded, report.rows_skipped) == (7, 6, 1)
    assert q(store, "SELECT skipped_kinds FROM sources")[0][0] == '{"repeated_header": 1}'


def test_timestamps_are_stored_in_utc(store: Store, tmp_path: Path) -> None:
    data = [
        or_row(0, created_at="2025-12-13 06:12:58.000"),
        or_row(1, created_at="2025-12-13T06:12:59"),
        or_row(2, created_at="2025-12-13T07:13:00+01:00"),
        or_row(3, created_at="1765606381"),
    ]
    ingest(store, write_csv(tmp_path / "t.csv", data), tz="Europe/Berlin")
    got = [str(r[0]) for r in q(store, "SELECT ts FROM calls ORDER BY native_id")]
    # Naive times are Berlin (UTC+1 in December); an explicit offset and epoch are absolute.
    assert got == [
        "2025-12-13 05:12:58",
        "2025-12-13 05:12:59",
        "2025-12-13 06:13:00",
        "2025-12-13 06:13:01",
    ]


def test_finish_reasons_and_response_kinds_from_billing_rows(store: Store, tmp_path: Path) -> None:
    cases = [
        (
            {"finish_reason_normalized": "tool_calls", "finish_reason_raw": "tool_use"},
            "tool_calls",
            "tool_call",
        ),
        ({"tokens_completion": "0", "finish_reason_normalized": "stop"}, "stop", "empty"),
        ({"tokens_completion": "900", "tokens_reasoning": "900"}, "stop", "thinking_only"),
        ({"tokens_completion": "900", "tokens_reasoning": "400"}, "stop", "text"),
        ({"finish_reason_normalized": "", "finish_reason_raw": "max_tokens"}, "length", "text"),
        (
            {"finish_reason_normalized": "", "finish_reason_raw": "", "cancelled": "true"},
            "cancelled",
            "text",
        ),
        ({"finish_reason_normalized": "error", "tokens_completion": "0"}, "error", "error"),
        ({"finish_reason_normalized": "", "finish_reason_raw": "weird"}, "unknown", "text"),
    ]
    data = [or_row(i, **c) for i, (c, _, _) in enumerate(cases)]
    ingest(store, write_csv(tmp_path / "k.csv", data))
    got = q(store, "SELECT finish_reason, response_kind FROM calls ORDER BY seq")
    assert got == [(f, k) for _, f, k in cases]


def test_sessions_split_on_gaps_and_seq_orders_each_stream(store: Store, tmp_path: Path) -> None:
    data = [
        or_row(0, created_at="2025-12-13 06:00:00.000"),
        or_row(1, created_at="2025-12-13 06:10:00.000"),
        or_row(2, created_at="2025-12-13 06:45:00.000"),  # 35 min later: new session
        or_row(3, created_at="2025-12-13 06:05:00.000", api_key_name="key-b"),
    ]
    ingest(store, write_csv(tmp_path / "g.csv", data))
    got = q(store, "SELECT native_id, seq, session_id FROM calls ORDER BY stream_key, seq")
    a = "key-a|App A|u1|anthropic/claude-sonnet-4.5"
    assert [(r[1], r[2]) for r in got] == [
        (1, f"{a}@2025-12-13T06:00:00.000000"),
        (2, f"{a}@2025-12-13T06:00:00.000000"),
        (3, f"{a}@2025-12-13T06:45:00.000000"),
        (1, "key-b|App A|u1|anthropic/claude-sonnet-4.5@2025-12-13T06:05:00.000000"),
    ]
    ingest(store, write_csv(tmp_path / "g2.csv", data), session_gap_s=3600)
    assert q(store, "SELECT count(DISTINCT session_id) FROM calls")[0][0] == 3  # unchanged file


def test_month_by_month_gives_the_same_sessions_as_one_export(tmp_path: Path) -> None:
    from analyzer.engine.store import open_store

    rng = random.Random(7)
    data, t = [], 0
    for i in range(300):
        t += rng.choice([5, 20, 60, 2400])  # some gaps over 30 minutes
        data.append(
            or_row(
                i,
                created_at=f"2025-12-{1 + t // 86400:02d} "
                f"{t % 86400 // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}.000",
                api_key_name=rng.choice(["k1", "k2"]),
            )
        )
    whole = write_csv(tmp_path / "whole.csv", data)
    part1 = write_csv(tmp_path / "p1.csv", data[:170])
    part2 = write_csv(tmp_path / "p2.csv", data[150:])  # overlaps by 20 rows
    results = []
    for files in ([whole], [part1, part2], [part2, part1]):  # the last one loads backwards
        db = tmp_path / f"db{len(results)}.duckdb"
        with open_store(db) as s:
            ingest_paths(s, [str(f) for f in files], OPTS)
            results.append(
                q(s, "SELECT native_id, stream_key, seq, session_id FROM calls ORDER BY native_id")
            )
    assert len(results[0]) == 300
    assert results[0] == results[1] == results[2]


def test_record_lines_are_exact_in_a_large_file(store: Store, tmp_path: Path) -> None:
    """DuckDB reads big files in parallel; record order and line numbers must survive that."""
    n = 120_000
    data = rows(n)
    bad_value = {1000: "tokens_prompt", 50_000: "created_at", 119_998: "cost_total"}
    for i, col in bad_value.items():
        data[i][col] = "garbage"
    f = tmp_path / "big.csv"
    write_csv(f, data)
    lines = f.read_text().splitlines()
    short = [2_500, 77_777]  # 0-based record index -> line index + 1
    for i in short:
        lines[i + 1] = "short,row"
    f.write_text("\n".join(lines) + "\n")
    [report] = ingest(store, f)
    assert report.rows_read == n
    assert report.rows_rejected == 5
    assert [r[0] for r in q(store, "SELECT line FROM rejects ORDER BY line")] == sorted(
        [i + 2 for i in bad_value] + [i + 2 for i in short]
    )
    # Every loaded row sits on its own line (id i is on line i + 2).
    mismatched = q(
        store,
        """SELECT count(*) FROM calls
           WHERE line <> CAST(split_part(native_id, 'row', 2) AS BIGINT) + 2""",
    )[0][0]
    assert mismatched == 0
    assert_accounted(store)
