"""What a diagram box's colour stands for: the figures ``color_by`` names, per node and box.

Every figure whose declaration (:mod:`fxinspect.records.fields`) gives it a
``colour_key`` colours a diagram and the explorer: :func:`colour_figures` lists them
(the declared, the derived and the registered ones); :func:`box_label` writes a box's
figure on the box, :func:`tick_text` the colour bar's scale; a diagram coloured by a
figure the report lacks is an error naming what measures it, not a grey picture.

Example
-------
>>> box_label("flops", 15840), box_label("bytes", 2048), box_label("latency", 0.0123)
('15.84 K FLOPs', '2.00 KiB moved', '12.30 ms')
"""

from __future__ import annotations

import math
from typing import Any

from ..records import NodeRecord
from ..records.fields import Field, shown
from .box import Box
from .columns import unit_text

__all__ = [
    "box_label",
    "box_value",
    "colour_figure",
    "colour_figures",
    "colour_scale",
    "node_figure",
    "scale_ticks",
    "tick_text",
]


def colour_figures() -> dict[str, Field]:
    """``color_by=`` name -> its figure, in the order the views offer them."""
    return {f.colour_key: f for f in shown() if f.colour_key}


def colour_figure(color_by: str) -> Field:
    """The figure ``color_by`` names, or a ``ValueError`` listing the names."""
    found = colour_figures()
    if color_by not in found:
        raise ValueError(f"color_by must be one of {sorted(found)} or None, got {color_by!r}")
    return found[color_by]


def tick_text(figure: Field, value: float) -> str:
    """A value of ``figure`` as the colour bar's scale writes it."""
    return unit_text(figure.unit)(value, False)


def box_label(color_by: str, value: float) -> str:
    """A box's figure as its label shows it: the value, then the figure's word."""
    figure = colour_figure(color_by)
    word = figure.header if figure.word is None else figure.word
    return f"{tick_text(figure, value)} {word}".rstrip()


def node_figure(n: NodeRecord, figure: Field) -> float | None:
    """One node's ``figure``: ``None`` when it was not measured."""
    return getattr(n, figure.attribute)


def box_value(box: Box, figure: Field) -> float | None:
    """A box's figure: its nodes' sum, unknown when any part is."""
    parts = [node_figure(n, figure) for n in box.nodes]
    return None if not parts or None in parts else sum(parts)  # (counts stay integers)


def colour_scale(values: dict[str, float | None], cmap: str) -> tuple[Any, Any]:
    """The colormap and the norm of the boxes' figures (``None`` when no box has one above 0)."""
    import matplotlib
    from matplotlib.colors import LogNorm, Normalize

    known = [v for v in values.values() if v is not None and v > 0]
    colormap = matplotlib.colormaps[cmap]
    norm = None
    if known:
        low, high = min(known), max(known)
        norm = LogNorm(low, high) if high > 100 * low else Normalize(0, high)
    return colormap, norm


def scale_ticks(norm: Any, most: int = 6) -> list[float]:
    """Values to mark on a colour scale: powers of ten on a log scale (every other one
    when there are many), round steps on a linear one; the ends when nothing rounder fits."""
    from matplotlib.colors import LogNorm
    from matplotlib.ticker import MaxNLocator

    low, high = float(norm.vmin), float(norm.vmax)
    if isinstance(norm, LogNorm):
        first, last = math.ceil(math.log10(low)), math.floor(math.log10(high))
        step = max(1, math.ceil((last - first + 1) / most))
        ticks = [10.0**k for k in range(first, last + 1, step)]
    else:
        ticks = [t for t in MaxNLocator(most - 1).tick_values(low, high) if low <= t <= high]
    return ticks if len(ticks) >= 2 else [low, high]
