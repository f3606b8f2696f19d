"""What a tool call and its result mean (analyzer/ingest/meaning.py): the same thing said with
other numbers, times, ids or temporary names is the same; a failure is what the output says,
whatever the exit status; and a file that merely holds error words is no failure. The rules are
tested on the shapes real agents print, and on a real run read in place."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.engine.store import open_store
from analyzer.ingest import meaning
from analyzer.ingest.base import IngestOptions
from analyzer.ingest.content import tool_result_said
from analyzer.ingest.meaning import error_said, mask, meaning_key, says_error
from analyzer.pipeline import ingest_paths
from tests.helpers import q, shared_samples


def test_the_modules_examples_hold() -> None:
    assert doctest.testmod(meaning).failed == 0


@pytest.mark.parametrize(
    ("one", "other"),
    [
        # a command's output with other timings (Codex's exec output)
        (
            "Exit code: 1\nWall time: 0.0123 seconds\nOutput:\nFAILED (errors=2)\n",
            "Exit code: 1\nWall time: 1.5 seconds\nOutput:\nFAILED (errors=3)\n",
        ),
        # the same log line at another time, from another process
        (
            "2026-03-01T10:00:01.123Z [pid 4242] listening on :8080",
            "2026-03-01T10:07:55Z [pid 977] listening on :8081",
        ),
        # ids: UUIDs, digests, provider ids, addresses
        (
            "created 3f2b8a9c-1d4e-4f5a-9b6c-7d8e9f0a1b2c at 0x7f3a2c10 (sha 9c1e4b7)",
            "created a1b2c3d4-e5f6-4a5b-8c7d-9e0f1a2b3c4d at 0x7f3a2d88 (sha 0b7f2d1)",
        ),
        ("call toolu_01AbCdEfGhIjKl2345678xyz failed", "call toolu_01ZzYyXxWw987654321abcd failed"),
        # temporary names and spacing
        ("wrote /tmp/tmpk2j3_x8a/out.txt", "wrote   /tmp/tmpzz91_qq0/out.txt"),
        ("/var/folders/x1/abc_123/T/build.log: ok", "/var/folders/q9/zz_999/T/build.log: ok"),
    ],
)
def test_the_same_thing_said_differently_means_the_same(one: str, other: str) -> None:
    assert one != other
    assert meaning_key("ok", one) == meaning_key("ok", other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("src/app.py\nsrc/db.py\n", "src/app.py\nsrc/web.py\n"),  # other files listed
        ("def f():\n    return a\n", "def f():\n    return b\n"),  # other code read
        # a redacted log keeps its digests: the same digest is the same original, another is not
        ("[REDACTED_OUTPUT len=406 sha=45aebb76]", "[REDACTED_OUTPUT len=406 sha=cb97050f]"),
    ],
)
def test_what_differs_in_content_means_something_else(one: str, other: str) -> None:
    assert meaning_key("ok", one) != meaning_key("ok", other)


def test_kind_and_tool_are_part_of_the_meaning() -> None:
    assert meaning_key("ok", "x") != meaning_key("error", "x")
    assert meaning_key("tool_call", {"cmd": "ls"}, "bash") != meaning_key(
        "tool_call", {"cmd": "ls"}, "shell"
    )
    # arguments as a JSON string or an object, in any key order, with other numbers: one action
    assert meaning_key("tool_call", '{"b": 1, "a": "sed -n 10,20p f"}', "bash") == meaning_key(
        "tool_call", {"a": "sed -n 30,40p f", "b": 2}, "bash"
    )


# How real agents' tools print a failure with exit status 0 (or none), in the shapes of real logs.
SAYS_ERROR = [
    "bash: line 1: dockr: command not found\n",
    "/bin/sh: 1: pytest: not found\n",
    "zsh: command not found: pnpm\n",
    "sh: 1: cd: can't cd to /nope\nsh: 1: syntax error: unexpected end of file\n",
    "ls: cannot access 'missing.py': No such file or directory\n",
    "cat: /etc/shadow: Permission denied\n",
    "python: can't open file '/repo/run.py': [Errno 2] No such file or directory\n",
    'Traceback (most recent call last):\n  File "t.py", line 4, in <module>\n    import foo\n'
    "ModuleNotFoundError: No module named 'foo'\n",
    '  File "x.py", line 3\n    def f(:\n          ^\nSyntaxError: invalid syntax\n',
    "fatal: not a git repository (or any of the parent directories): .git\n",
    "error[E0425]: cannot find value `x` in this scope\n",
    "npm ERR! code ENOENT\n",
    "collected 3 items\n\nt.py F..\n\n========= 1 failed, 2 passed in 0.12s =========\n",
    # mini-swe-agent 1.x writes the observation as a Python dict: line breaks escaped
    "Observation: {'output': 'bash: line 2: bashndocker: command not found\\nDONE\\n', "
    "'returncode': 0}",
    "<returncode>0</returncode>\n<output>\ncat: a.txt: No such file or directory\n</output>",
]

# Outputs that hold error words without any program failing: files read, searches, code.
SAYS_NO_ERROR = [
    "def load(p):\n    if not p.exists():\n"
    "        raise FileNotFoundError('No such file or directory')\n",
    'src/cli.py:88:    print("bash: command not found")\n',
    "     1\u2192# Troubleshooting\n     2\u2192If you see `command not found`, install it.\n",
    "docs/errors.md:12:Traceback (most recent call last): is printed when\n",
    "All 42 tests passed.\n",
    "ValueError is raised when the input is empty; see below.\nMore text follows here.\n" * 10,
    "",
]


@pytest.mark.parametrize("text", SAYS_ERROR)
def test_a_failure_is_what_the_output_says(text: str) -> None:
    assert says_error(text), text


@pytest.mark.parametrize("text", SAYS_NO_ERROR)
def test_error_words_in_content_are_no_failure(text: str) -> None:
    assert not says_error(text), text


def test_the_same_failure_beside_other_output_is_the_same_error() -> None:
    """An error is keyed on the lines that say it (masked): the same failure printed beside an
    echo of what the command wrote, or another stack, is the same error; another failure is
    another one."""
    one = tool_result_said("bash: line 1: dockr: command not found\nwrote Dockerfile v1\n", False)
    two = tool_result_said("bash: line 2: dockr: command not found\nwrote the README\n", False)
    other = tool_result_said("bash: line 1: node: command not found\n", False)
    assert one["is_error"] and two["is_error"] and other["is_error"]
    assert one["tool_result_hash"] == two["tool_result_hash"] == two["meaning_key"]
    assert other["tool_result_hash"] != one["tool_result_hash"]
    # only a summary says it: the error is keyed on all its text, masked
    summary = tool_result_said("t.py F\n===== 1 failed in 0.1s =====\n", None)
    assert summary["is_error"] and error_said("===== 1 failed in 0.1s =====") == b""
    # a flag left unknown stays unknown when the text says nothing wrong
    assert tool_result_said("all good", None)["is_error"] is None
    assert tool_result_said("all good", True)["is_error"] is True


def test_masking_a_huge_output_reads_its_head_and_tail() -> None:
    big = b"x" * (4 * meaning.MEANING_SAMPLE)
    assert meaning_key("ok", big + b"A") != meaning_key("ok", big + b"B")
    assert meaning_key("ok", b"A" + big[1:] + b"B") == meaning_key("ok", b"A" + big + b"B")
    assert mask(b"a  b\n\tc") == b"a b c"


def test_a_real_run_whose_failures_say_exit_0_is_read_as_failing(tmp_path: Path) -> None:
    """The mini-swe-agent run of real-loops-2 that got `bash...: command not found` back on 91
    of its 100 calls, each with returncode 0 (label: own reading of truth.py): read in place,
    those 91 results are errors, and the same error, though each also printed what its
    rewritten command echoed (the other 2 calls' replies were refused for their format)."""
    path = (
        shared_samples()
        / "real-loops-2/conversation_json"
        / "richardzhuang0412__mini-swe-agent-automate-repo-installation/automate"
        / "dockerfile_generation_express.traj.json"
    )
    with open_store(tmp_path / "s.duckdb") as store:
        ingest_paths(store, [str(path)], IngestOptions(progress=False))
        [(results, errors, most)] = q(
            store,
            """SELECT count(*), count(*) FILTER (WHERE is_error),
                      max(n) FROM (SELECT *, count(*) OVER (PARTITION BY tool_result_hash) AS n
                                   FROM messages WHERE kind = 'tool_result')""",
        )
    assert (results, errors, most) == (98, 91, 91)


# Pieces of what the error rules read (and of what they must not), for texts that put them
# together in every order: the words the prefilter looks for, the rules' other parts, and
# ordinary output.
_PIECES = [
    "bash: line 3: foo: ",
    "command not found",
    "No such file or directory",
    "no such file or directory",
    "Permission denied",
    "permission denied",
    "syntax error",
    "sh: 1: x: not found",
    "bash: line 3: ./run: Permission denied",
    "zsh: permission denied: ./run",
    "cat: x.txt: No such file or directory",
    "zsh: no such file or directory: ./run",
    "zsh: ",
    "SyntaxError: bad",
    "Traceback (most recent call last):\n",
    "KeyError: 'k'",
    "SystemExit",
    "KeyboardInterrupt",
    'Traceback (most recent call last):\n  File "a.py"\nSystemExit',
    'Traceback (most recent call last):\n  File "a.py"\nKeyboardInterrupt',
    'Traceback (most recent call last):\n  File "a.py"\nfoo.BarException: x',
    "ValueError",
    "RuntimeException",
    "python3: can't open file 'a.py': [Errno 2] No such file",
    "cat: x.txt: ",
    "fatal: not a git repository",
    "error[E0425]: x",
    "error: x",
    "npm ERR! code 1",
    "===== 2 failed, 3 passed in 0.1s =====",
    "== 1 error in 2s ==",
    "\n",
    "\\n",
    " ",
    "ok",
    "all good, 12 passed",
    "x" * 40,
    "Erro",
    "rror",
]


@given(st.lists(st.sampled_from(_PIECES), max_size=12))
@settings(max_examples=400, deadline=None)
def test_the_prefilter_never_changes_what_a_text_says(parts: list[str]) -> None:
    """``error_said`` skips the rules where none of the words they need is written: whatever
    the text, the answer is the rules' own."""
    text = "".join(parts)
    assert error_said(text) == meaning._said_in(text.replace("\\n", "\n"))
