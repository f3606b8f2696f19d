"""The registry of input formats: every format module declares one spec, and sniffing,
``--format`` and the bills' lists read the specs."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import analyzer.formats as registry
from analyzer.errors import InputError
from analyzer.formats import cline_task, places
from analyzer.ingest.spec import KINDS, FormatSpec

# The sniffing order is part of what a file is read as: a change of it is a change of behaviour.
SNIFFING_ORDER = [
    "openrouter_csv",
    "litellm_spend",
    "anthropic_usage",
    "openai_usage",
    "claude_code",
    "claude_stream_json",
    "codex",
    "nexus3_raw",
    "otel",
    "gemini_stream_json",
    "gemini_cli",
    "opencode",
    "cline",
    "cline_task",
    "aider",
    "aider_chat",
    "openhands",
    "swe_agent",
    "mini_swe_agent",
    "claude_merged",
    "conversation_json",
]


def test_the_formats_in_sniffing_order() -> None:
    assert registry.format_names() == SNIFFING_ORDER
    orders = [f.sniff_order for f in registry.FORMATS]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)


def test_every_module_that_loads_a_format_declares_its_spec() -> None:
    """A module with a ``sniff`` and a ``load`` is a format, and says so with ``SPEC`` (its
    own functions, not another module's)."""
    for info in pkgutil.walk_packages(registry.__path__, prefix="analyzer.formats."):
        module = importlib.import_module(info.name)
        spec = vars(module).get("SPEC")
        if callable(vars(module).get("sniff")) and callable(vars(module).get("load")):
            assert isinstance(spec, FormatSpec), info.name
            assert spec.sniff is module.sniff and spec.load is module.load
        else:
            assert spec is None, info.name


def test_bills_by_kind() -> None:
    assert registry.billing_formats() == ["openrouter_csv", "litellm_spend"]
    assert registry.bucket_bill_formats() == ["anthropic_usage", "openai_usage"]
    assert all(f.kind in KINDS for f in registry.FORMATS)
    assert [f.name for f in registry.FORMATS if f.gateway_bill] == registry.billing_formats()


def test_a_spec_of_no_known_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        replace(registry.format_by_name("aider"), kind="diary")


def test_what_the_specs_say_of_agents_folders_and_files() -> None:
    assert registry.agent_folders() == {
        ".claude",
        ".cline",
        ".codex",
        ".gemini",
        ".nexus3",
        ".openhands",
    }
    assert [f.name for f in registry.FORMATS if f.batch] == ["claude_code"]
    assert [f.name for f in registry.FORMATS if f.member_of is not None] == ["openhands"]
    assert list(places.HOMES) == [
        "claude_code",
        "codex",
        "nexus3_raw",
        "gemini_cli",
        "opencode",
        "cline",
        "cline_task",
        "aider_chat",
        "openhands",
    ]
    assert registry.agent_files() == {".aider.chat.history.md"}


def test_the_default_places_are_formats_in_sniffing_order() -> None:
    """The places are declared apart from the formats (found without importing one): each is
    a format's, in the formats' order (the order a refresh names them in)."""
    names = registry.format_names()
    for declared in (places.HOMES, places.AGENT_FOLDERS, places.AGENT_FILES):
        assert set(declared) <= set(names)
        assert list(declared) == [n for n in names if n in declared]
    assert list(cline_task.EXTENSIONS)[:2] == list(places._VSCODE_EXTENSIONS)


def test_the_default_places_need_no_format() -> None:
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "import analyzer.formats as registry\n"
        "assert registry.default_homes({}, Path('/home/u'))\n"
        "assert '.claude' in registry.agent_folders()\n"
        "loaded = [m for m in sys.modules if m.startswith('analyzer.formats.')]\n"
        "assert loaded == ['analyzer.formats.places'], loaded\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert registry.agent_own_file(Path("x/logs.json")) == (
        "Gemini CLI saved chat (JSON or JSONL): a file of its own that holds no call"
    )


def test_an_unknown_format_is_named_with_the_known_ones() -> None:
    with pytest.raises(InputError, match="known: openrouter_csv, litellm_spend"):
        registry.format_by_name("csv")
