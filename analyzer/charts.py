"""Charts as inline SVG: small, offline, and byte-for-byte the same for the same data.

matplotlib writes the SVG with a fixed hash salt (element ids), no date, and text kept as text
(``svg.fonttype = none``: no embedded glyphs, no font files, a generic font family). Labels come
from untrusted logs, so maths parsing is off (a ``$`` stays a dollar sign) and matplotlib's own
XML escaping keeps them inert; the result is checked for anything active before it is used.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from datetime import date
from typing import Any

_STYLE = {
    "svg.hashsalt": "llm-forensics",
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.size": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 9,
    "figure.dpi": 96,
}
SPEND = "#8da0cb"
WASTE = "#d95f02"
PROMPT = "#1b9e77"
OUTPUT = "#d95f02"
_TAG = re.compile(r"<[^>]*>")
_ACTIVE = re.compile(r"^<\s*(script|foreignObject)|\son[a-z]+\s*=|javascript:", re.IGNORECASE)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _svg(fig: Any) -> str:
    plt = _plt()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML declaration and DOCTYPE
    # Never expected (matplotlib escapes text, so data can only be text between tags), but
    # refuse rather than trust: no script, no foreign markup, no event handler in any tag.
    if any(_ACTIVE.search(tag) for tag in _TAG.findall(text)):
        raise ValueError("chart SVG contains active content")
    return text


def _short(v: float) -> str:
    for div, unit in ((1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def daily_spend(days: Sequence[date], spend: Sequence[float], wasted: Sequence[float]) -> str:
    """Spend per day, the wasted part marked."""
    plt = _plt()
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(7.2, 2.2))
        healthy = [max(s - w, 0.0) for s, w in zip(spend, wasted, strict=True)]
        ax.bar(days, healthy, color=SPEND, width=0.8, label="spend")
        ax.bar(days, wasted, bottom=healthy, color=WASTE, width=0.8, label="wasted")
        ax.set_ylabel("USD per day")
        ax.legend(frameon=False, loc="upper left")
        fig.autofmt_xdate()
        return _svg(fig)


def waste_by(labels: Sequence[str], values: Sequence[float], title: str) -> str:
    """Horizontal bars: wasted dollars by detector (or model, app, key)."""
    plt = _plt()
    with plt.rc_context(_STYLE):
        height = 0.35 + 0.28 * max(len(labels), 1)
        fig, ax = plt.subplots(figsize=(7.2, height))
        ax.barh(list(range(len(labels)))[::-1], values, color=WASTE)
        ax.set_yticks(list(range(len(labels)))[::-1], labels=list(labels))
        ax.set_xlabel("wasted USD")
        ax.set_title(title, loc="left")
        return _svg(fig)


def incident_tokens(prompt: Sequence[float | None], output: Sequence[float | None]) -> str:
    """Prompt and output tokens for each call of an incident, on one log scale: the flat
    prompt line and the floor of 3-token answers are what convinces a reader."""
    plt = _plt()
    nan = float("nan")
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(4.8, 1.9))
        xs = list(range(1, len(prompt) + 1))
        ax.plot(xs, [p if p else nan for p in prompt], color=PROMPT, marker="o", markersize=2.5,
                linewidth=1.2, label="prompt tokens")  # fmt: skip
        ax.plot(xs, [o if o else nan for o in output], color=OUTPUT, marker="s", markersize=2.5,
                linewidth=1.2, label="output tokens")  # fmt: skip
        ax.set_yscale("log")
        # Plain tick labels: the default log labels are maths, which is switched off here.
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _short(v)))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("call")
        ax.set_ylabel("tokens (log)")
        ax.legend(frameon=False, fontsize=7, loc="lower left", bbox_to_anchor=(0, 1), ncol=2)
        return _svg(fig)


def guard_sweep(series: Sequence[tuple[str, list[float], list[float], int | None]]) -> str:
    """Waste prevented against the harm done (legitimate work killed, outputs lost), as each
    policy's stop threshold moves: the picture a team uses to pick its threshold. Each series
    is (policy, harm dollars, waste-prevented dollars, index of the policy's own threshold)."""
    plt = _plt()
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(7.2, 3.2))
        ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)
        for label, xs, ys, own in series:
            (line,) = ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.2, label=label)
            if own is not None:
                ax.plot([xs[own]], [ys[own]], marker="*", markersize=10,
                        color=line.get_color())  # fmt: skip
        ax.set_xlabel("harm: legitimate work killed, outputs lost (USD)")
        ax.set_ylabel("waste prevented (USD)")
        ax.set_title("Guards as their threshold moves (star: the policy's own)", loc="left")
        ax.legend(frameon=False, fontsize=7, loc="lower left", bbox_to_anchor=(1.0, 0))
        return _svg(fig)
