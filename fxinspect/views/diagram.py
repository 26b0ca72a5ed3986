"""``plot``: the dataflow of a report as a diagram, with matplotlib only.

Boxes are the model's modules cut to ``depth`` (op nodes at ``depth=None``), repeated
blocks folded into one box (``h.0–11 (12×) GPT2Block``, figures summed; a container of
nothing but one repeated block, such as a ``ModuleList`` of layers, shows that block),
laid out in layers along the dataflow (:mod:`.layout`). Each box gives its name, type
and output shape, and is coloured by the chosen figure, with a colour bar; the model's
inputs and outputs are grey, the NaN/Inf root cause has a red frame. The figure's size
follows the layout at a fixed font size, so every label reads at 100 % zoom.

Example
-------
>>> fig = report.plot("resnet50.png", depth=2, color_by="flops")   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import formatting as fmt
from .. import paths
from ..fields import FIELD, Unit
from ..records import NodeRecord, ReportRecord
from .figures import save_figure
from .folding import Folds
from .layout import layered

__all__ = ["COLOR_BY", "node_figure", "plot"]

COLOR_BY = {  # color_by= -> (figure summed per box, what the colour bar says)
    "flops": ("flops", "FLOPs"),
    "macs": ("macs", "MACs"),
    "bytes": ("bytes", "bytes read + written"),
    "latency": ("latency", "latency"),
    "memory": ("output_bytes", "bytes of new outputs"),
    "backward_flops": ("backward_flops", "backward FLOPs"),
    "nonfinite": ("nonfinite", "NaN/Inf values"),
}
FONT = 9.0  # points: legible at 100 % zoom at the figure's dpi
PAD = 6.0
_IO = "#d9d9d9"


@dataclass
class Box:
    """One box of the diagram: the op nodes it stands for and how it is labelled."""

    key: str
    title: str
    kind: str  # "input", "module", "op" or "output"
    type: str = ""
    repeats: int = 1
    nodes: list[NodeRecord] = field(default_factory=list)
    shape: str = ""
    order: int = 0


def _module_key(n: NodeRecord, depth: int, folds: Folds, modules: Any) -> str:
    path = paths.nearest(paths.cut(n.module_path, depth), modules)
    # a container of nothing but one repeated block shows the block, folded
    while path != n.module_path and folds.only_run(path) is not None:
        path = paths.cut(n.module_path, paths.depth(path) + 1)
    return path


def _own_ops_title(nodes: list[NodeRecord]) -> str:
    labels = list(dict.fromkeys(n.label for n in nodes))
    return ", ".join(labels[:3]) + (", …" if len(labels) > 3 else "")


def boxes(report: ReportRecord, depth: int | None) -> tuple[dict[str, Box], list[tuple[str, str]]]:
    """The boxes (by key, in execution order) and the edges between them.

    At module level a module shown with its children as boxes of their own keeps its own
    ops (a reshape, a residual add) in boxes of their own: one per stretch of them that
    runs between its children, so that each box sits where its ops run in the dataflow.
    """
    folds = Folds(report)
    ops = [n for n in report.nodes if n.is_op]
    path_of = {n.name: _module_key(n, depth, folds, report.modules) for n in ops} if depth is not None else {}
    shown = set(path_of.values())
    expanded = {p for p in shown if any(q != p and paths.within(q, p) for q in shown)}
    found: dict[str, Box] = {}
    box_of: dict[str, str] = {}
    previous, stretch = None, 0
    for i, n in enumerate(report.nodes):
        if n.op == "get_attr":
            continue
        if n.op in ("placeholder", "output"):
            key = f"<{n.op}:{n.name}>"
            shapes = n.outputs if n.op == "placeholder" else report.outputs
            found[key] = Box(
                key,
                n.name if n.op == "placeholder" else "output",
                "input" if n.op == "placeholder" else "output",
                shape=fmt.shapes(tuple(t.shape for t in shapes)),
                order=i,
            )
        elif depth is None:
            key = n.name
            found[key] = Box(key, n.name, "op", n.label, nodes=[n], order=i)
        else:
            path = path_of[n.name]
            record = report.modules.get(path)
            kind = record.type if record else "model"
            key = folds.display(path)
            if path in expanded:  # the module's own ops, between its children's boxes
                if previous != key:
                    stretch += 1
                key, previous = f"{key}#{stretch}", key
                if key not in found:
                    found[key] = Box(key, "", "module", f"{kind} ops", folds.repeats(path), order=i)
            else:
                previous = key
                if key not in found:
                    found[key] = Box(key, key or kind, "module", kind, folds.repeats(path), order=i)
            found[key].nodes.append(n)
        box_of[n.name] = key
    for box in found.values():
        if not box.title:
            box.title = _own_ops_title(box.nodes)
    edges: dict[tuple[str, str], None] = {}
    last_out: dict[str, NodeRecord] = {}
    for n in report.nodes:
        dst = box_of.get(n.name)
        for arg in n.args:
            src = box_of.get(arg)
            if src is None or dst is None or src == dst:
                continue
            edges[(src, dst)] = None
            producer = next((m for m in found[src].nodes if m.name == arg), None)
            if producer is not None:
                last_out[src] = producer
    for key, box in found.items():
        if box.kind in ("module", "op") and not box.shape:
            leaving = last_out.get(key) or (box.nodes[-1] if box.nodes else None)
            box.shape = fmt.shapes(tuple(t.shape for t in leaving.outputs)) if leaving is not None else ""
    return found, list(edges)


def node_figure(n: NodeRecord, figure: str) -> float | None:
    """One node's ``figure`` (a :data:`COLOR_BY` figure): ``None`` when it was not measured."""
    if figure == "bytes":
        return n.bytes_read + n.bytes_written
    if figure == "nonfinite":
        return (n.nan_count or 0) + (n.inf_count or 0)
    return getattr(n, figure)


def _value(box: Box, figure: str) -> float | None:
    """A box's figure: its nodes' sum, unknown when any part is."""
    parts = [node_figure(n, figure) for n in box.nodes]
    return None if not parts or None in parts else float(sum(parts))


def _lines(box: Box) -> list[tuple[str, float, str]]:
    title = box.title + (f"  ({box.repeats}×)" if box.repeats > 1 else "")
    lines = [(title, FONT, "bold")]
    if box.type and box.type != box.title:
        lines.append((box.type, FONT - 1, "normal"))
    if box.shape:
        lines.append((box.shape, FONT - 1, "normal"))
    return lines


def _measure(lines: list[tuple[str, float, str]]) -> tuple[float, float]:
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
    color_by: str | None = "flops",
    direction: str = "TB",
    cmap: str = "YlOrRd",
    title: str | None = None,
    dpi: int = 100,
) -> Any:
    """Draw the dataflow of ``report``; returns a ``matplotlib.figure.Figure``.

    ``depth``: modules cut to this many path components (``None``: every op node).
    ``color_by``: one of :data:`COLOR_BY` or ``None``. ``direction``: ``"TB"`` (top to
    bottom) or ``"LR"``. With ``path``, also saved (PNG, SVG or PDF by its extension;
    the same report gives the same bytes).
    """
    if color_by is not None and color_by not in COLOR_BY:
        raise ValueError(f"color_by must be one of {sorted(COLOR_BY)} or None, got {color_by!r}")
    if direction not in ("TB", "LR"):
        raise ValueError(f"direction must be 'TB' or 'LR', got {direction!r}")
    if depth is not None and depth < 0:
        raise ValueError(f"depth must be None (op level) or a module depth >= 0, got {depth!r}")
    import matplotlib
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path as MplPath

    found, edges = boxes(report, depth)
    ordered = sorted(found, key=lambda k: found[k].order)
    labels = {k: _lines(found[k]) for k in ordered}
    sizes = {k: _measure(labels[k]) for k in ordered}
    lr = direction == "LR"
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

    figure = COLOR_BY[color_by][0] if color_by else None
    values = {k: _value(found[k], figure) for k in ordered} if figure else {}
    known = [v for v in values.values() if v is not None and v > 0]
    colormap = matplotlib.colormaps[cmap]
    norm = None
    if known:
        low, high = min(known), max(known)
        norm = LogNorm(low, high) if high > 100 * low else Normalize(0, high)

    root = report.modules.get("")
    what = "every op" if depth is None else f"modules to depth {depth}, repeated blocks folded"
    heading = title or f"{root.type if root else 'model'}: {what}"
    xs = [pos[k][0] + s * sizes[k][0] / 2 for k in ordered for s in (-1, 1)]
    if title is not False:  # the heading fits: widen the drawing around the boxes if need be
        need = _measure([(heading, FONT + 2, "normal")])[0] - (max(xs) - min(xs)) - 2 * PAD
        if need > 0:
            xs += [min(xs) - need / 2, max(xs) + need / 2]
    ys = [pos[k][1] + s * sizes[k][1] / 2 for k in ordered for s in (-1, 1)]
    width, height = max(xs) - min(xs), max(ys) - min(ys)
    margin = 18.0
    bar = 1.6 if norm is not None else 0.0  # inches for the colour bar
    head = 0.45 if title is not False else 0.0
    drawing_w, drawing_h = (width + 2 * margin) / 72, (height + 2 * margin) / 72  # inches, 1 pt per pt
    # a flat drawing (one row, left to right) still needs room for a readable colour bar
    fig_h = max(drawing_h + head, 3.0 if norm is not None else 0.0)
    fig = Figure(figsize=(drawing_w + bar, fig_h), dpi=dpi)
    bottom = (fig_h - head - drawing_h) / 2 / fig_h
    ax = fig.add_axes((0.0, bottom, drawing_w / fig.get_figwidth(), drawing_h / fig_h))
    ax.set_xlim(min(xs) - margin, max(xs) + margin)
    ax.set_ylim(max(ys) + margin, min(ys) - margin)  # y grows downwards, as the layout's
    ax.set_axis_off()

    nonfinite = report.nonfinite.root_cause if report.nonfinite else None
    for (u, v), route in routes.items():
        (x0, y0), (x1, y1) = route[0], route[-1]
        # leave the source at its bottom (right) edge, enter the target at its top (left) edge
        if lr:
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
        ax.add_patch(patch)

    for k in ordered:
        box, (w, h), (x, y) = found[k], sizes[k], pos[k]
        value = values.get(k)
        if box.kind in ("input", "output"):
            face = _IO
        elif norm is not None and value is not None and value > 0:
            face = colormap(norm(value))
        else:
            face = "white"
        root_cause = nonfinite is not None and any(n.name == nonfinite for n in box.nodes)
        ax.add_patch(
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
        dark = not isinstance(face, str) and (0.299 * face[0] + 0.587 * face[1] + 0.114 * face[2]) < 0.5
        ty = y - h / 2 + PAD
        for text, size, weight in labels[k]:
            ty += size * 1.35 / 2
            ax.text(
                x,
                ty,
                text,
                ha="center",
                va="center",
                fontsize=size,
                fontweight=weight,
                color="white" if dark else "black",
                zorder=3,
            )
            ty += size * 1.35 / 2

    if norm is not None:
        from matplotlib.cm import ScalarMappable

        tall = min(4.0, 0.7 * fig_h) / fig_h  # at most 4 inches, near the top of a tall drawing
        top = 1 - (head + 0.3) / fig_h if fig_h > 5 else 0.5 + tall / 2
        cax = fig.add_axes((1 - (bar - 0.75) / fig.get_figwidth(), top - tall, 0.18 / fig.get_figwidth(), tall))
        colorbar = fig.colorbar(ScalarMappable(norm=norm, cmap=colormap), cax=cax)
        seconds = " (seconds)" if figure in FIELD and FIELD[figure].unit is Unit.SECOND else ""
        colorbar.set_label(f"{COLOR_BY[color_by][1]} per box{seconds}", fontsize=FONT)
        colorbar.ax.tick_params(labelsize=FONT - 1)
    if title is not False:
        fig.suptitle(heading, fontsize=FONT + 2, x=0.02, ha="left", y=1 - 0.1 / fig.get_figheight(), va="top")
    if path is not None:
        save_figure(fig, path)
    return fig
