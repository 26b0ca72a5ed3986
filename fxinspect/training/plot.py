"""``Watch.plot``: histograms over training steps as heat maps.

One panel per (module, quantity): x is the logged step, y the signed log2 bin (positive
values on top, their magnitude growing upwards; zero in the middle; negative values
below), and the shade the count (log scale). NaN, +Inf and -Inf have rows of their own
at the top and bottom edges, so a non-finite value is never hidden in a bin.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ..views.figures import save_figure
from .quantities import Quantity

__all__ = ["MAX_ROWS", "ROW_INCHES", "grid", "plot_watch"]

MAX_ROWS = 10  # modules drawn at most; the title says how many matched
ROW_INCHES = 2.2  # one module's row: its bins' labels are thinned to fit


def grid(w: Any, name: str, quantity: str) -> tuple[list[list[float]], list[str], list[int]]:
    """One panel's cells: per bin (NaN, +Inf, the positive exponents from the largest,
    zero, the negative ones, -Inf) a row of counts, one per logged step; the bins'
    labels and the steps."""
    steps = w.steps(name, quantity)
    hists = [w.histogram(name, quantity, s) for s in steps]
    lows = [h.low for h in hists if h.finite_nonzero]
    lo = min(lows, default=0)
    hi = max((h.low + len(h.positive) - 1 for h in hists if h.finite_nonzero), default=0)
    negative = any(sum(h.negative) for h in hists)  # (norms have no negative half to show)
    labels = (
        ["NaN", "+Inf"]
        + [f"+2^{e}" for e in range(hi, lo - 1, -1)]
        + ["0"]
        + ([f"-2^{e}" for e in range(lo, hi + 1)] if negative else [])
        + ["-Inf"]
    )
    rows: list[list[int]] = [[0] * len(steps) for _ in labels]
    for j, h in enumerate(hists):
        rows[0][j], rows[1][j], rows[-1][j] = h.nan, h.pos_inf, h.neg_inf
        zero = 2 + (hi - lo + 1)
        rows[zero][j] = h.zeros
        for i, c in enumerate(h.positive):
            rows[2 + (hi - (h.low + i))][j] += c
        for i, c in enumerate(h.negative if negative else ()):
            rows[zero + 1 + (h.low + i - lo)][j] += c
    return rows, labels, steps


def plot_watch(
    w: Any, module_or_pattern: str, path: str | Path | None = None, quantities: tuple[str, ...] | None = None
) -> Any:
    """Heat maps of the modules named (exactly, or else matched by the regex) ``module_or_pattern``."""
    from matplotlib.figure import Figure

    names = (
        [module_or_pattern]
        if module_or_pattern in w.names()
        else [n for n in w.names() if re.search(module_or_pattern, n)]
    )
    if not names:
        raise ValueError(f"no watched module matches {module_or_pattern!r}; watched: {w.names()[:10]}")
    quantities = quantities or tuple(q for q in w.log if any(w.steps(n, q) for n in names))
    shown = names[:MAX_ROWS]  # a bounded figure: one row per module, one column per quantity
    cols = max(1, len(quantities))
    fig = Figure(figsize=(4.4 * cols, ROW_INCHES * len(shown) + 0.6), dpi=100, layout="constrained")
    if len(shown) < len(names):
        fig.suptitle(f"the first {len(shown)} of {len(names)} modules matching {module_or_pattern!r}", fontsize=9)
    for row, name in enumerate(shown):
        for col, quantity in enumerate(quantities):
            ax = fig.add_subplot(len(shown), cols, row * cols + col + 1)
            if w.steps(name, quantity):
                _panel(fig, ax, w, name, quantity)
            else:  # its place kept, so that every row is one module
                ax.set_axis_off()
                ax.set_title(f"{name or '(model)'} · {Quantity(quantity).title}: not logged", fontsize=9, loc="left")
    if path is not None:
        save_figure(fig, path)
    return fig


def _panel(fig: Any, ax: Any, w: Any, name: str, quantity: str) -> None:
    """One module's histograms of one quantity over the logged steps, as a heat map."""
    counts, labels, steps = grid(w, name, quantity)
    image = ax.imshow(
        [[math.log10(1 + v) for v in row] for row in counts],
        aspect="auto",
        cmap="magma_r",
        interpolation="nearest",
        extent=(-0.5, len(steps) - 0.5, len(labels) - 0.5, -0.5),
    )
    every = max(1, len(labels) // 10)
    zero = labels.index("0")
    fixed = {0, 1, zero, len(labels) - 1}  # NaN, +Inf, 0, -Inf always; bins between, spaced out
    bins = [t for t in range(2, len(labels) - 1, every) if min(abs(t - f) for f in fixed) >= max(2, every // 2)]
    if not bins and zero > 2:  # at least one bin named, however few there are
        bins = [2 + (zero - 2) // 2]
    ticks = sorted(fixed | set(bins))
    ax.set_yticks(ticks, [labels[t] for t in ticks], fontsize=7)
    xticks = list(range(0, len(steps), max(1, len(steps) // 8)))
    ax.set_xticks(xticks, [str(steps[t]) for t in xticks], fontsize=7)
    ax.set_xlabel("step", fontsize=8)
    ax.set_title(f"{name or '(model)'} · {Quantity(quantity).title}", fontsize=9, loc="left")
    fig.colorbar(image, ax=ax, shrink=0.8).set_label("log10(1 + count)", fontsize=7)
