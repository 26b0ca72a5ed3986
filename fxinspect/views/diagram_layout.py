"""Where a diagram's parts go: box labels, their sizes, the layered layout and the frame.

Shared by the two ways a diagram is drawn (:mod:`.diagram` with matplotlib artists,
:mod:`.diagram_file` straight to PNG or SVG), so both place every box, edge, label and
the colour bar alike. Lengths are points, y grows downwards. Text is measured with
Pillow on matplotlib's own DejaVu Sans (a width in microseconds, where matplotlib's
text engine took a millisecond a line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from .. import formatting as fmt
from .box import Box
from .layout import layered

__all__ = ["EDGE_FONT", "FONT", "PAD", "EdgeLabel", "Frame", "Layout", "arrange", "font", "frame", "measure"]

FONT = 9.0  # points: legible at 100 % zoom at the figure's dpi
PAD = 6.0
MARGIN = 18.0  # points around the boxes
EDGE_FONT = FONT - 2  # an edge's label: smaller than a box's
EDGE_PAD = 2.0  # points of white around an edge's label, where its edge runs under it
BAR = 1.6  # inches beside the drawing for the colour bar
HEAD = 0.45  # inches above the drawing for the title
LINE = 1.35  # a line of text is this many times its font size tall
_CONSTANTS_LISTED = 2  # the kinds of constant ops a box names before "…"

Lines = list[tuple[str, float, str]]  # a box's label: (text, font size, weight) per line


@cache
def font(size: float, weight: str = "normal") -> Any:
    """Pillow's DejaVu Sans (matplotlib's default font, from its own data) at ``size`` pixels."""
    import matplotlib
    from PIL import ImageFont

    name = "DejaVuSans-Bold.ttf" if weight == "bold" else "DejaVuSans.ttf"
    return ImageFont.truetype(str(Path(matplotlib.get_data_path(), "fonts", "ttf", name)), size)


@lru_cache(maxsize=8192)  # (a diagram repeats its texts: every edge of a stage carries one shape)
def text_width(text: str, size: float, weight: str = "normal") -> float:
    """The width of ``text`` at ``size`` points, in points (measured at 10x and scaled,
    as Pillow's sizes are whole pixels)."""
    return font(round(size * 10), weight).getlength(text) / 10


def lines(box: Box, figure: str | None = None) -> Lines:
    """A box's label: its title (with its repeats), type, shapes in and out and the figure
    its colour stands for, a line each."""
    title = box.title + (f"  ({box.repeats}×)" if box.repeats > 1 else "")
    out = [(title, FONT, "bold")]
    if box.type and box.type != box.title:
        out.append((box.type, FONT - 1, "normal"))
    if box.shape:
        out.append((box.shape, FONT - 1, "normal"))
    if box.constants:  # (op level) what it computes from weights and constants alone
        kinds = list(dict.fromkeys(box.constants))
        listed = ", ".join(kinds[:_CONSTANTS_LISTED]) + (", …" if len(kinds) > _CONSTANTS_LISTED else "")
        out.append((f"+ {fmt.plural(len(box.constants), 'constant op')}: {listed}", FONT - 1, "normal"))
    if figure:
        out.append((figure, FONT - 1, "normal"))
    return out


def measure(label: Lines) -> tuple[float, float]:
    """Width and height, in points, of a box holding ``label`` with its padding."""
    width = max(text_width(text, size, weight) for text, size, weight in label)
    return width + 2 * PAD, sum(size * LINE for _, size, _ in label) + 2 * PAD


@dataclass
class EdgeLabel:
    """An edge label placed: its text, centre and size (points, its white padding in), and
    the edges it names (one source's, that carry the same)."""

    text: str
    centre: tuple[float, float]
    size: tuple[float, float]
    edges: list[tuple[str, str]] = field(default_factory=list)

    def rectangle(self) -> tuple[float, float, float, float]:
        """Left, top, right, bottom."""
        (x, y), (w, h) = self.centre, self.size
        return x - w / 2, y - h / 2, x + w / 2, y + h / 2


@dataclass
class Layout:
    """The boxes placed: their label lines, sizes and centres (points), the edges' routes
    and their labels (none for an edge back up)."""

    found: dict[str, Box]
    ordered: list[str]  # keys in execution order
    labels: dict[str, Lines]
    sizes: dict[str, tuple[float, float]]
    pos: dict[str, tuple[float, float]]
    routes: dict[tuple[str, str], list[tuple[float, float]]]
    lr: bool  # layers run left to right
    edge_labels: list[EdgeLabel] = field(default_factory=list)

    def label_rows(self, key: str) -> list[tuple[float, str, float, str]]:
        """Box ``key``'s label lines from the top down: (offset of the line's centre from
        the box's centre, text, font size, weight)."""
        rows, top = [], -self.sizes[key][1] / 2 + PAD
        for text, size, weight in self.labels[key]:
            rows.append((top + size * LINE / 2, text, size, weight))
            top += size * LINE
        return rows

    def edge_points(self, u: str, v: str) -> list[tuple[float, float]]:
        """An edge's route, from the source's bottom (right) edge to the target's top (left) edge."""
        route, sizes = self.routes[(u, v)], self.sizes
        (x0, y0), (x1, y1) = route[0], route[-1]
        if self.lr:
            start, end = (x0 + sizes[u][0] / 2, y0), (x1 - sizes[v][0] / 2, y1)
        else:
            start, end = (x0, y0 + sizes[u][1] / 2), (x1, y1 - sizes[v][1] / 2)
        return [start, *route[1:-1], end]


def arrange(
    found: dict[str, Box],
    edges: list[tuple[str, str]],
    lr: bool,
    figures: dict[str, str],
    edge_texts: dict[tuple[str, str], str] | None = None,
) -> Layout:
    """Size each box by its label (with its coloured figure) and lay the boxes out in
    layers along the dataflow, with room for each edge's label in ``edge_texts``."""
    ordered = sorted(found, key=lambda k: found[k].order)
    labels = {k: lines(found[k], figures.get(k)) for k in ordered}
    sizes = {k: measure(labels[k]) for k in ordered}
    # the edges of one source that carry the same share a label (a fan-out is labelled once)
    named = {e: (e[0], t) for e, t in (edge_texts or {}).items() if t}
    sized = {key: (text_width(key[1], EDGE_FONT) + 2 * EDGE_PAD, EDGE_FONT * LINE) for key in named.values()}
    pos, routes, spots = layered(
        ordered,
        edges,
        {k: (h, w) if lr else (w, h) for k, (w, h) in sizes.items()},
        gap=24.0 if lr else 18.0,
        layer_gap=40.0 if lr else 26.0,
        labels=named,
        label_sizes={key: (h, w) if lr else (w, h) for key, (w, h) in sized.items()},
    )
    if lr:  # layers run left to right: swap the axes of the layout
        pos = {k: (y, x) for k, (x, y) in pos.items()}
        routes = {e: [(y, x) for x, y in r] for e, r in routes.items()}
        spots = {e: (y, x) for e, (x, y) in spots.items()}
    placed: dict[tuple[str, str], EdgeLabel] = {}
    for e in edges:
        key = named.get(e)
        if key in spots:
            placed.setdefault(key, EdgeLabel(key[1], spots[key], sized[key])).edges.append(e)
    return Layout(found, ordered, labels, sizes, pos, routes, lr, list(placed.values()))


@dataclass
class Frame:
    """The figure around a layout, in inches: its size, the drawing's place (``bottom``
    from the figure's foot), the layout's limits, and the colour bar's rectangle."""

    width: float
    height: float
    drawing: tuple[float, float]  # width, height
    bottom: float
    limits: tuple[float, float, float, float]  # the layout's x0, x1, y0 (top), y1 (bottom), points
    head: float
    bar: tuple[float, float, float, float] | None  # left, bottom, width, height (inches)


def frame(layout: Layout, heading: str | None, colour_bar: bool) -> Frame:
    """The figure sized to the layout at 1 pt per pt, with room for the heading and the
    colour bar (at most 4 inches, near the top of a tall figure)."""
    pos, sizes, ordered = layout.pos, layout.sizes, layout.ordered
    xs = [pos[k][0] + s * sizes[k][0] / 2 for k in ordered for s in (-1, 1)]
    rectangles = [label.rectangle() for label in layout.edge_labels]  # (a lane's may lie outside the boxes)
    xs += [x for r in rectangles for x in (r[0], r[2])]
    if heading is not None:  # the heading fits: widen the drawing around the boxes if need be
        need = measure([(heading, FONT + 2, "normal")])[0] - (max(xs) - min(xs)) - 2 * PAD
        if need > 0:
            xs += [min(xs) - need / 2, max(xs) + need / 2]
    ys = [pos[k][1] + s * sizes[k][1] / 2 for k in ordered for s in (-1, 1)]
    ys += [y for r in rectangles for y in (r[1], r[3])]
    head = HEAD if heading is not None else 0.0
    limits = (min(xs) - MARGIN, max(xs) + MARGIN, min(ys) - MARGIN, max(ys) + MARGIN)
    drawing_w, drawing_h = (limits[1] - limits[0]) / 72, (limits[3] - limits[2]) / 72
    # a flat drawing (one row, left to right) still needs room for a readable colour bar
    height = max(drawing_h + head, 3.0 if colour_bar else 0.0)
    width = drawing_w + (BAR if colour_bar else 0.0)
    bar = None
    if colour_bar:
        tall = min(4.0, 0.7 * height)
        top = height - head - 0.3 if height > 5 else (height + tall) / 2
        bar = (width - (BAR - 0.75), top - tall, 0.18, tall)
    return Frame(width, height, (drawing_w, drawing_h), (height - head - drawing_h) / 2, limits, head, bar)
