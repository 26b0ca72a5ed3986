"""What a diagram box's colour stands for: the figures ``color_by`` names, per node and box.

:data:`COLOR_BY` names each figure and what the colour bar says; :data:`LABEL` writes a
box's figure on the box; :data:`MEASURED_BY` says which option makes a report carry it
(a diagram coloured by a figure the report lacks is an error, not a grey picture).

Example
-------
>>> LABEL["flops"](15840), LABEL["bytes"](2048)
('15.84 K FLOPs', '2.00 KiB moved')
"""

from __future__ import annotations

import math
from typing import Any

from .. import formatting as fmt
from ..records import NodeRecord
from .box import Box

__all__ = ["COLOR_BY", "LABEL", "MEASURED_BY", "TICK", "box_value", "colour_scale", "node_figure", "scale_ticks"]

COLOR_BY = {  # color_by= -> (figure summed per box, what the colour bar says)
    "flops": ("flops", "FLOPs"),
    "macs": ("macs", "MACs"),
    "bytes": ("bytes", "bytes read + written"),
    "latency": ("latency", "latency"),
    "memory": ("output_bytes", "bytes of new outputs"),
    "saved": ("saved_bytes", "bytes saved for the backward"),
    "backward_flops": ("backward_flops", "backward FLOPs"),
    "nonfinite": ("nonfinite", "NaN/Inf values"),
    "communication": ("comm_bytes", "bytes sent in collectives"),
}
LABEL = {  # color_by= -> a box's figure as its label shows it
    "flops": lambda v: f"{fmt.count(v)} FLOPs",
    "macs": lambda v: f"{fmt.count(v)} MACs",
    "bytes": lambda v: f"{fmt.nbytes(v)} moved",
    "latency": lambda v: fmt.seconds(v),
    "memory": lambda v: f"{fmt.nbytes(v)} out",
    "saved": lambda v: f"{fmt.nbytes(v)} saved",
    "backward_flops": lambda v: f"{fmt.count(v)} bwd FLOPs",
    "nonfinite": lambda v: f"{fmt.count(v)} NaN/Inf",
    "communication": lambda v: f"{fmt.nbytes(v)} sent",
}
TICK = {  # color_by= -> a value as the colour bar's scale writes it
    "flops": fmt.count,
    "macs": fmt.count,
    "bytes": fmt.nbytes,
    "latency": fmt.seconds,
    "memory": fmt.nbytes,
    "saved": fmt.nbytes,
    "backward_flops": fmt.count,
    "nonfinite": fmt.count,
    "communication": fmt.nbytes,
}
MEASURED_BY = {  # color_by= -> what makes the report carry it
    "flops": "every report has them",
    "macs": "every report has them",
    "bytes": "every report has them",
    "latency": "analyze(..., timing=True) measures it (not on the meta device)",
    "memory": "analyze(..., memory=True) measures it",
    "saved": "analyze(..., memory=True) measures it (with gradients on)",
    "backward_flops": "analyze(..., backward=True) counts them",
    "nonfinite": "analyze(..., check_finite=True) reads them (not on the meta device)",
    "communication": "analyze(..., parallel=...) logs every collective",
}


def node_figure(n: NodeRecord, figure: str) -> float | None:
    """One node's ``figure`` (a :data:`COLOR_BY` figure): ``None`` when it was not measured."""
    if figure == "bytes":
        return n.bytes_moved
    if figure == "nonfinite":
        return (n.nan_count or 0) + (n.inf_count or 0)
    return getattr(n, figure)


def box_value(box: Box, figure: str) -> float | None:
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
