"""Margins that already fit a graph's axis labels, so that Plotly draws the graph once.

Plotly draws a graph at the margins it is given, measures its axes' tick labels and titles
(`automargin`), and, when they do not fit, draws the whole graph again at wider margins: a first
plot cost twice its drawing (20-110 ms more per graph in a page's first view on 2
cores). Here the server widens each margin ahead to what the labels need, estimated from their
texts (category labels, or the tick labels Plotly will make of a numeric axis's range and format)
in the graphs' font, Arial's widths (Liberation Sans on Linux, the same widths). The margins only
grow: an estimate short of the mark costs the second drawing Plotly did anyway, never a cut label.
"""

from __future__ import annotations

import math
import re
from html import unescape

import numpy as np
import plotly.graph_objects as go

FONT_FAMILY = "Arial, 'Liberation Sans', Helvetica, sans-serif"  # the widths below
FONT_PX = 12  # the figures' font size (ui/render.figure)

# Arial's (Helvetica's) advance widths, in thousandths of the font size, for ASCII from the space.
_ASCII_WIDTHS = (
    "278 278 355 556 556 889 667 191 333 333 389 584 278 333 278 278 556 556 556 556 556 556 556 556 "
    "556 556 278 278 584 584 584 556 1015 667 667 722 722 667 611 778 722 278 500 667 556 833 722 778 "
    "667 778 722 667 611 722 667 944 667 667 611 278 278 278 469 556 333 556 556 500 556 556 278 556 "
    "556 222 222 500 222 833 556 556 556 556 333 500 278 556 500 722 500 500 500 334 260 334 584"
)
CHAR_WIDTHS: dict[str, int] = {chr(32 + i): int(w) for i, w in enumerate(_ASCII_WIDTHS.split())}
CHAR_WIDTHS.update({"·": 278, "–": 556, "—": 1000, "−": 584, "µ": 556, "×": 584, "…": 1000})
WIDE_CHAR = 1000  # any other character: as wide as the font's widest

# What Plotly adds around an axis's tick labels when it pushes a margin (measured in chromium: a y
# axis's push is its widest label + 36 px with a title, + 11 without; an x axis's 51 and 26 px).
Y_TITLE_PX, Y_BARE_PX = 38, 14
X_LABELS_PX, X_TITLE_PX = 29, 25
TOP_PX = 20  # the highest y tick label's upper half and Plotly's pad, when no title sits above
EDGE_PX = 13  # beyond half the width of a numeric x axis's end label (a category's sits in its band)
PLOTLY_MARGIN_PX = 80  # a side Plotly is given no margin for

_SPAN = re.compile(r"<span style='font-size:(\d+)px'>(.*?)</span>", re.S)
_TAG = re.compile(r"<[^>]*>")
SI_PREFIXES = {3: "k", 6: "M", 9: "B", 12: "T"}  # Plotly's default exponentformat ("B")


def text_px(text: str, size_px: float = FONT_PX) -> float:
    """Width in px of a label as Plotly draws it: its widest line (<br>), a <span> in its own
    font size (ui/pages/overview.split_figure), markup left out, entities as their characters."""
    widest = 0.0
    for line in re.split(r"<br\s*/?>", str(text)):
        spans = sum(_plain_px(m.group(2), float(m.group(1))) for m in _SPAN.finditer(line))
        widest = max(widest, spans + _plain_px(_SPAN.sub("", line), size_px))
    return widest


def _plain_px(text: str, size_px: float) -> float:
    plain = unescape(_TAG.sub("", text))
    return sum(CHAR_WIDTHS.get(c, WIDE_CHAR) for c in plain) * size_px / 1000


def nice_step(rough: float) -> float:
    """The smallest 1, 2 or 5 × 10^k at least `rough`: a tick spacing as Plotly picks them."""
    if not rough > 0 or not math.isfinite(rough):
        return 1.0
    power = 10.0 ** math.floor(math.log10(rough))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= rough * (1 - 1e-9))


def tick_labels(lo: float, hi: float, fmt: str = "", suffix: str = "", dtick: float | None = None) -> list[str]:
    """The tick labels of a numeric axis over [lo, hi], as wide as Plotly's or wider: a tick at
    least every tenth of the span (Plotly puts 5 to 10 on a graph's axis), each in the axis's
    d3 format `fmt` (the ones the pages use) or Plotly's default: the places that tell the ticks
    apart, and from 10^4 on one SI exponent for the whole axis ("0.2k" ... "12k")."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    lo, hi = min(lo, hi), max(lo, hi)
    step = float(dtick) if dtick else nice_step((hi - lo) / 10 if hi > lo else abs(hi) / 10 or 1.0)
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    if last - first > 200:  # a dtick far below the span: Plotly would thin them out
        first = last - 200
    ticks = [k * step for k in range(first, last + 1)] or [lo, hi]
    step_power = math.floor(math.log10(step))  # the step's decimal places: -step_power
    exponent = 0  # Plotly's: one SI exponent for the axis once its end reaches 10^4
    range_power = math.floor(math.log10(max(abs(lo), abs(hi)) or 1.0) + 0.01)
    if not fmt and range_power > 3:
        exponent = min(12, 3 * round((range_power - 1) / 3))
    return [_format_tick(v, fmt, max(0, exponent - step_power), exponent) + suffix for v in ticks]


def _format_tick(v: float, fmt: str, decimals: int, exponent: int) -> str:
    """One tick label; `decimals`: the places that tell ticks apart (of the SI mantissa, if any)."""
    if fmt == "d":
        return f"{round(v):d}"
    if fmt.endswith("%"):
        return f"{v * 100:.{int(fmt[1:-1] or 0)}f}%"
    if fmt.endswith("f"):
        return f"{v:.{int(fmt[1:-1] or 0)}f}"
    if fmt.endswith("g"):  # ",.4~g": thousands separated, 4 significant digits, no trailing zeros
        return format(v, fmt.replace("~", ""))
    if exponent:
        if not v:
            return "0"
        mantissa = f"{v / 10**exponent:.{decimals}f}"
        text = (mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa) + SI_PREFIXES[exponent]
    else:
        text = f"{v:.{decimals}f}"
        text = text.rstrip("0").rstrip(".") if "." in text else text
    return text.replace("-", "−")  # Plotly's minus sign


def _axis_values(fig: go.Figure, axis_id: str) -> tuple[list[str], list[float]]:
    """(category labels, numbers) the traces put on the axis `axis_id` ('x', 'y', 'y2'); for
    stacked bars' or lines' values, the sum of each trace's highest value (at least the highest
    stack)."""
    letter, stacked = axis_id[0], fig.layout.barmode in ("stack", "relative")
    categories: list[str] = []
    numbers: list[float] = []
    stack_top = 0.0
    for trace in fig.data:
        if (getattr(trace, f"{letter}axis", None) or letter) != axis_id:
            continue
        values = getattr(trace, letter, None)
        if trace.type == "histogram" and values is None:  # the counts' axis: at most one per value
            other = getattr(trace, "x" if letter == "y" else "y", None)
            numbers.extend([0.0, float(len(other) if other is not None else 0)])
            continue
        if values is None or len(values) == 0:
            continue
        arr = np.asarray(values)
        if arr.dtype.kind in "biuf":
            finite = arr[np.isfinite(arr)].astype(float)
            if not len(finite):
                continue
            value_letter = "x" if getattr(trace, "orientation", None) == "h" else "y"
            in_stack = (stacked and trace.type == "bar") or (trace.type == "scatter" and trace.stackgroup)
            if in_stack and letter == value_letter:
                stack_top += max(float(finite.max()), 0.0)
                numbers.append(float(min(finite.min(), 0.0)))
            else:
                numbers.extend([float(finite.min()), float(finite.max())])
        else:
            categories.extend(str(v) for v in arr.ravel() if v is not None)
    if stack_top:
        numbers.extend([0.0, stack_top])
    return categories, numbers


def labels_px(fig: go.Figure, axis_id: str) -> tuple[list[float], bool]:
    """(widths of the tick labels Plotly will draw on an axis (none when it draws none), whether
    they are categories: each sits in its band, not at the axis's ends)."""
    name = axis_id[0] + "axis" + axis_id[1:]
    axis = fig.layout[name]
    if axis.visible is False or axis.showticklabels is False:
        return [], False
    if axis.ticktext:
        return [text_px(t) for t in axis.ticktext], False
    categories, numbers = _axis_values(fig, axis_id)
    if categories and axis.type in (None, "category", "-"):
        return [text_px(c) for c in dict.fromkeys(categories)], True
    if axis.range is not None and None not in axis.range:
        lo, hi = (float(v) for v in axis.range)
    elif numbers:
        lo, hi = min(numbers), max(numbers)
        pad = 0.05 * (hi - lo or abs(hi) or 1.0)  # Plotly's autorange pads a little past the data
        lo, hi = (lo - pad if lo < 0 else lo), hi + pad
    else:
        return [], False
    dtick = axis.dtick if axis.tickmode == "linear" and isinstance(axis.dtick, int | float) else None
    labels = tick_labels(lo, hi, axis.tickformat or "", axis.ticksuffix or "", dtick)
    return [text_px(t) for t in labels], False


def fit(fig: go.Figure) -> go.Figure:
    """Widen `fig`'s margins (never narrow them) to what its axes' labels and titles need."""
    layout = fig.layout
    margin = layout.margin
    need = {"l": 0.0, "r": 0.0, "t": 0.0 if layout.title.text else TOP_PX, "b": 0.0}
    has = {"x": False, "y": False, "y2": False}
    for trace in fig.data:
        for letter in "xy":
            has[getattr(trace, f"{letter}axis", None) or letter] = True
    if has["x"]:
        widths, categorical = labels_px(fig, "x")
        titled = bool(layout.xaxis.title.text)
        need["b"] = (X_LABELS_PX if widths else 10) + (X_TITLE_PX if titled else 0)
        if widths and not categorical:
            need["r"] = need["l"] = max(widths) / 2 + EDGE_PX
    for axis_id, side in (("y", "l"), ("y2", "r")):
        if not has[axis_id]:
            continue
        axis = layout["yaxis" + axis_id[1:]]
        if axis_id == "y2" and axis.side != "right":
            continue
        widths, _ = labels_px(fig, axis_id)
        need[side] = max(need[side], max(widths, default=0.0) + (Y_TITLE_PX if axis.title.text else Y_BARE_PX))
    current = {side: PLOTLY_MARGIN_PX if getattr(margin, side) is None else getattr(margin, side) for side in need}
    grown = {s: math.ceil(v) for s, v in need.items() if math.ceil(v) > current[s]}
    if grown:
        fig.update_layout(margin=grown)
    return fig


__all__ = ["FONT_FAMILY", "fit", "labels_px", "nice_step", "text_px", "tick_labels"]
