"""Healthy OpenRouter traffic, generated a block of users at a time (vectorised, bounded memory).

Every session here is sound: an agent's prompt grows with every call (tool results, its own
output), chat prompts grow with each exchange, batch jobs re-send same-size prompts but get full
answers, reasoning models answer visibly. The only short answers are acknowledgements (2-4
tokens) on a growing prompt. Sessions of one user never overlap and are at least 35 minutes
apart, so the 30-minute session inference recovers them exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analyzer.sample.prices import PRICES, SPEED, family
from analyzer.sample.rand import Rand

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
SESSION_SPACING_MS = 35 * 60 * 1000

# Hour-of-day weights (UTC).
WORKDAY = [1, 1, 1, 1, 1, 1, 2, 4, 8, 10, 10, 9, 7, 9, 10, 10, 9, 7, 5, 4, 3, 2, 2, 1]
ALLDAY = [4, 3, 3, 3, 3, 4, 5, 6, 7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7, 7, 6, 5, 5]
NIGHTLY = [10, 10, 10, 10, 8, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 6, 10]

PROVIDERS: dict[str, tuple[list[str], list[float]]] = {
    "anthropic": (["Anthropic", "Amazon Bedrock", "Google Vertex"], [6, 3, 1]),
    "openai": (["OpenAI", "Azure"], [8, 2]),
    "google": (["Google AI Studio", "Google Vertex"], [7, 3]),
    "qwen": (["DeepInfra", "Chutes"], [6, 4]),
    "meta-llama": (["DeepInfra", "Chutes"], [5, 5]),
}
RAW_FINISH: dict[str, dict[str, str]] = {
    "anthropic": {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"},
    "google": {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS"},
}
REASONING_MODELS = {"openai/gpt-5", "openai/gpt-5-mini", "google/gemini-2.5-pro"}
FINISHES = np.array(["stop", "tool_calls", "length"])
STOP, TOOL, LENGTH = 0, 1, 2


@dataclass(frozen=True)
class Profile:
    name: str
    api_key: str
    app: str
    users: tuple[str, ...]  # the first users; more are made as user_prefix-NNNNN when needed
    user_prefix: str
    models: tuple[tuple[str, float], ...]
    kind: str  # agent | chat | batch | research
    weight: float  # share of the healthy rows
    session_len: tuple[int, int, int]  # lo, hi, skew
    hours: list[int] = field(default_factory=lambda: WORKDAY)
    variant: str = "standard"
    sessions_per_user: int = 30  # a month's sessions per user, on average, at most

    @property
    def mean_len(self) -> float:
        lo, hi, skew = self.session_len
        return lo + (hi - lo + 1) / (skew + 1)


PROFILES: tuple[Profile, ...] = (
    Profile(
        "coding_agent",
        "eng-team",
        "CodeSmith",
        ("dev-alice", "dev-bob", "dev-chen", "dev-dana", "dev-emeka", "dev-farah"),
        "dev",
        (
            ("anthropic/claude-sonnet-4.5", 50),
            ("openai/gpt-5", 20),
            ("anthropic/claude-opus-4.5", 15),
            ("anthropic/claude-haiku-4.5", 15),
        ),
        "agent",
        0.40,
        (4, 80, 2),
    ),
    Profile(
        "support_bot",
        "support-prod",
        "HelpDesk Bot",
        (),
        "cust",
        (("openai/gpt-5-mini", 70), ("anthropic/claude-haiku-4.5", 30)),
        "chat",
        0.22,
        (1, 9, 2),
        hours=ALLDAY,
        sessions_per_user=4,
    ),
    Profile(
        "ticket_triage",
        "batch-jobs",
        "TicketTriage",
        ("nightly",),
        "batch",
        (("google/gemini-2.5-flash", 100),),
        "batch",
        0.18,
        (40, 260, 1),
        hours=NIGHTLY,
    ),
    Profile(
        "research",
        "research",
        "Scholar",
        ("r-ines", "r-kofi", "r-lena"),
        "r",
        (("openai/gpt-5", 60), ("google/gemini-2.5-pro", 40)),
        "research",
        0.12,
        (2, 14, 2),
    ),
    Profile(
        "playground",
        "playground",
        "Playground",
        (),
        "guest",
        (("meta-llama/llama-3.3-70b-instruct", 100),),
        "chat",
        0.05,
        (1, 8, 2),
        hours=ALLDAY,
        variant="free",
        sessions_per_user=6,
    ),
    Profile(
        "penguin_team",
        "penguin-team",
        "Penguin",
        ("maxim", "odile"),
        "penguin",
        (("anthropic/claude-opus-4.5", 60), ("anthropic/claude-sonnet-4.5", 40)),
        "agent",
        0.03,
        (6, 60, 2),
    ),
)


@dataclass
class Acks:
    """How many short acknowledgements to place in a block (agent profiles only)."""

    three: int = 0  # exactly 3 output tokens
    other: int = 0  # 2 or 4 output tokens
    triples: int = 0  # three acknowledgements in a row, prompt still growing (2/4 tokens)


def users_for(profile: Profile, n_sessions: int) -> list[str]:
    n = max(len(profile.users), -(-n_sessions // profile.sessions_per_user), 1)
    made = [f"{profile.user_prefix}-{i:05d}" for i in range(n - len(profile.users))]
    return list(profile.users) + made


def _in_session_index(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per call: its session number and its index within the session."""
    session = np.repeat(np.arange(len(lengths)), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return session, np.arange(int(lengths.sum())) - np.repeat(starts, lengths)


def _cumsum_in_session(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    cs = np.cumsum(values)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    before = cs[starts] - values[starts]
    out: np.ndarray = cs - np.repeat(before, lengths)
    return out


@dataclass
class _Block:
    """The sessions drawn for a block, and per call its session and index within it."""

    profile: Profile
    n_sess: int
    lengths: np.ndarray
    user: np.ndarray
    model: np.ndarray  # per session: an index into model_names
    prov_u: np.ndarray  # per session: where its provider falls in the family's weights
    templated: np.ndarray  # batch: same-size prompts in the whole run
    session: np.ndarray
    idx: np.ndarray

    @property
    def total(self) -> int:
        return int(self.lengths.sum())

    @property
    def model_names(self) -> list[str]:
        return [m for m, _ in self.profile.models]


def generate_block(
    rand: Rand,
    profile: Profile,
    users: list[str],
    target: int,
    month_start_ms: int,
    month_ms: int,
    acks: Acks,
) -> dict[str, np.ndarray]:
    """Exactly ``target`` calls of ``profile`` for ``users``, as column arrays. (The steps
    draw from ``rand`` in this order: the same seed gives the same bytes.)"""
    b = _draw_sessions(rand, profile, users, target)
    visible, finish, reasoning = _output(rand, b)
    prompt = _prompt(rand, b, visible)
    gen_ms, ttft, offset, duration = _timing(rand, b, visible, reasoning)
    start = _place(rand, b, duration, month_start_ms, month_ms)
    call_keep, finish = _keep(rand, b, target, start + duration < month_start_ms + month_ms, finish)
    rows = {
        "session": b.session,
        "idx": b.idx,
        "visible": visible,
        "reasoning": reasoning,
        "finish": finish,
        "prompt": prompt,
        "gen_ms": gen_ms,
        "ttft": ttft,
        "ts_ms": start[b.session] + offset,
    }
    rows = {k: v[call_keep] for k, v in rows.items()}
    is_ack = _acknowledgements(rand, b, rows, acks)
    return _columns(rand, b, users, rows, is_ack)


def _draw_sessions(rand: Rand, profile: Profile, users: list[str], target: int) -> _Block:
    lo, hi, skew = profile.session_len
    n_sess = int(target / profile.mean_len * 1.35) + 8
    lengths = rand.ints(lo, hi, n_sess, skew)
    user = rand.ints(0, len(users) - 1, n_sess)
    model = rand.choice([w for _, w in profile.models], n_sess)
    prov_u = rand.uniform(n_sess)
    templated = rand.chance(0.5, n_sess)
    session, idx = _in_session_index(lengths)
    return _Block(profile, n_sess, lengths, user, model, prov_u, templated, session, idx)


def _output(rand: Rand, b: _Block) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Output: visible tokens (never 2-4: those are acknowledgements, placed later), how each
    call finished, and reasoning tokens."""
    kind, total, session, idx = b.profile.kind, b.total, b.session, b.idx
    if kind == "agent":
        visible = rand.ints(14, 1400, total, 3)
        finish = np.where(rand.chance(0.82, total), TOOL, STOP)
    elif kind == "batch":
        visible = rand.ints(20, 220, total, 2)
        finish = np.full(total, STOP)
    elif kind == "research":
        visible = rand.ints(120, 2600, total, 2)
        finish = np.full(total, STOP)
    else:  # chat
        visible = rand.ints(12, 700, total, 2)
        finish = np.full(total, STOP)
    last = np.concatenate([np.diff(session) != 0, [True]])
    finish = np.where(last, STOP, finish)
    if kind in ("chat", "research"):
        # An occasional answer cut off at max_tokens: complete enough, never two in a row.
        cut = rand.chance(0.012, total) & (idx > 0)
        cut &= ~np.concatenate([[False], cut[:-1]])
        finish = np.where(cut, LENGTH, finish)
        visible = np.where(cut, 4096, visible)
    s_model = b.model[session]
    is_reasoner = np.isin(np.array(b.model_names)[s_model], list(REASONING_MODELS))
    reasoning = np.where(is_reasoner, (visible * rand.between(0.4, 2.5, total)).astype(np.int64), 0)
    reasoning = np.where(finish == LENGTH, 0, reasoning)
    return visible, finish, reasoning


def _prompt(rand: Rand, b: _Block, visible: np.ndarray) -> np.ndarray:
    """Prompt: grows with every call in agents and chats; batch prompts stay put."""
    kind, total, session, idx = b.profile.kind, b.total, b.session, b.idx
    growth_extra = {  # (every profile's draw is made, whichever is used)
        "agent": rand.ints(180, 4200, total, 3),
        "chat": rand.ints(20, 320, total, 2),
        "research": rand.ints(40, 900, total, 2),
        "batch": np.zeros(total, dtype=np.int64),
    }[kind]
    base_lo, base_hi = {
        "agent": (5200, 22000),
        "chat": (700, 2600),
        "research": (1500, 6000),
        "batch": (900, 2400),
    }[kind]
    base = rand.ints(base_lo, base_hi, b.n_sess)
    if kind == "batch":
        jitter = rand.ints(-140, 140, total)
        prompt: np.ndarray = base[session] + np.where(b.templated[session], 0, jitter)
        return prompt
    prev_out = np.concatenate([[0], visible[:-1]])
    growth = np.where(idx > 0, prev_out + growth_extra, 0)
    prompt = base[session] + _cumsum_in_session(growth, b.lengths)
    return prompt


def _timing(
    rand: Rand, b: _Block, visible: np.ndarray, reasoning: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Time: each gap is the previous call's generation plus tool, user or queue time. Per
    call its generation time, time to first token and offset in its session; per session
    its duration."""
    total, idx = b.total, b.idx
    speed = np.array([SPEED[m] for m in b.model_names])[b.model[b.session]]
    ttft = 250 + rand.ints(0, 2400, total, 2)
    completion = visible + reasoning
    gen_ms = ttft + np.floor(completion / speed * 1000).astype(np.int64)
    wait_lo, wait_hi, wait_skew = {
        "agent": (600, 28000, 2),
        "chat": (12000, 420000, 2),
        "research": (30000, 900000, 2),
        "batch": (40, 700, 1),
    }[b.profile.kind]
    wait = rand.ints(wait_lo, wait_hi, total, wait_skew)
    gap = np.where(idx > 0, np.concatenate([[0], gen_ms[:-1]]) + wait, 0)
    offset = _cumsum_in_session(gap, b.lengths)
    ends = np.cumsum(b.lengths) - 1
    duration = offset[ends] + gen_ms[ends]
    return gen_ms, ttft, offset, duration


def _place(
    rand: Rand, b: _Block, duration: np.ndarray, month_start_ms: int, month_ms: int
) -> np.ndarray:
    """Each session's start: a random day and hour, then pushed apart per user (no
    overlap)."""
    n_sess, user = b.n_sess, b.user
    day = rand.ints(0, month_ms // DAY_MS - 1, n_sess)
    hour = rand.choice(b.profile.hours, n_sess)
    start = month_start_ms + day * DAY_MS + hour * HOUR_MS + rand.ints(0, HOUR_MS - 1, n_sess)
    by_user = np.lexsort((start, user))
    u_sorted, s_sorted = user[by_user], start[by_user]
    step = duration[by_user] + SESSION_SPACING_MS
    first_of_user = np.concatenate([[True], u_sorted[1:] != u_sorted[:-1]])
    group = np.cumsum(first_of_user) - 1
    cum_before = np.cumsum(step) - step
    cum_before -= cum_before[first_of_user][group]
    big = int(month_ms) * 4 + 10**12  # > any spread of values within one user; int64, exact
    placed = cum_before + (np.maximum.accumulate(s_sorted - cum_before + group * big) - group * big)
    placed_start: np.ndarray = np.empty_like(start)
    placed_start[by_user] = placed.astype(np.int64)
    return placed_start


def _keep(
    rand: Rand, b: _Block, target: int, fits: np.ndarray, finish: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Keep whole sessions in a random order until the target is met; cut the last one short
    (its new last call finishes). Which calls are kept, and how each finishes."""
    n_sess, session, idx, lengths = b.n_sess, b.session, b.idx, b.lengths
    order = rand.order(n_sess)
    order = order[fits[order]]
    cum = np.cumsum(lengths[order])
    n_keep = int(np.searchsorted(cum, target)) + 1
    if n_keep > len(order):
        raise RuntimeError(f"{b.profile.name}: could not place {target} calls")
    kept = np.sort(order[:n_keep])
    keep_len = np.zeros(n_sess, dtype=np.int64)
    keep_len[kept] = lengths[kept]
    keep_len[order[n_keep - 1]] -= int(cum[n_keep - 1] - target)
    call_keep = idx < keep_len[session]
    new_last = call_keep & (idx == keep_len[session] - 1)
    return call_keep, np.where(new_last, STOP, finish)


def _acknowledgements(rand: Rand, b: _Block, rows: dict[str, np.ndarray], acks: Acks) -> np.ndarray:
    """Acknowledgements: 2-4 output tokens on a prompt that still grows, put into ``rows``;
    which calls are one."""
    sess = rows["session"]
    ack_tokens = np.zeros(len(sess), dtype=np.int64)
    if acks.three or acks.other or acks.triples:
        if b.profile.kind != "agent":
            raise ValueError("acknowledgements belong to agent sessions")
        s_len = np.bincount(sess, minlength=b.n_sess)
        triple_sessions = np.flatnonzero(s_len >= 8)
        pick = triple_sessions[rand.order(len(triple_sessions))[: acks.triples]]
        if len(pick) < acks.triples:
            raise RuntimeError("not enough long sessions for acknowledgement triples")
        session_first = np.concatenate([[0], np.cumsum(s_len)[:-1]])
        for s in pick:
            at = session_first[s] + 3
            ack_tokens[at : at + 3] = (2, 4, 2)
        busy = np.isin(sess, pick)
        candidates = np.flatnonzero((rows["idx"] > 0) & ~busy)
        chosen = candidates[rand.order(len(candidates))[: acks.three + acks.other]]
        if len(chosen) < acks.three + acks.other:
            raise RuntimeError("not enough calls for acknowledgements")
        ack_tokens[chosen[: acks.three]] = 3
        ack_tokens[chosen[acks.three :]] = np.where(rand.chance(0.5, acks.other), 2, 4)
    is_ack = ack_tokens > 0
    rows["visible"] = np.where(is_ack, ack_tokens, rows["visible"])
    rows["reasoning"] = np.where(is_ack, 0, rows["reasoning"])
    rows["finish"] = np.where(is_ack, STOP, rows["finish"])
    is_ack_out: np.ndarray = is_ack
    return is_ack_out


def _providers(b: _Block, m_idx: np.ndarray, sess: np.ndarray) -> np.ndarray:
    """Who served each call: a provider of its model's family, by the session's draw."""
    prov = np.empty(len(sess), dtype=object)
    for i, name in enumerate(b.model_names):
        names, weights = PROVIDERS[family(name)]
        cum_w = np.cumsum(weights) / sum(weights)
        pick_p = np.minimum(np.searchsorted(cum_w, b.prov_u[sess], side="right"), len(names) - 1)
        sel = m_idx == i
        prov[sel] = np.array(names, dtype=object)[pick_p[sel]]
    return prov


def _costs(
    b: _Block, rows: dict[str, np.ndarray], m_idx: np.ndarray, fam: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per call: the cached prompt tokens, the cost and the cache's discount (nano-dollars)."""
    model_names, kind = b.model_names, b.profile.kind
    completion = rows["visible"] + rows["reasoning"]
    prompt = rows["prompt"]
    prev_prompt = np.concatenate([[0], prompt[:-1]])
    first = rows["idx"] == 0
    cached = np.zeros(len(prompt), dtype=np.int64)
    if kind in ("agent", "chat"):
        cached = np.where((fam == "anthropic") & ~first, prev_prompt, cached)
        cached = np.where((fam == "openai") & ~first, (prev_prompt // 1024) * 1024, cached)
    p_in = np.array([PRICES[m].nano()[0] for m in model_names])[m_idx]
    p_out = np.array([PRICES[m].nano()[1] for m in model_names])[m_idx]
    p_cache = np.array([PRICES[m].nano()[2] for m in model_names])[m_idx]
    cost = (prompt - cached) * p_in + cached * p_cache + completion * p_out
    cost_cache = -(cached * (p_in - p_cache))
    return cached, cost, cost_cache


def _finishes(
    finish: np.ndarray, fam: np.ndarray, cancelled: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """How each call finished, as the provider spells it and normalised (none: cancelled)."""
    finish_norm = FINISHES[finish].astype(object)
    finish_raw = finish_norm.copy()
    for fam_name, spelled in RAW_FINISH.items():
        for norm, raw in spelled.items():
            finish_raw[(fam == fam_name) & (finish_norm == norm)] = raw
    finish_norm[cancelled] = None
    finish_raw[cancelled] = None
    return finish_raw, finish_norm


def _columns(
    rand: Rand, b: _Block, users: list[str], rows: dict[str, np.ndarray], is_ack: np.ndarray
) -> dict[str, np.ndarray]:
    """The kept calls as the export's columns: who, where, and what each cost."""
    kind, profile = b.profile.kind, b.profile
    sess = rows["session"]
    n = len(sess)
    m_idx = b.model[sess]
    models = np.array(b.model_names)[m_idx]
    prov = _providers(b, m_idx, sess)
    # A cancelled chat stream stops part-way (never at 2-4 tokens: those are acknowledgements).
    cancelled = np.zeros(n, dtype=bool)
    if kind == "chat":
        cancelled = rand.chance(0.004, n) & (rows["finish"] == STOP) & ~is_ack
    rows["visible"] = np.where(cancelled, np.maximum(rows["visible"] // 2, 8), rows["visible"])
    fam = np.array([family(m) for m in b.model_names])[m_idx]
    cached, cost, cost_cache = _costs(b, rows, m_idx, fam)
    finish_raw, finish_norm = _finishes(rows["finish"], fam, cancelled)
    user_names = np.array([u or None for u in users], dtype=object)
    return {
        "ts_ms": rows["ts_ms"],
        "id_suffix": rand.ids(n),
        "cost_nano": cost,
        "cost_cache_nano": cost_cache,
        "tokens_prompt": rows["prompt"],
        "tokens_completion": rows["visible"] + rows["reasoning"],
        "tokens_reasoning": rows["reasoning"],
        "tokens_cached": cached,
        "model": models.astype(object),
        "provider": prov,
        "variant": np.full(n, profile.variant, dtype=object),
        "cancelled": cancelled,
        "streamed": np.full(n, kind != "batch"),
        "user": user_names[b.user[sess]],
        "finish_raw": finish_raw,
        "finish_norm": finish_norm,
        "gen_ms": rows["gen_ms"],
        "ttft_ms": rows["ttft"],
        "api_key": np.full(n, profile.api_key, dtype=object),
        "app": np.full(n, profile.app, dtype=object),
    }
