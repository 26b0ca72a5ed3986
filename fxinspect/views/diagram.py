"""``plot``: the dataflow of a report as a diagram, with matplotlib only.

Boxes are the model's modules cut to ``depth`` (op nodes at ``depth=None``), repeated
blocks folded into one box (``h.0–11 (12×) GPT2Block``, figures summed; a container of
nothing but one repeated block, such as a ``ModuleList`` of layers, shows that block),
laid out in layers along the dataflow (:mod:`.layout`); :mod:`.boxgraph` finds the
boxes and edges. Each box gives its name, type, the shapes entering it and leaving it
(one when they are the same), and is coloured by the chosen figure, with a colour bar;
each edge names the shape and dtype of what it carries (:mod:`.edge_labels`, as the
explorer's edges do) in the gap below its source, once for a box's edges that carry the same;
the model's inputs and outputs are grey, the NaN/Inf root cause has a red frame. The
figure's size follows the layout at a fixed font size, so every label reads at 100 %
zoom. A PNG or SVG file is painted directly from the layout (:mod:`.diagram_paint`, a
tenth of matplotlib's time); the Figure, and PDF, are matplotlib's.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(288, 10))
>>> report = fxinspect.analyze(model, torch.randn(1, 3, 8, 8), timing=False)
>>> fig = report.plot(color_by="flops")    # report.plot("model.png", depth=2) writes the file
>>> fig._suptitle.get_text(), [t.get_text() for t in fig.axes[0].texts][2:5]
('Sequential: modules to depth 1, repeated blocks folded', ['0', 'Conv2d', '1×3×8×8 → 1×8×6×6'])
>>> fig.axes[0].texts[-1].get_text()      # the last edge's label: what it carries
'1×10 float32'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import formatting as fmt
from ..records import ReportRecord
from .boxgraph import box_graph, boxes  # noqa: F401 (boxes: imported from here by older scripts)
from .colouring import box_label, box_value, colour_figure, colour_scale
from .diagram_layout import EDGE_FONT, FONT, Layout, arrange, frame
from .diagram_paint import Picture, box_faces, colour_bar, label_colour
from .edge_labels import edge_label
from .figures import save_figure

__all__ = ["plot"]

_DRAWN = (".png", ".svg")  # written without matplotlib (see .diagram_paint); others through it


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
    edge_labels: bool = True,
) -> Any:
    """Draw the dataflow of ``report``: a ``matplotlib.figure.Figure``, or with ``path`` a file.

    ``depth``: modules cut to this many path components (``None``: every op node).
    ``fold``: draw a run of repeated blocks once (``False``: every block its own boxes).
    ``color_by``: a figure's ``colour_key`` (see :func:`.colouring.colour_figures`) or ``None``. ``direction``: ``"TB"`` (top to
    bottom) or ``"LR"``. ``edge_labels``: write on each edge the shape and dtype of the
    outputs it carries (two at most, ``; …`` beyond; an edge back up has none), once for
    a box's edges that carry the same, with room made for them; ``False`` draws the
    edges bare, as before. With ``path``, the file is written (PNG, SVG or PDF by its
    extension; the same report gives the same bytes) and nothing is returned: PNG and
    SVG are painted without building a Figure.
    """
    _check(depth, color_by, direction)
    graph = box_graph(report, depth, fold)
    found, edges = graph.found, graph.edges
    figure = colour_figure(color_by) if color_by else None
    values = {k: box_value(box, figure) for k, box in found.items()} if figure else {}
    if figure and not any(values[k] is not None for k, box in found.items() if box.nodes):
        raise ValueError(f"color_by={color_by!r}: the report has no {figure.title}; {figure.measured_by}")
    shown = {k: box_label(color_by, v) for k, v in values.items() if v is not None and found[k].nodes}
    texts = {e: edge_label(carried) for e, carried in graph.carries.items()} if edge_labels else None
    layout = arrange(found, edges, lr=direction == "LR", figures=shown, edge_texts=texts)
    colormap, norm = colour_scale(values, cmap)
    heading = None if title is False else title or _heading(report, depth, fold, found)
    picture = Picture(
        layout,
        frame(layout, heading, colour_bar=norm is not None),
        heading,
        box_faces(layout.found, values, colormap, norm),
        report.nonfinite.root_cause if report.nonfinite else None,
        colour_bar(colormap, norm, color_by) if norm is not None else None,
        dpi,
    )
    if path is not None and Path(path).suffix.lower() in _DRAWN:
        picture.write(path)
        return None
    fig = _figure(picture)
    if path is not None:
        save_figure(fig, path)
        return None
    return fig


def _heading(report: ReportRecord, depth: int | None, fold: bool, found: dict) -> str:
    """The title: the model's type, the depth drawn, what was folded or drawn inside boxes."""
    root = report.modules.get("")
    folded = ", repeated blocks folded" if fold else ""
    what = f"every op{folded}" if depth is None else f"modules to depth {depth}{folded}"
    inside = sum(len(box.constants) for box in found.values())
    if inside:
        what += f"; {fmt.plural(inside, 'constant op')} drawn inside their users"
    return f"{root.type if root else 'model'}: {what}"


def _check(depth: int | None, color_by: str | None, direction: str) -> None:
    """Refuse options ``plot`` does not know, before any drawing."""
    if color_by is not None:
        colour_figure(color_by)  # (a ValueError naming the figures when it is none of them)
    if direction not in ("TB", "LR"):
        raise ValueError(f"direction must be 'TB' or 'LR', got {direction!r}")
    if depth is not None and depth < 0:
        raise ValueError(f"depth must be None (op level) or a module depth >= 0, got {depth!r}")


def _figure(picture: Picture) -> Any:
    """The picture as a matplotlib Figure: axes in the layout's points, 1 pt per pt."""
    from matplotlib.figure import Figure

    place, layout = picture.frame, picture.layout
    fig = Figure(figsize=(place.width, place.height), dpi=picture.dpi)
    drawing_w, drawing_h = place.drawing
    ax = fig.add_axes((0.0, place.bottom / place.height, drawing_w / place.width, drawing_h / place.height))
    x0, x1, y0, y1 = place.limits
    ax.set_xlim(x0, x1)
    ax.set_ylim(y1, y0)  # y grows downwards, as the layout's
    ax.set_axis_off()
    _draw_edges(ax, layout)
    _draw_boxes(ax, picture)
    _draw_edge_labels(ax, layout)  # (after the boxes' texts, so those come first in ``ax.texts``)
    if picture.bar is not None:
        _draw_colour_bar(fig, picture)
    if picture.heading is not None:
        fig.suptitle(picture.heading, fontsize=FONT + 2, x=0.02, ha="left", y=1 - 0.1 / place.height, va="top")
    return fig


def _draw_edges(ax: Any, layout: Layout) -> None:
    """An arrow per edge along its route, from the edge of one box to the edge of the next."""
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path as MplPath

    for u, v in layout.routes:
        points = layout.edge_points(u, v)
        style = {"arrowstyle": "-|>", "mutation_scale": 9, "color": "#555555", "lw": 0.9, "zorder": 1}
        if len(points) == 2:
            patch = FancyArrowPatch(*points, shrinkA=0, shrinkB=0, **style)
        else:
            codes = [MplPath.MOVETO] + [MplPath.LINETO] * (len(points) - 1)
            patch = FancyArrowPatch(path=MplPath(points, codes), **style)
        ax.add_artist(patch)


def _draw_edge_labels(ax: Any, layout: Layout) -> None:
    """Each edge's label on white over its edge (under the boxes, which it never meets)."""
    from matplotlib.patches import Rectangle

    for label in layout.edge_labels:
        left, top, right, bottom = label.rectangle()
        ax.add_artist(Rectangle((left, top), right - left, bottom - top, facecolor="white", lw=0, zorder=1.5))
        x, y = label.centre
        ax.text(x, y, label.text, ha="center", va="center", fontsize=EDGE_FONT, color="#555555", zorder=1.6)


def _draw_boxes(ax: Any, picture: Picture) -> None:
    """Each box as a rounded rectangle in its colour, its label lines centred in it."""
    from matplotlib.patches import FancyBboxPatch

    layout = picture.layout
    for k in layout.ordered:
        (w, h), (x, y), face = layout.sizes[k], layout.pos[k], picture.faces[k]
        framed = picture.is_root_cause(k)
        ax.add_artist(
            FancyBboxPatch(
                (x - w / 2, y - h / 2),
                w,
                h,
                boxstyle="round,pad=0,rounding_size=4",
                facecolor=face,
                edgecolor="#d62728" if framed else "#333333",
                lw=2.5 if framed else 0.8,
                zorder=2,
            )
        )
        colour = label_colour(face)
        for dy, text, size, weight in layout.label_rows(k):
            ax.text(x, y + dy, text, ha="center", va="center", fontsize=size, fontweight=weight, color=colour, zorder=3)


def _draw_colour_bar(fig: Any, picture: Picture) -> None:
    """The colour bar right of the drawing, with a few marked values and its label.

    Drawn as a gradient image rather than with ``fig.colorbar``, whose axis machinery
    (every tick, major and minor, and math-text labels) cost a third of a diagram's time.
    """
    from matplotlib.patches import Rectangle

    bar, place = picture.bar, picture.frame
    left, bottom, width, height = place.bar
    cax = fig.add_axes((left / place.width, bottom / place.height, width / place.width, height / place.height))
    cax.set_axis_off()
    cax.imshow(bar.gradient[:, None, :], aspect="auto", origin="lower", extent=(0, 1, 0, 1))
    cax.add_artist(Rectangle((0, 0), 1, 1, fill=False, linewidth=0.6, transform=cax.transAxes))
    mark = 4 / 72 / width  # a 4 pt tick, in the bar's widths
    for y, text in bar.ticks:
        cax.plot((1, 1 + mark), (y, y), color="black", linewidth=0.6, transform=cax.transAxes, clip_on=False)
        cax.text(1 + 1.5 * mark, y, text, fontsize=FONT - 1, va="center", transform=cax.transAxes)
    # the label along the bar's left side, in the gap between the drawing and the bar
    cax.text(-0.1 / width, 0.5, bar.label, fontsize=FONT, rotation=90, ha="right", va="center", transform=cax.transAxes)
