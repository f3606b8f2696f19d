"""The public API (``analyzer.api``): a notebook ingests, detects, backtests and reports with
it, gets every result as an object, and nothing is written to stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzer.api import Console, Forensics
from analyzer.model.incident import Incident
from tests.helpers import SAMPLE_DATA

UNKNOWN = "acme/secret-model-9"


def _unpriced(tmp_path: Path) -> Path:
    """A saved conversation whose model has no known price (a warning, said once)."""
    usage = {"prompt_tokens": 100, "completion_tokens": 10}
    messages = [{"role": "assistant", "content": c, "model": UNKNOWN, "usage": usage} for c in "ab"]
    f = tmp_path / "unpriced.json"
    f.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    return f


def test_a_notebook_runs_the_job_and_nothing_reaches_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Forensics.open(tmp_path / "s.duckdb") as lf:
        loaded = lf.ingest([SAMPLE_DATA, _unpriced(tmp_path)])
        incidents = lf.detect()
        guards = lf.backtest()
        summary = lf.summary()
        page = lf.report(tmp_path / "r.html")
        warnings = lf.warnings
    assert capsys.readouterr().err == ""
    assert sum(r.status == "loaded" for r in loaded) > 5  # (the sample's README is not data)
    assert incidents and all(isinstance(i, Incident) for i in incidents)
    assert [i.incident_id for i in summary.incidents] == [i.incident_id for i in incidents]
    assert guards.results
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [w for w in warnings if UNKNOWN in w] == [
        f"no price known for model {UNKNOWN!r}: its calls are left unpriced"
    ]


def test_given_a_console_it_speaks_as_the_command_line_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Forensics.open(console=Console()) as lf:  # a throwaway store in memory
        done = lf.audit([_unpriced(tmp_path)])
    err = capsys.readouterr().err
    assert err.count(f"warning: no price known for model {UNKNOWN!r}") == 1
    assert [r.calls for r in done.reports] == [2] and done.incidents == []


def test_a_store_that_must_exist_and_does_not_is_an_error(tmp_path: Path) -> None:
    from analyzer.errors import ForensicsError

    with (
        pytest.raises(ForensicsError, match="no store here"),
        Forensics.open(tmp_path / "none.duckdb", create=False),
    ):
        pass
    assert not (tmp_path / "none.duckdb").exists()


def test_the_public_names_are_loaded_when_asked_for() -> None:
    """``analyzer.api`` names its public objects and loads each where it is defined when it
    is first asked for (``api.home``, the default store, loads none of them)."""
    import analyzer.api as api

    for name in api.__all__:
        assert getattr(api, name).__name__ == name
    with pytest.raises(AttributeError):
        api.NoSuchThing  # noqa: B018
