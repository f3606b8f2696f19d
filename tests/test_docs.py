"""The reference in ``docs/`` shows only commands that work: every ``llm-forensics`` command line
of its pages names a command the CLI has, with options that command takes; every example that
shows a command with its output (a code block opening with ``$ llm-forensics``) is run on the
data its marker names and prints the lines shown; and ``mkdocs build --strict`` passes (no
broken link or anchor, every page in the nav).

An example's marker is the HTML comment on the line before its block: ``<!-- run: SETUP, N
columns -->`` (SETUP one of ``SETUPS`` below, N the terminal's width), or ``<!-- not run:
REASON -->`` for the few that cannot run as written (a command that runs until Ctrl-C)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from analyzer.cli.main import cli
from tests.ccusage_side import real_world_home
from tests.helpers import DOCS, REPO, SampleStores, env_of, shared_samples

PAGES = sorted(DOCS.glob("*.md"))
MARKER = re.compile(r"<!-- (run: (?P<setup>.+), (?P<columns>\d+) columns|not run: (?P<why>.+)) -->")


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page: where it starts, its lines, and the line before it."""

    page: str
    line: int
    lines: tuple[str, ...]
    before: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``."""
    found, lines = [], page.read_text(encoding="utf-8").split("\n")
    start: int | None = None
    for i, line in enumerate(lines):
        if not line.startswith("```"):
            continue
        if start is None:
            start = i
        else:
            before = lines[start - 1] if start else ""
            found.append(Block(page.name, start + 1, tuple(lines[start + 1 : i]), before))
            start = None
    return found


def command_lines() -> list[tuple[str, str]]:
    """Every ``llm-forensics`` command line the pages show in code (blocks, the commands of
    JSON settings in them, and inline code), with where it is."""
    found = []
    for page in PAGES:
        for block in blocks(page):
            for n, line in enumerate(block.lines):
                where = f"{block.page}:{block.line + n + 1}"
                text = line.removeprefix("$ ").strip()
                if text.startswith("llm-forensics "):
                    # the commands' list: the description follows two spaces or more
                    found.append((where, re.split(r"\s{2,}", text)[0]))
                # a hook's command, by the bare name or the absolute path of the command
                quoted = re.findall(r'"(?:/[^"\s]*/)?(llm-forensics [^"]+)"', line)
                found += [(where, c) for c in quoted]
        for n, line in enumerate(page.read_text(encoding="utf-8").split("\n")):
            inline = re.findall(r"`(llm-forensics [^`]+)`", line)
            found += [(f"{page.name}:{n + 1}", c) for c in inline]
    return found


PLACEHOLDER = re.compile(r"[A-Z][A-Z_.]*(\.\.\.)?|~/.*|.*\$.*")


def check_command(line: str) -> None:
    """Resolve ``line`` as click parses it, without running it: each (sub-)command exists, it
    takes the options given and no more arguments than it has, and a value of a choice is one
    of its choices. A placeholder (``FILE``, ``N``, ``PATH...``) stands for any value; a
    ``a|b`` is each of them."""
    tokens = shlex.split(line.replace("[", " ").replace("]", " "), comments=True)[1:]
    for i, token in enumerate(tokens):
        if "|" in token and not token.startswith("-"):
            for each in token.split("|"):
                check_command(shlex.join(["llm-forensics", *tokens[:i], each, *tokens[i + 1 :]]))
            return
    command: click.Command = cli
    ctx = cli.make_context("llm-forensics", [], resilient_parsing=True)
    while isinstance(command, click.Group):
        group_options = []
        while tokens and tokens[0].startswith("-"):
            group_options.append(tokens.pop(0))
        parse(command, ctx, group_options)
        assert tokens, f"{line!r}: no command after {ctx.command_path!r}"
        name = tokens.pop(0)
        sub = command.get_command(ctx, name)
        assert sub is not None, f"{line!r}: no command {name!r}"
        command = sub
        ctx = click.Context(command, info_name=name, parent=ctx, resilient_parsing=True)
    parse(command, ctx, tokens)


def parse(command: click.Command, ctx: click.Context, tokens: list[str]) -> None:
    """Parse ``tokens`` as ``command``'s (click raises on an unknown option or a missing value);
    no argument left over, each choice's value one of its choices."""
    values, extra, _ = command.make_parser(ctx).parse_args(args=list(tokens))
    assert not extra, f"{ctx.command_path} takes no arguments {extra}"
    for param in command.params:
        given = values.get(param.name)
        if given is None or not isinstance(param.type, click.Choice):
            continue
        for value in given if isinstance(given, list | tuple) else [given]:
            if not PLACEHOLDER.fullmatch(value):
                param.type.convert(value, param, ctx)


def test_docs_show_commands_in_code() -> None:
    """The check below has something to check on every page that shows commands."""
    lines = command_lines()
    assert len(lines) > 40
    assert {where.split(":")[0] for where, _ in lines} >= {"commands.md", "guards.md"}


@pytest.mark.parametrize(("where", "line"), command_lines())
def test_every_command_shown_is_one_the_cli_takes(where: str, line: str) -> None:
    try:
        check_command(line)
    except click.UsageError as e:
        pytest.fail(f"{where}: {line!r}: {e.format_message()}")


def test_a_wrong_command_or_option_is_caught() -> None:
    """The check is not blind: a command or an option the CLI lacks fails it."""
    check_command("llm-forensics usage daily --breakdown --since 7d")
    check_command("llm-forensics --traceback show N --db FILE")
    for wrong in (
        "llm-forensics usage daly",
        "llm-forensics usage daily --breakdwn",
        "llm-forensics shw 4",
        "llm-forensics detectors extra",
    ):
        with pytest.raises((AssertionError, click.UsageError)):
            check_command(wrong)


# The data an example runs on: a function of (the test's folder, the run's sample stores) that
# prepares it and gives the environment the example's command runs in (from that folder).
Setup = Callable[[Path, SampleStores], dict[str, str | None]]


def _real_world_home(work: Path, _: SampleStores) -> dict[str, str | None]:
    """A home with the real-world Claude Code and Codex history where the agents keep it."""
    home = real_world_home(work)
    shutil.copytree(shared_samples() / "real-world" / "codex", home / ".codex" / "sessions")
    return env_of(home)


def _real_world_claude(work: Path, _: SampleStores) -> dict[str, str | None]:
    """A home with the real-world Claude Code history only (the one ccusage reads)."""
    return env_of(real_world_home(work))


def _sample_store(work: Path, stores: SampleStores) -> dict[str, str | None]:
    """``sample.duckdb``: the sample data audited into a store (``audit sample_data/ --db``)."""
    stores.audited(work / "sample.duckdb")
    (work / "home").mkdir()
    return env_of(work / "home")


def _anthropic_usage(work: Path, _: SampleStores) -> dict[str, str | None]:
    """An empty home whose default store holds ``tests/fixtures/anthropic_usage`` (ingested)."""
    (work / "home").mkdir()
    env = env_of(work / "home")
    fixture = str(REPO / "tests" / "fixtures" / "anthropic_usage")
    done = CliRunner(env=env).invoke(cli, ["ingest", "-q", fixture])
    assert done.exit_code == 0, done.output
    return env


def _reconcile(work: Path, _: SampleStores) -> dict[str, str | None]:
    """An empty home whose default store holds the hourly bills of ``tests/fixtures/reconcile``,
    the daily cost report and Claude Code session of ``anthropic_usage``, and the Codex
    rollouts of ``codex_forks``."""
    (work / "home").mkdir()
    env = env_of(work / "home")
    fixtures = REPO / "tests" / "fixtures"
    paths = [
        fixtures / "reconcile",
        fixtures / "anthropic_usage" / "claude-projects",
        fixtures / "anthropic_usage" / "cost_report.json",
        fixtures / "codex_forks",
    ]
    done = CliRunner(env=env).invoke(cli, ["ingest", "-q", *map(str, paths)])
    assert done.exit_code == 0, done.output
    return env


SETUPS: dict[str, Setup] = {
    "the real-world home": _real_world_home,
    "the real-world Claude Code home": _real_world_claude,
    "the sample store": _sample_store,
    "tests/fixtures/anthropic_usage": _anthropic_usage,
    "tests/fixtures/reconcile": _reconcile,
}


def examples() -> list[Block]:
    """The blocks that show a command with its output."""
    return [b for p in PAGES for b in blocks(p) if b.lines and b.lines[0].startswith("$ ")]


def test_every_example_says_how_it_runs() -> None:
    """Each example is marked: run on a known setup, or not run with its reason (a few)."""
    shown = examples()
    assert len(shown) >= 4
    not_run = []
    for block in shown:
        marker = MARKER.fullmatch(block.before.strip())
        assert marker, f"{block}: no <!-- run: ... --> or <!-- not run: ... --> before it"
        if marker["why"]:
            not_run.append(block)
        else:
            assert marker["setup"] in SETUPS, f"{block}: unknown setup {marker['setup']!r}"
    assert len(not_run) <= 2, [str(b) for b in not_run]


def shown_lines(block: Block) -> list[str]:
    """What the example shows of its output: the lines after the command, but ``...``."""
    return [line.rstrip() for line in block.lines[1:] if line.strip() != "..."]


def in_order(shown: list[str], printed: list[str]) -> str | None:
    """The first shown line not printed (after the ones before it), or None."""
    at = 0
    for line in shown:
        try:
            at = printed.index(line, at) + 1
        except ValueError:
            return line
    return None


RUN = [b for b in examples() if (m := MARKER.fullmatch(b.before.strip())) and m["setup"]]


@pytest.mark.parametrize("block", RUN, ids=str)
def test_every_example_prints_what_it_shows(
    block: Block, sample_stores: SampleStores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = MARKER.fullmatch(block.before.strip())
    assert marker is not None
    env = SETUPS[marker["setup"]](tmp_path, sample_stores)
    env["COLUMNS"] = marker["columns"]
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(block.lines[0].removeprefix("$ "))[1:]
    done = CliRunner(env=env).invoke(cli, argv)
    assert done.exit_code == 0, done.output
    printed = [line.rstrip() for line in done.output.split("\n")]
    shown = shown_lines(block)
    assert len(shown) >= 3
    missing = in_order(shown, printed)
    assert missing is None, f"{block}: not printed: {missing!r}\n--- printed:\n{done.output}"


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict``: every page in the nav, no broken link or anchor."""
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    built = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("*")}
    for page in PAGES:
        name = "index.html" if page.stem == "index" else f"{page.stem}/index.html"
        assert name in built, name
        # the site opens offline: no script, style sheet or image from the network
        html = (tmp_path / "site" / name).read_text(encoding="utf-8")
        fetched = re.findall(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=\"https?://[^\"]*", html)
        assert not fetched, (name, fetched)


def test_the_home_page_names_every_page() -> None:
    """``docs/index.md`` says what each page holds: it links every other page."""
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w-]+\.md)\)", home))
    assert linked == {p.name for p in PAGES} - {"index.md"}
