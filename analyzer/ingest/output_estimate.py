"""A reply's output tokens when the log's count is a streaming placeholder (Claude Code).

Claude Code writes one API response as several lines, one per content block. Before version
2.1.97 each line carries the usage of the start of the stream: ``output_tokens`` is a
placeholder (1, 8, 41 for a reply that wrote six tool calls), ``stop_reason`` null, and the
final count is in no line. From 2.1.87 the last line of most responses carries the final
count with its ``stop_reason`` (``tool_use``, ``end_turn``); from 2.1.97 every line carries it
(Claude Code's changelog for 2.1.97/2.1.98). So a call's count is final when one of its lines
says how the response stopped, or when the transcript's version writes final counts on every
line; otherwise it is a placeholder, kept as logged, and the output is estimated from what the
call wrote.

The estimate: visible text and thinking at 3.2 characters per token, tool-call arguments
(compact JSON, with the tool's name) at 3.0, and 48 tokens for each tool call's framing. Fitted
on the 27 final counts with visible content of a real 2.1.90 transcript
(``../shared/samples/real-loops/claude_code``): median estimate/final 0.96 (0.75 to 1.24), the
sum 0.98 of the final counts, so totals lean low rather than high. It is never below the
logged count. Where a call's thinking is redacted (an empty ``thinking`` with its signature, or
a ``redacted_thinking`` block) its tokens cannot be counted from the log: the estimate is a
lower bound (one such call of that transcript wrote 1,732 tokens; its visible part estimates
at 369).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from analyzer.ingest.rows import CallRow

TEXT_CHARS_PER_TOKEN = 3.2
ARGS_CHARS_PER_TOKEN = 3.0
TOKENS_PER_TOOL_CALL = 48
# The first Claude Code version that writes the final usage on every line of a response.
FINAL_ON_EVERY_LINE = (2, 1, 97)
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


@dataclass
class OutputTally:
    """What one call wrote, as its lines are read."""

    text_chars: int = 0
    thinking_chars: int = 0
    args_chars: int = 0
    tool_calls: int = 0
    redacted: bool = False  # some thinking is in the log only as its signature
    stopped: bool = False  # a line says how the response stopped: its count is final
    final_version: bool = False  # a line is of a version that writes final counts

    def add_args(self, name: object, args: str | None) -> None:
        """A tool call named ``name`` with ``args`` as text (``content.args_text``)."""
        self.tool_calls += 1
        self.args_chars += len(args or "") + (len(name) if isinstance(name, str) else 0)

    def add_thinking(self, block: dict[str, Any]) -> None:
        if block.get("type") == "redacted_thinking":
            self.redacted = True
            return
        thought = block.get("thinking")
        if isinstance(thought, str) and thought:
            self.thinking_chars += len(thought)
        elif block.get("signature"):
            self.redacted = True

    def see_version(self, version: object) -> None:
        if isinstance(version, str):
            m = _VERSION.match(version)
            if m and tuple(int(g) for g in m.groups()) >= FINAL_ON_EVERY_LINE:
                self.final_version = True


def estimate_tokens(t: OutputTally) -> int:
    """The output tokens ``t`` adds up to (not counting a redacted thought)."""
    return math.ceil(
        (t.text_chars + t.thinking_chars) / TEXT_CHARS_PER_TOKEN
        + t.args_chars / ARGS_CHARS_PER_TOKEN
        + t.tool_calls * TOKENS_PER_TOOL_CALL
    )


def settle(call: CallRow, t: OutputTally) -> None:
    """Mark ``call`` final or not from what its lines showed; a placeholder keeps its logged
    count in ``output_tokens`` and gets ``output_estimate_tokens`` (and, where thinking is
    redacted, ``output_estimate_floor``)."""
    if t.stopped or t.final_version:
        call.output_final = True
        return
    call.output_final = False
    logged = call.output_tokens
    if logged is None:  # no usage at all: nothing to correct
        return
    call.output_estimate_tokens = max(int(logged), estimate_tokens(t))
    call.output_estimate_floor = t.redacted
