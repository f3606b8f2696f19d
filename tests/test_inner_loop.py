"""The fast inner loop (issue 34, step 7): a plain ``pytest`` leaves the tests marked slow out
and says so; CI (``CI`` set) and ``--slow`` run everything."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.helpers import REPO


def collected(*args: str, ci: bool) -> tuple[int, int, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "1"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/test_spark.py",
            "tests/test_readme.py",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.search(r"(\d+)(?:/(\d+))? tests? collected(?: \((\d+) deselected\))?", result.stdout)
    assert found is not None, result.stdout
    total = int(found.group(2) or found.group(1)) - 2  # test_readme's two are not slow
    return total, int(found.group(3) or 0), result.stdout


def test_a_plain_run_leaves_the_slow_tests_out_and_says_so() -> None:
    total, deselected, text = collected(ci=False)
    assert total > 0 and deselected == total, text
    assert f"{total} tests marked slow were not run" in text


def test_ci_and_the_slow_flag_run_them() -> None:
    for args, ci in (((), True), (("--slow",), False)):
        total, deselected, text = collected(*args, ci=ci)
        assert total > 0 and deselected == 0, text
