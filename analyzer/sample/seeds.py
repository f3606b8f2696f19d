"""The seed incidents (../shared/seeds/), planted into the sample billing export.

Each incident sits in a stream of its own (api key, app, user, model), with a few healthy
sessions of that stream on other days, so a detector that fires on the stream's normal work
shows up as a false alarm.

* seed 000 (Penguin, Dec 13): 22 calls 3.3 s apart re-sending the same 56,065-token prompt and
  getting 3 tokens back, $0.28 each (06:12-06:14); then 11 such calls at 74,748 tokens, $0.37
  each, at 06:17. The per-call dollars are the seed's billed figures; list-price arithmetic for
  Claude Opus 4.5 ($5/M in, $25/M out) gives $0.2804 and $0.3738 - the export carries what was
  billed, and the seed reports $0.28 and $0.37.
* seed 001 (Netclaw, Dec 9): a Qwen3 thinking model whose turn alternates tool calls with
  thinking-only replies (all output is reasoning), never three thinking-only in a row, until the
  60-tool-iteration cap ends the turn.
* seed 003 (ClinicalOps Agent, Dec 17 and Dec 22): three legitimate verbose reports in three
  user turns, each cut off at max_tokens (8,192) with no tool call; and, in the ETL pipeline's
  stream, a streak of six max_tokens responses carrying truncated tool calls (each output was
  thrown away, so the next prompt grows only by the error message, not by the 8,192 tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from analyzer.sample.prices import PRICES, SPEED, family
from analyzer.sample.rand import Rand
from analyzer.sample.traffic import RAW_FINISH


def at(text: str) -> int:
    """'2025-12-13 06:12:58.000' (UTC) as epoch milliseconds."""
    dt = datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


@dataclass
class Stream:
    api_key: str
    app: str
    user: str | None
    model: str
    provider: str
    caching: bool = True  # Anthropic prompt caching: the previous prompt is read from cache
    rows: list[dict[str, object]] = field(default_factory=list)
    _prev_prompt: int = 0

    def new_session(self) -> None:
        self._prev_prompt = 0

    def call(
        self,
        ts_ms: int,
        prompt: int,
        completion: int,
        finish: str,
        reasoning: int = 0,
        cost_nano: int | None = None,
        cached: int | None = None,
        ttft_ms: int = 900,
        tag: str | None = None,
    ) -> int:
        """Add one call; returns its generation time in ms. ``tag`` marks calls the agent-log
        samples re-tell (it never reaches the CSV)."""
        if cached is None:
            cached = self._prev_prompt if self.caching else 0
        p_in, p_out, p_cache = PRICES[self.model].nano()
        if cost_nano is None:
            cost_nano = (prompt - cached) * p_in + cached * p_cache + completion * p_out
        gen_ms = ttft_ms + int(completion / SPEED[self.model] * 1000)
        raw = RAW_FINISH.get(family(self.model), {}).get(finish, finish)
        self.rows.append(
            {
                "ts_ms": ts_ms,
                "cost_nano": cost_nano,
                "cost_cache_nano": -(cached * (p_in - p_cache)),
                "tokens_prompt": prompt,
                "tokens_completion": completion,
                "tokens_reasoning": reasoning,
                "tokens_cached": cached,
                "model": self.model,
                "provider": self.provider,
                "variant": "standard",
                "cancelled": False,
                "streamed": True,
                "user": self.user,
                "finish_raw": raw,
                "finish_norm": finish,
                "gen_ms": gen_ms,
                "ttft_ms": ttft_ms,
                "api_key": self.api_key,
                "app": self.app,
                "tag": tag,
            }
        )
        self._prev_prompt = prompt
        return gen_ms

    def healthy_agent_session(
        self, rand: Rand, start_ms: int, n_calls: int, base_prompt: int, ack: int | None
    ) -> None:
        """A sound agent session: growing prompt, tool calls, a closing text answer and,
        optionally, a short acknowledgement (``ack`` output tokens) to end it."""
        self.new_session()
        t, prompt = start_ms, base_prompt
        outs = rand.ints(60, 1100, n_calls, 3)
        results = rand.ints(200, 3800, n_calls, 3)
        waits = rand.ints(800, 24000, n_calls, 2)
        for i in range(n_calls):
            last = i == n_calls - 1
            out = int(outs[i])
            finish = "stop" if last else "tool_calls"
            if last and ack is not None:
                out = ack
            gen = self.call(t, prompt, out, finish)
            t += gen + int(waits[i])
            prompt += out + int(results[i])


def _seed000(rand: Rand) -> list[dict[str, object]]:
    s = Stream(
        "penguin-personal",
        "Penguin",
        None,
        "anthropic/claude-opus-4.5",
        "Amazon Bedrock",
        caching=False,
    )
    # Healthy Penguin sessions on other days, each closed by a 3-token finish_response ack.
    for day, n, base in (
        ("04 09:10", 14, 16200),
        ("08 14:31", 21, 19800),
        ("16 10:05", 11, 14100),
        ("20 16:42", 18, 22400),
    ):
        s.healthy_agent_session(rand, at(f"2025-12-{day}:07.000"), n, base, ack=3)

    # Dec 13: a normal run of tool calls, the context growing to 56,065 tokens...
    s.new_session()
    prompts = np.linspace(21480, 55412, 15).astype(int)
    t = at("2025-12-13 05:49:44.000")
    outs = rand.ints(90, 900, 14, 2)
    for i in range(14):
        s.call(t, int(prompts[i]), int(outs[i]), "tool_calls", tag="p13:normal")
        t += int((at("2025-12-13 06:12:39.000") - at("2025-12-13 05:49:44.000")) / 14)
    s.call(at("2025-12-13 06:12:39.000"), 55412, 188, "tool_calls", tag="p13:normal")
    # ... then whitespace replies that are never saved: the same prompt, 22 times, 3.3 s apart.
    t0 = at("2025-12-13 06:12:58.000")
    for k in range(22):
        s.call(t0 + k * 3300, 56065, 3, "stop", cost_nano=280_000_000, ttft_ms=1500, tag="p13:loop")
    # The user steps in; a tool reads a large file (+18,146 tokens) ...
    s.call(at("2025-12-13 06:16:38.000"), 56190, 412, "tool_calls", tag="p13:user")
    # ... and the loop starts again on the bigger prompt: 11 calls at 74,748 tokens.
    t0 = at("2025-12-13 06:17:01.200")
    for k in range(11):
        s.call(t0 + k * 3300, 74748, 3, "stop", cost_nano=370_000_000, ttft_ms=1500, tag="p13:loop")

    # Dec 15, after the WALLET_GUARD fix: empty replies are saved as a placeholder, so the
    # prompt now grows (+11 tokens a time) and the break-after-3 guard ends the run.
    s.new_session()
    t, prompt = at("2025-12-15 10:02:41.000"), 18240
    for _ in range(6):
        out = int(rand.ints(90, 800, 1, 2)[0])
        gen = s.call(t, prompt, out, "tool_calls", tag="p15:normal")
        t += gen + int(rand.ints(2000, 14000, 1)[0])
        prompt += out + int(rand.ints(300, 2600, 1)[0])
    for _ in range(3):
        gen = s.call(t, prompt, 3, "stop", ttft_ms=1400, tag="p15:placeholder")
        t += gen + 1700
        prompt += 11  # "[Empty response from model]"
    return s.rows


def _seed001(rand: Rand) -> list[dict[str, object]]:
    s = Stream(
        "netclaw-selfhost",
        "Netclaw",
        "discord:#ops",
        "qwen/qwen3-30b-a3b-thinking-2507",
        "DeepInfra",
        caching=False,
    )
    # Healthy turns on other days: a question, a few tool calls, a visible answer.
    for day, n in (("03 08:20:05", 4), ("11 13:02:40", 6), ("18 21:45:12", 3)):
        s.new_session()
        t, prompt = at(f"2025-12-{day}.000"), int(rand.ints(9000, 11000, 1)[0])
        for i in range(n):
            last = i == n - 1
            reasoning = int(rand.ints(500, 3500, 1)[0])
            visible = int(rand.ints(300, 900, 1)[0]) if last else int(rand.ints(60, 200, 1)[0])
            gen = s.call(
                t, prompt, reasoning + visible, "stop" if last else "tool_calls", reasoning
            )
            t += gen + int(rand.ints(1000, 6000, 1)[0])
            prompt += visible + int(rand.ints(400, 3600, 1)[0])

    # Dec 9: one turn, 60 tool iterations, thinking-only replies in between (0-2 at a time).
    s.new_session()
    t, prompt = at("2025-12-09 19:02:11.000"), 9850
    after = rand.choice([0.25, 0.40, 0.35], 60)
    for i in range(60):
        reasoning = int(rand.ints(600, 4800, 1)[0])
        visible = int(rand.ints(60, 220, 1)[0])
        gen = s.call(
            t, prompt, reasoning + visible, "tool_calls", reasoning, ttft_ms=700, tag="n09:tool"
        )
        t += gen + int(rand.ints(1000, 6000, 1)[0])
        prompt += visible + int(rand.ints(400, 3600, 1)[0])
        if i == 59:
            break  # MaxToolIterationsPerTurn (60) ends the turn
        for _ in range(int(after[i])):
            if prompt > 118_000:  # context overflow: compaction, then re-reasoning
                prompt = int(rand.ints(19000, 24000, 1)[0])
            thinking = int(rand.ints(6000, 34000, 1, skew=2)[0])
            gen = s.call(t, prompt, thinking, "stop", thinking, ttft_ms=700, tag="n09:thinking")
            t += gen + 400
            prompt += 46  # the retry nudge
        if prompt > 118_000:
            prompt = int(rand.ints(19000, 24000, 1)[0])
    return s.rows


def _seed003(rand: Rand) -> list[dict[str, object]]:
    dan = Stream(
        "healthcare-agents",
        "ClinicalOps Agent",
        "dan.bo",
        "anthropic/claude-sonnet-4.5",
        "Anthropic",
    )
    dan.healthy_agent_session(rand, at("2025-12-11 15:20:33.000"), 7, 6400, ack=None)
    dan.healthy_agent_session(rand, at("2025-12-19 09:41:02.000"), 5, 6600, ack=None)
    # Dec 17: three user turns, three verbose answers, each cut at 8,192 tokens, no tool call.
    dan.new_session()
    dan.call(at("2025-12-17 10:04:12.000"), 6850, 8192, "length")
    dan.call(at("2025-12-17 10:12:49.000"), 6850 + 8192 + 61, 8192, "length")
    dan.call(at("2025-12-17 10:21:30.000"), 6850 + 8192 + 61 + 8192 + 44, 8192, "length")

    etl = Stream(
        "healthcare-agents",
        "ClinicalOps Agent",
        "etl-pipeline",
        "anthropic/claude-sonnet-4.5",
        "Anthropic",
    )
    etl.healthy_agent_session(rand, at("2025-12-05 02:15:09.000"), 16, 8800, ack=None)
    etl.healthy_agent_session(rand, at("2025-12-12 02:15:04.000"), 13, 8700, ack=None)
    # Dec 22: normal tool calls, then six tool calls cut off by max_tokens, one after another.
    etl.new_session()
    t, prompt = at("2025-12-22 02:15:02.000"), 8900
    for _ in range(12):
        out = int(rand.ints(80, 700, 1, 2)[0])
        gen = etl.call(t, prompt, out, "tool_calls")
        t += gen + int(rand.ints(1500, 9000, 1)[0])
        prompt += out + int(rand.ints(300, 2500, 1)[0])
    for _ in range(6):
        gen = etl.call(t, prompt, 8192, "length")
        t += gen + int(rand.ints(1800, 4200, 1)[0])
        prompt += int(rand.ints(158, 171, 1)[0])  # "tool call arguments were truncated"
    return dan.rows + etl.rows


def planted_rows(seed: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for stream, build in enumerate((_seed000, _seed001, _seed003)):
        rows += build(Rand(seed, 10 + stream))
    return rows
