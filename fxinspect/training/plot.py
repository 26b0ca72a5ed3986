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

__all__ = ["plot_watch"]


def _grid(w: Any, name: str, quantity: str) -> tuple[list[list[float]], list[str], list[int]]:
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
    rows: list[list[float]] = [[0.0] * len(steps) for _ in labels]
    for j, h in enumerate(hists):
        rows[0][j], rows[1][j], rows[-1][j] = h.nan, h.pos_inf, h.neg_inf
        zero = 2 + (hi - lo + 1)
        rows[zero][j] = h.zeros
        for i, c in enumerate(h.positive):
            rows[2 + (hi - (h.low + i))][j] += c
        for i, c in enumerate(h.negative if negative else ()):
            rows[zero + 1 + (h.low + i - lo)][j] += c
    return [[math.log10(1 + v) for v in row] for row in rows], labels, steps


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
    panels = [(n, q) for n in names for q in quantities if w.steps(n, q)]
    cols = max(1, len(quantities))
    nrows = math.ceil(len(panels) / cols)
    tallest = max(len(_grid(w, n, q)[1]) for n, q in panels) if panels else 10
    fig = Figure(figsize=(4.4 * cols, max(3.4, 0.07 * tallest) * nrows), dpi=100, layout="constrained")
    for k, (name, quantity) in enumerate(panels):
        ax = fig.add_subplot(nrows, cols, k + 1)
        grid, labels, steps = _grid(w, name, quantity)
        image = ax.imshow(
            grid,
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
    if path is not None:
        save_figure(fig, path)
    return fig
