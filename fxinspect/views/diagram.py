"""``plot``: the dataflow of a report as a diagram, with matplotlib only.

Boxes are the model's modules cut to ``depth`` (op nodes at ``depth=None``), repeated
blocks folded into one box (``h.0–11 (12×) GPT2Block``, figures summed; a container of
nothing but one repeated block, such as a ``ModuleList`` of layers, shows that block),
laid out in layers along the dataflow (:mod:`.layout`); :mod:`.boxgraph` finds the
boxes and edges. Each box gives its name, type, the shapes entering it and leaving it
(one when they are the same), and is coloured by the chosen figure, with a colour bar;
the model's inputs and outputs are grey, the NaN/Inf root cause has a red frame. The figure's size follows the layout at a fixed
font size, so every label reads at 100 % zoom.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(288, 10))
>>> report = fxinspect.analyze(model, torch.randn(1, 3, 8, 8), timing=False)
>>> fig = report.plot(color_by="flops")    # report.plot("model.png", depth=2) writes the file
>>> fig._suptitle.get_text(), [t.get_text() for t in fig.axes[0].texts][2:5]
('Sequential: modules to depth 1, repeated blocks folded', ['0', 'Conv2d', '1×3×8×8 → 1×8×6×6'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import formatting as fmt
from ..records import ReportRecord
from .box import Box
from .boxgraph import boxes
from .colouring import COLOR_BY, LABEL, MEASURED_BY, TICK, box_value, colour_scale, node_figure, scale_ticks
from .figures import save_figure
from .layout import layered

__all__ = ["COLOR_BY", "node_figure", "plot"]  # (COLOR_BY and node_figure re-exported from .colouring)

FONT = 9.0  # points: legible at 100 % zoom at the figure's dpi
PAD = 6.0
_IO = "#d9d9d9"
_MARGIN = 18.0  # points around the boxes
_BAR = 1.6  # inches beside the drawing for the colour bar
_HEAD = 0.45  # inches above the drawing for the title

_Lines = list[tuple[str, float, str]]  # a box's label: (text, font size, weight) per line


@dataclass
class _Layout:
    """The boxes placed: their label lines, sizes and centres (points), the edges' routes."""

    found: dict[str, Box]
    ordered: list[str]  # keys in execution order
    labels: dict[str, _Lines]
    sizes: dict[str, tuple[float, float]]
    pos: dict[str, tuple[float, float]]
    routes: dict[tuple[str, str], list[tuple[float, float]]]
    lr: bool  # layers run left to right


_CONSTANTS_LISTED = 2  # the kinds of constant ops a box names before "…"


def _lines(box: Box, figure: str | None = None) -> _Lines:
    """A box's label: its title (with its repeats), type, shapes in and out and the figure
    its colour stands for, a line each."""
    title = box.title + (f"  ({box.repeats}×)" if box.repeats > 1 else "")
    lines = [(title, FONT, "bold")]
    if box.type and box.type != box.title:
        lines.append((box.type, FONT - 1, "normal"))
    if box.shape:
        lines.append((box.shape, FONT - 1, "normal"))
    if box.constants:  # (op level) what it computes from weights and constants alone
        kinds = list(dict.fromkeys(box.constants))
        listed = ", ".join(kinds[:_CONSTANTS_LISTED]) + (", …" if len(kinds) > _CONSTANTS_LISTED else "")
        lines.append((f"+ {fmt.plural(len(box.constants), 'constant op')}: {listed}", FONT - 1, "normal"))
    if figure:
        lines.append((figure, FONT - 1, "normal"))
    return lines


def _measure(lines: _Lines) -> tuple[float, float]:
    """Width and height, in points, of a box holding ``lines`` with its padding."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    t2p = TextToPath()
    width = max(
        t2p.get_text_width_height_descent(text, FontProperties(size=size, weight=weight), ismath=False)[0]
        for text, size, weight in lines
    )
    height = sum(size * 1.35 for _, size, _ in lines)
    return width + 2 * PAD, height + 2 * PAD


def plot(
    report: ReportRecord,
    path: str | Path | None = None,
    *,
    depth: int | None = 1,
    fold: bool = True,
    color_by: str | None = "flops",
    direction: str = "TB",
    cmap: str = "YlOrRd",
    title: str | None = None,
    dpi: int = 100,
) -> Any:
    """Draw the dataflow of ``report``; returns a ``matplotlib.figure.Figure``.

    ``depth``: modules cut to this many path components (``None``: every op node).
    ``fold``: draw a run of repeated blocks once (``False``: every block its own boxes).
    ``color_by``: one of :data:`COLOR_BY` or ``None``. ``direction``: ``"TB"`` (top to
    bottom) or ``"LR"``. With ``path``, also saved (PNG, SVG or PDF by its extension;
    the same report gives the same bytes).
    """
    _check(depth, color_by, direction)
    found, edges = boxes(report, depth, fold)
    figure = COLOR_BY[color_by][0] if color_by else None
    values = {k: box_value(box, figure) for k, box in found.items()} if figure else {}
    if figure and not any(values[k] is not None for k, box in found.items() if box.nodes):
        raise ValueError(f"color_by={color_by!r}: the report has no {COLOR_BY[color_by][1]}; {MEASURED_BY[color_by]}")
    shown = {k: LABEL[color_by](v) for k, v in values.items() if v is not None and found[k].nodes}
    layout = _arrange(found, edges, lr=direction == "LR", figures=shown)
    colormap, norm = colour_scale(values, cmap)
    if title is False:
        heading = None
    else:
        root = report.modules.get("")
        folded = ", repeated blocks folded" if fold else ""
        what = f"every op{folded}" if depth is None else f"modules to depth {depth}{folded}"
        inside = sum(len(box.constants) for box in found.values())
        if inside:
            what += f"; {fmt.plural(inside, 'constant op')} drawn inside their users"
        heading = title or f"{root.type if root else 'model'}: {what}"
    head = _HEAD if heading is not None else 0.0
    fig, ax = _frame(layout, heading, head, colour_bar=norm is not None, dpi=dpi)
    _draw_edges(ax, layout)
    nonfinite = report.nonfinite.root_cause if report.nonfinite else None
    _draw_boxes(ax, layout, values, colormap, norm, nonfinite)
    if norm is not None:
        _draw_colour_bar(fig, colormap, norm, f"{COLOR_BY[color_by][1]} per box", TICK[color_by], head)
    if heading is not None:
        fig.suptitle(heading, fontsize=FONT + 2, x=0.02, ha="left", y=1 - 0.1 / fig.get_figheight(), va="top")
    if path is not None:
        save_figure(fig, path)
    return fig


def _check(depth: int | None, color_by: str | None, direction: str) -> None:
    """Refuse options ``plot`` does not know, before any drawing."""
    if color_by is not None and color_by not in COLOR_BY:
        raise ValueError(f"color_by must be one of {sorted(COLOR_BY)} or None, got {color_by!r}")
    if direction not in ("TB", "LR"):
        raise ValueError(f"direction must be 'TB' or 'LR', got {direction!r}")
    if depth is not None and depth < 0:
        raise ValueError(f"depth must be None (op level) or a module depth >= 0, got {depth!r}")


def _arrange(found: dict[str, Box], edges: list[tuple[str, str]], lr: bool, figures: dict[str, str]) -> _Layout:
    """Size each box by its label (with its coloured figure) and lay the boxes out in
    layers along the dataflow."""
    ordered = sorted(found, key=lambda k: found[k].order)
    labels = {k: _lines(found[k], figures.get(k)) for k in ordered}
    sizes = {k: _measure(labels[k]) for k in ordered}
    pos, routes = layered(
        ordered,
        edges,
        {k: (h, w) if lr else (w, h) for k, (w, h) in sizes.items()},
        gap=24.0 if lr else 18.0,
        layer_gap=40.0 if lr else 26.0,
    )
    if lr:  # layers run left to right: swap the axes of the layout
        pos = {k: (y, x) for k, (x, y) in pos.items()}
        routes = {e: [(y, x) for x, y in r] for e, r in routes.items()}
    return _Layout(found, ordered, labels, sizes, pos, routes, lr)


def _frame(layout: _Layout, heading: str | None, head: float, colour_bar: bool, dpi: int) -> tuple[Any, Any]:
    """The figure, sized to the layout at 1 pt per pt, and its axes in the layout's points."""
    from matplotlib.figure import Figure

    pos, sizes, ordered = layout.pos, layout.sizes, layout.ordered
    xs = [pos[k][0] + s * sizes[k][0] / 2 for k in ordered for s in (-1, 1)]
    if heading is not None:  # the heading fits: widen the drawing around the boxes if need be
        need = _measure([(heading, FONT + 2, "normal")])[0] - (max(xs) - min(xs)) - 2 * PAD
        if need > 0:
            xs += [min(xs) - need / 2, max(xs) + need / 2]
    ys = [pos[k][1] + s * sizes[k][1] / 2 for k in ordered for s in (-1, 1)]
    width, height = max(xs) - min(xs), max(ys) - min(ys)
    bar = _BAR if colour_bar else 0.0
    drawing_w, drawing_h = (width + 2 * _MARGIN) / 72, (height + 2 * _MARGIN) / 72  # inches, 1 pt per pt
    # a flat drawing (one row, left to right) still needs room for a readable colour bar
    fig_h = max(drawing_h + head, 3.0 if colour_bar else 0.0)
    fig = Figure(figsize=(drawing_w + bar, fig_h), dpi=dpi)
    bottom = (fig_h - head - drawing_h) / 2 / fig_h
    ax = fig.add_axes((0.0, bottom, drawing_w / fig.get_figwidth(), drawing_h / fig_h))
    ax.set_xlim(min(xs) - _MARGIN, max(xs) + _MARGIN)
    ax.set_ylim(max(ys) + _MARGIN, min(ys) - _MARGIN)  # y grows downwards, as the layout's
    ax.set_axis_off()
    return fig, ax


def _draw_edges(ax: Any, layout: _Layout) -> None:
    """An arrow per edge along its route, from the edge of one box to the edge of the next."""
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path as MplPath

    sizes = layout.sizes
    for (u, v), route in layout.routes.items():
        (x0, y0), (x1, y1) = route[0], route[-1]
        # leave the source at its bottom (right) edge, enter the target at its top (left) edge
        if layout.lr:
            start, end = (x0 + sizes[u][0] / 2, y0), (x1 - sizes[v][0] / 2, y1)
        else:
            start, end = (x0, y0 + sizes[u][1] / 2), (x1, y1 - sizes[v][1] / 2)
        points = [start, *route[1:-1], end]
        if len(points) == 2:
            patch = FancyArrowPatch(
                start, end, arrowstyle="-|>", mutation_scale=9, color="#555555", lw=0.9, shrinkA=0, shrinkB=0, zorder=1
            )
        else:
            codes = [MplPath.MOVETO] + [MplPath.LINETO] * (len(points) - 1)
            patch = FancyArrowPatch(
                path=MplPath(points, codes), arrowstyle="-|>", mutation_scale=9, color="#555555", lw=0.9, zorder=1
            )
        ax.add_artist(patch)


def _draw_boxes(
    ax: Any, layout: _Layout, values: dict[str, float | None], colormap: Any, norm: Any, nonfinite: str | None
) -> None:
    """Each box as a rounded rectangle in its colour, its label lines centred in it."""
    from matplotlib.patches import FancyBboxPatch

    for k in layout.ordered:
        box, (w, h), (x, y) = layout.found[k], layout.sizes[k], layout.pos[k]
        value = values.get(k)
        if box.kind in ("input", "output"):
            face = _IO
        elif norm is not None and value is not None and value > 0:
            face = colormap(norm(value))
        else:
            face = "white"
        root_cause = nonfinite is not None and any(n.name == nonfinite for n in box.nodes)
        ax.add_artist(
            FancyBboxPatch(
                (x - w / 2, y - h / 2),
                w,
                h,
                boxstyle="round,pad=0,rounding_size=4",
                facecolor=face,
                edgecolor="#d62728" if root_cause else "#333333",
                lw=2.5 if root_cause else 0.8,
                zorder=2,
            )
        )
        # white text on a dark face (a named colour is a light one: grey or white)
        dark = not isinstance(face, str) and (0.299 * face[0] + 0.587 * face[1] + 0.114 * face[2]) < 0.5
        _draw_label(ax, x, y - h / 2 + PAD, layout.labels[k], "white" if dark else "black")


def _draw_label(ax: Any, x: float, top: float, lines: _Lines, color: str) -> None:
    """A box's label lines, centred on ``x``, one under the other from ``top`` down."""
    ty = top
    for text, size, weight in lines:
        ty += size * 1.35 / 2
        ax.text(x, ty, text, ha="center", va="center", fontsize=size, fontweight=weight, color=color, zorder=3)
        ty += size * 1.35 / 2


def _draw_colour_bar(fig: Any, colormap: Any, norm: Any, label: str, tick: Any, head: float) -> None:
    """The colour bar right of the drawing: at most 4 inches, near the top of a tall figure.

    Drawn as a gradient image with a few marked values beside it rather than with
    ``fig.colorbar``, whose axis machinery (every tick, major and minor, and math-text
    labels) cost a third of a diagram's time.
    """
    import numpy as np
    from matplotlib.patches import Rectangle

    fig_w, fig_h = fig.get_figwidth(), fig.get_figheight()
    tall = min(4.0, 0.7 * fig_h) / fig_h
    top = 1 - (head + 0.3) / fig_h if fig_h > 5 else 0.5 + tall / 2
    cax = fig.add_axes((1 - (_BAR - 0.75) / fig_w, top - tall, 0.18 / fig_w, tall))
    cax.set_axis_off()
    gradient = norm.inverse(np.linspace(0, 1, 256)).reshape(-1, 1)
    cax.imshow(gradient, aspect="auto", cmap=colormap, norm=norm, origin="lower", extent=(0, 1, 0, 1))
    cax.add_artist(Rectangle((0, 0), 1, 1, fill=False, linewidth=0.6, transform=cax.transAxes))
    mark = 4 / 72 / 0.18  # a 4 pt tick, in the bar's widths
    for value in scale_ticks(norm):
        y = float(norm(value))
        cax.plot((1, 1 + mark), (y, y), color="black", linewidth=0.6, transform=cax.transAxes, clip_on=False)
        text = re.sub(r"(\.\d*?)0+\b", r"\1", tick(value)).replace(". ", " ")  # 100.00 M -> 100 M, 1.50 -> 1.5
        cax.text(1 + 1.5 * mark, y, text, fontsize=FONT - 1, va="center", transform=cax.transAxes)
    # the label along the bar's left side, in the gap between the drawing and the bar
    cax.text(-0.1 / 0.18, 0.5, label, fontsize=FONT, rotation=90, ha="right", va="center", transform=cax.transAxes)
