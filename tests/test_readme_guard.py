"""The agent loop guarded by a preset in docs/guards.md, run as written against a scripted model
(an OpenAI-style client): a model that repeats its tool call is stopped at its third, as the
backtest replays it; one that works and answers goes through."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

from tests.helpers import doc_text

START = "```python\n# An agent loop guarded by a preset"


def readme_loop() -> str:
    text = doc_text("guards.md")
    begin = text.index(START) + len("```python\n")
    return text[begin : text.index("```", begin)]


class Obj:
    """A reply of an OpenAI-style SDK: attributes over its JSON, and ``model_dump``."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self._doc = doc

    def __getattr__(self, name: str) -> Any:
        value = self._doc.get(name)
        if isinstance(value, dict):
            return Obj(value)
        if isinstance(value, list):
            return [Obj(v) if isinstance(v, dict) else v for v in value]
        return value

    def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
        if not exclude_none:
            return self._doc
        return {k: v for k, v in self._doc.items() if v is not None}


class ScriptedClient:
    """``client.chat.completions.create``: the replies of a script, one per call."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies, self.calls = replies, 0
        self.chat = Obj({})
        self.chat.__dict__["completions"] = self

    def create(self, **_: Any) -> Obj:
        self.calls += 1
        return Obj(self.replies[self.calls - 1])


def reply(n: int, tool: tuple[str, dict[str, Any]] | None = None, text: str = "") -> dict:
    calls = []
    if tool is not None:
        name, args = tool
        function = {"name": name, "arguments": json.dumps(args)}
        calls = [{"id": f"t{n}", "type": "function", "function": function}]
    return {
        "id": f"chatcmpl-{n}",
        "created": 1_764_000_000 + n,
        "model": "gpt-4.1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if calls else "stop",
                "message": {
                    "role": "assistant",
                    "content": text or None,
                    "tool_calls": calls or None,
                },
            }
        ],
        "usage": {"prompt_tokens": 1000 + 50 * n, "completion_tokens": 20, "total_tokens": 0},
    }


def run_readme(client: ScriptedClient) -> str:
    said = io.StringIO()
    scope = {"client": client, "task": "fix the bug", "TOOLS": [], "run_tool": lambda c: "ok"}
    with contextlib.redirect_stdout(said):
        exec(readme_loop(), scope)
    return said.getvalue()


def test_a_model_repeating_its_tool_call_is_stopped_at_the_third() -> None:
    client = ScriptedClient([reply(i, ("bash", {"cmd": "ls -la"})) for i in range(10)])
    said = run_readme(client)
    assert client.calls == 3
    assert said.startswith("guard: opencode_doom_loop: 3 calls in a row with the same tool_key")


def test_a_model_that_works_and_answers_goes_through() -> None:
    script = [reply(i, ("bash", {"cmd": f"step {i}"})) for i in range(6)]
    client = ScriptedClient([*script, reply(6, text="Fixed: the off-by-one in parse().")])
    assert run_readme(client) == ""
    assert client.calls == 7
