"""The README opens with the two commands that work on a fresh machine; CI runs the second."""

from __future__ import annotations

import re

from tests.helpers import REPO


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.+?)\n```", text)


def test_readme_opens_with_the_run_and_test_commands() -> None:
    run, test = readme_commands()[:2]
    assert "pip install ." in run and "llm-forensics audit sample_data/ -o report.html" in run
    assert "pip install -e '.[test]'" in test and "pytest" in test
    head = (REPO / "README.md").read_text(encoding="utf-8")[:700]
    assert run in head and test in head


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    test = readme_commands()[1]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert test in ci.splitlines()
