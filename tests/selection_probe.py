"""A pytest plugin for tests/test_inner_loop.py, loaded with ``-p tests.selection_probe``: it
writes to ``$SELECTION_PROBE`` (JSON) every test collected, whether it is marked slow, and the
tests left selected once every other plugin (``conftest.py``'s slow filter among them) has had
its say."""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from pathlib import Path

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    collected = {item.nodeid: item.get_closest_marker("slow") is not None for item in items}
    yield
    selected = [item.nodeid for item in items]
    probe = {"collected": collected, "selected": selected}
    Path(os.environ["SELECTION_PROBE"]).write_text(json.dumps(probe), encoding="utf-8")
