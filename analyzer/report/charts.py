"""Charts as inline SVG: small, offline, and byte-for-byte the same for the same data.

matplotlib writes the SVG with a fixed hash salt (element ids), no date, and text kept as text
(``svg.fonttype = none``: no embedded glyphs, no font files, a generic font family). Labels come
from untrusted logs, so maths parsing is off (a ``$`` stays a dollar sign) and matplotlib's own
XML escaping keeps them inert; the result is checked for anything active before it is used.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Sequence
from datetime import date
from decimal import Decimal
from typing import Any

from analyzer.model.formatting import cut, money, visible

_STYLE = {
    "svg.hashsalt": "llm-forensics",
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.family": "sans-serif",
    # 9 pt is 12 px in the page at its natural size (an SVG point is 4/3 px): readable ticks.
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 10,
    "figure.dpi": 96,
}
SPEND = "#8da0cb"
WASTE = "#d95f02"
PROMPT = "#1b9e77"
OUTPUT = "#d95f02"
MUTED = "#b8c0c8"
INK = "#1f2328"
ERROR = "#c62828"
LABEL_CHARS = 48  # a bar's label: a model or detector name, cut beyond this
_TAG = re.compile(r"<[^>]*>")
_ACTIVE = re.compile(r"^<\s*(script|foreignObject)|\son[a-z]+\s*=|javascript:", re.IGNORECASE)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _svg(fig: Any) -> str:
    plt = _plt()
    for k, a in enumerate(fig.findobj(lambda a: a.get_gid() == "mark"), 1):
        a.set_gid(f"mark-{k}")
    buf = io.StringIO()
    with warnings.catch_warnings():
        # A name from a log in a script the font lacks is drawn as a box, not said on stderr.
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font")
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


def _marks(*artists: Any) -> None:
    """Name the artists that draw data (``mark-N`` in the SVG, numbered when it is written),
    so a test can tell a chart that draws something from an empty frame."""
    for artist in artists:
        for a in artist if isinstance(artist, list | tuple) else [artist]:
            a.set_gid("mark")


def _dollars(ax: Any, axis: str = "y") -> None:
    from matplotlib.ticker import FuncFormatter

    def label(v: float, _pos: int | None) -> str:
        # One format for the whole axis: whole dollars once it reaches $20, else cents.
        low, high = ax.get_ylim() if axis == "y" else ax.get_xlim()
        whole = max(abs(low), abs(high)) >= 20
        text = f"${abs(v):,.0f}" if whole else f"${abs(v):,.2f}"
        return "-" + text if v < 0 and text.strip("$0.,") else text

    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(FuncFormatter(label))


def _integers(ax: Any, axis: str = "x") -> None:
    from matplotlib.ticker import MaxNLocator

    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True, nbins=8))


def daily_spend(
    days: Sequence[date], spend: Sequence[float], wasted: Sequence[float], unit: str = "day"
) -> str:
    """Spend per day (or week, or month: ``unit``), the wasted part marked."""
    plt = _plt()
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(7.2, 2.4))
        width = {"day": 0.8, "week": 5.6, "month": 24.0}[unit]
        healthy = [max(s - w, 0.0) for s, w in zip(spend, wasted, strict=True)]
        bars = ax.bar(days, healthy, color=SPEND, width=width, label="spend")
        _marks(list(bars))
        if any(w > 0 for w in wasted):
            _marks(
                list(ax.bar(days, wasted, bottom=healthy, color=WASTE, width=width, label="wasted"))
            )
        ax.set_ylabel(f"USD per {unit}")
        _dollars(ax)
        ax.legend(frameon=False, loc="upper left")
        fig.autofmt_xdate()
        return _svg(fig)


def waste_by(labels: Sequence[str], values: Sequence[Decimal | float], title: str) -> str:
    """Horizontal bars: wasted dollars by detector (or model), each labelled with its amount
    (an exact ``Decimal`` is printed as it is; only the bars are drawn in floats), so that
    $0.02 next to $10 is still seen."""
    plt = _plt()
    labels = [cut(visible(x), LABEL_CHARS) for x in labels]  # names from logs
    with plt.rc_context(_STYLE):
        height = 0.5 + 0.3 * max(len(labels), 1)
        # The labels sit left of the figure's box (the tight crop takes them in): narrow the
        # bars by their width, so the whole chart keeps about 7.4 in (its text at 12 px).
        label_in = 0.068 * max((len(x) for x in labels), default=0)
        fig, ax = plt.subplots(figsize=(max(3.5, 7.0 - label_in), height))
        ys = list(range(len(labels)))[::-1]
        widths = [float(v) for v in values]
        bars = ax.barh(ys, widths, color=WASTE)
        _marks(list(bars))
        top = max(widths) if widths else 1.0
        for y, w, v in zip(ys, widths, values, strict=True):
            ax.text(w + top * 0.01, y, money(v), va="center", fontsize=9, color=INK)
        ax.set_xlim(0, top * 1.18 or 1)
        ax.set_yticks(ys, labels=list(labels))
        ax.set_xlabel("wasted USD")
        _dollars(ax, "x")
        ax.set_title(title, loc="left")
        return _svg(fig)


def incident_tokens(prompt: Sequence[float | None], output: Sequence[float | None]) -> str:
    """Prompt and output tokens for each call of an incident: the flat prompt line and the
    floor of 3-token answers are what convinces a reader. A log scale when the two are
    decades apart, with at least two labelled ticks."""
    plt = _plt()
    nan = float("nan")
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(5.4, 2.2))
        xs = list(range(1, len(prompt) + 1))
        ps = [p if p else nan for p in prompt]
        os_ = [o if o else nan for o in output]
        (a,) = ax.plot(
            xs, ps, color=PROMPT, marker="o", markersize=3, linewidth=1.2, label="prompt tokens"
        )
        (b,) = ax.plot(
            xs, os_, color=OUTPUT, marker="s", markersize=3, linewidth=1.2, label="output tokens"
        )
        _marks(a, b)
        values = [v for v in [*ps, *os_] if v == v]
        from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

        low, high = (min(values), max(values)) if values else (1.0, 10.0)
        if high / max(low, 1) >= 20:
            ax.set_yscale("log")
            ax.set_ylabel("tokens (log)")
            decades = [10.0**k for k in range(0, 9) if low / 10 <= 10.0**k <= high * 10]
            ax.yaxis.set_major_locator(FixedLocator(decades))
            ax.yaxis.set_minor_formatter(NullFormatter())
        else:
            ax.set_ylim(0, high * 1.15)
            ax.set_ylabel("tokens")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _short(v)))
        _integers(ax)
        ax.set_xlim(0.5, len(xs) + 0.5)
        ax.set_xlabel("call")
        ax.legend(frameon=False, loc="lower left", bbox_to_anchor=(0, 1), ncol=2)
        return _svg(fig)


def call_timeline(
    status: Sequence[int | None], events: Sequence[int | None], chars: Sequence[int | None]
) -> str:
    """For calls with no tokens (an empty-stream cascade): each call's stream events, with
    its HTTP status written above it, errors in red; an empty 200 sits on the floor."""
    plt = _plt()
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(5.4, 2.2))
        xs = list(range(1, len(status) + 1))
        ev = [e or 0 for e in events]
        colours = [ERROR if (s or 0) >= 400 else PROMPT for s in status]
        stems = ax.vlines(xs, 0, ev, colors=colours, linewidth=2)
        dots = ax.scatter(xs, ev, c=colours, s=28, zorder=3)
        _marks(stems, dots)
        top = max([*ev, 1])
        for x, e, s, c in zip(xs, ev, status, chars, strict=True):
            text = f"{s or '?'}" + (f"\n{c:,} ch" if c else "")
            ax.text(x, e + top * 0.08, text, ha="center", va="bottom", fontsize=9, color=INK)
        ax.set_ylim(0, top * 1.6)
        ax.set_xlim(0.4, len(xs) + 0.6)
        _integers(ax)
        _integers(ax, "y")
        ax.set_xlabel("call (HTTP status above; red: refused)")
        ax.set_ylabel("stream events")
        return _svg(fig)


def guard_tradeoff(
    points: Sequence[tuple[str, float, int, float]],
    chosen: tuple[str, float] | None,
    chosen_sweep: Sequence[tuple[float, float, float]],
) -> str:
    """What a team picks a guard by. Left: every (policy, threshold) as waste prevented against
    false trips, the best trade-offs joined (the Pareto front), the recommendation starred.
    Right: the recommended policy as its threshold moves (waste prevented and harm).
    ``points`` are (policy, stop, false trips, prevented); ``chosen_sweep`` (stop, prevented,
    harm) for the chosen policy."""
    plt = _plt()
    with plt.rc_context(_STYLE):
        fig, (left, right) = plt.subplots(1, 2, figsize=(7.6, 2.8), width_ratios=(1, 1))
        xs = [p[2] for p in points]
        ys = [p[3] for p in points]
        _marks(left.scatter(xs, ys, s=14, color=MUTED, label="a policy at a threshold"))
        front: list[tuple[int, float]] = []
        for x, y in sorted(zip(xs, ys, strict=True), key=lambda t: (t[0], -t[1])):
            if not front or y > front[-1][1]:
                front.append((x, y))
        if front:
            (line,) = left.plot(
                [f[0] for f in front],
                [f[1] for f in front],
                color=INK,
                linewidth=1,
                drawstyle="steps-post",
                label="best trade-off",
            )
            _marks(line)
        if chosen is not None:
            hit = [p for p in points if p[0] == chosen[0] and p[1] == chosen[1]]
            if hit:
                star = left.scatter(
                    [hit[0][2]],
                    [hit[0][3]],
                    marker="*",
                    s=160,
                    color=WASTE,
                    zorder=3,
                    label=f"recommended: {chosen[0]} at {chosen[1]:g}",
                )
                _marks(star)
        _integers(left)
        _dollars(left)
        left.set_title("Every policy at every threshold", loc="left")
        left.set_xlabel("false trips (healthy work stopped)")
        left.set_ylabel("waste prevented")
        left.legend(frameon=False, fontsize=9, loc="upper left", bbox_to_anchor=(0, -0.28))
        if chosen is not None and chosen_sweep:
            stops = [p[0] for p in chosen_sweep]
            series = ((1, WASTE, "o", "waste prevented"), (2, INK, "s", "harm"))
            drawn = [
                right.plot(
                    stops,
                    [p[i] for p in chosen_sweep],
                    color=color,
                    marker=marker,
                    markersize=3,
                    label=label,
                )[0]
                for i, color, marker, label in series
            ]
            _marks(*drawn)
            right.axvline(chosen[1], color=MUTED, linestyle="--", linewidth=1)
            right.set_title("The recommended guard as its threshold moves", loc="left")
            right.set_xlabel(f"{chosen[0]}: stop threshold")
            _dollars(right)
            if all(float(x).is_integer() for x in stops):
                _integers(right)
            right.legend(frameon=False, fontsize=9, loc="upper left", bbox_to_anchor=(0, -0.28))
        else:
            right.set_axis_off()
        return _svg(fig)
