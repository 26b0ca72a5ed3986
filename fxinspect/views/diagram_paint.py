"""A diagram's picture, and painting it straight to PNG (Pillow) or SVG (text).

:class:`Picture` is everything ``plot`` decided: the layout, the frame, each box's
colour, the heading and the colour bar. :mod:`.diagram` builds a matplotlib Figure
from it; :meth:`Picture.write` paints a file without one. Matplotlib's artists and its
text engine cost about 4 ms a label and most of a diagram's time; Pillow draws a label
in tens of microseconds and Graphviz is the pace to keep (``benchmarks/diagrams.py``).
The PNG's lines and boxes are drawn at twice its size and halved, so they are smooth.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .box import Box
from .colouring import colour_figure, scale_ticks, tick_text
from .diagram_layout import EDGE_FONT, FONT, Frame, Layout, font
from .png import encode_png

__all__ = ["ColourBar", "Picture", "box_faces", "colour_bar", "label_colour"]

_IO = (0.851, 0.851, 0.851)  # the model's inputs and outputs: grey
_EDGE, _FRAME, _ROOT = "#555555", "#333333", "#d62728"
_ARROW = (3.6, 1.8)  # arrowhead length and half width, points (matplotlib's "-|>" at scale 9)
_SUPERSAMPLE = 2


@dataclass
class ColourBar:
    """The colour scale: colours bottom to top (an array of RGB rows), marked values as
    (height from the bottom in 0..1, text), and what the colours stand for."""

    gradient: Any
    ticks: list[tuple[float, str]]
    label: str


def colour_bar(colormap: Any, norm: Any, color_by: str) -> ColourBar:
    """The colour bar of the figure ``color_by`` names: its gradient, marks and label."""
    import numpy as np

    figure = colour_figure(color_by)
    values = scale_ticks(norm)
    heights = norm(np.array(values, dtype=float))  # (one call: see box_faces)
    ticks = []
    for value, height in zip(values, heights):
        text = re.sub(r"(\.\d*?)0+\b", r"\1", tick_text(figure, value)).replace(". ", " ")  # 100.00 M -> 100 M
        ticks.append((float(height), text))
    return ColourBar(colormap(np.linspace(0, 1, 256))[:, :3], ticks, f"{figure.title} per box")


def box_faces(found: dict[str, Box], values: dict[str, float | None], colormap: Any, norm: Any) -> dict:
    """Each box's fill: grey for the model's inputs and outputs, its figure's colour, or
    white. (One call of the norm for all boxes: a call per box went through masked
    arrays, a third of a millisecond each.)"""
    faces = {k: _IO if box.kind in ("input", "output") else (1.0, 1.0, 1.0) for k, box in found.items()}
    coloured = [k for k in found if faces[k] != _IO and norm is not None and (values.get(k) or 0) > 0]
    if coloured:
        import numpy as np

        rgba = colormap(norm(np.array([values[k] for k in coloured], dtype=float)))
        faces.update({k: tuple(float(c) for c in rgba[i, :3]) for i, k in enumerate(coloured)})
    return faces


def label_colour(face: tuple[float, float, float]) -> str:
    """White text on a dark face, black on a light one."""
    return "#ffffff" if 0.299 * face[0] + 0.587 * face[1] + 0.114 * face[2] < 0.5 else "#000000"


def _hex(rgb: tuple[float, ...]) -> str:
    """``(r, g, b)`` in 0..1 as ``"#rrggbb"``."""
    return "#" + "".join(f"{round(255 * c):02x}" for c in rgb[:3])


@dataclass
class Picture:
    """What a diagram shows and where: see the module."""

    layout: Layout
    frame: Frame
    heading: str | None
    faces: dict[str, tuple[float, float, float]]
    root_cause: str | None  # the NaN/Inf root cause's node: its box is framed in red
    bar: ColourBar | None
    dpi: int

    def is_root_cause(self, key: str) -> bool:
        return self.root_cause is not None and any(n.name == self.root_cause for n in self.layout.found[key].nodes)

    def write(self, path: str | Path) -> None:
        """Paint the picture to ``path``: PNG or SVG by its extension."""
        path = Path(path)
        if path.suffix.lower() == ".svg":
            path.write_text(_svg(self), encoding="utf-8")
        else:
            path.write_bytes(encode_png(_png(self)))

    # ---------------------------------------------------------------- placing, in points from the top left
    def size(self) -> tuple[float, float]:
        return self.frame.width * 72, self.frame.height * 72

    def place(self, x: float, y: float) -> tuple[float, float]:
        """A layout point on the canvas."""
        x0, _, y0, _ = self.frame.limits
        top = (self.frame.height - self.frame.bottom - self.frame.drawing[1]) * 72
        return x - x0, top + y - y0

    def bar_box(self) -> tuple[float, float, float, float]:
        """The colour bar's left, top, width and height on the canvas."""
        left, bottom, width, height = self.frame.bar
        return left * 72, (self.frame.height - bottom - height) * 72, width * 72, height * 72

    def texts(self):
        """Every text: (x, y, text, size, weight, colour, anchor), anchors as Pillow's
        (``"mm"`` centred, ``"lm"`` left-middle, ``"lt"`` left-top)."""
        if self.heading is not None:
            yield 0.02 * self.size()[0], 7.2, self.heading, FONT + 2, "normal", "#000000", "lt"
        layout = self.layout
        for k in layout.ordered:
            (x, y), colour = self.place(*layout.pos[k]), label_colour(self.faces[k])
            for dy, text, size, weight in layout.label_rows(k):
                yield x, y + dy, text, size, weight, colour, "mm"
        for label in layout.edge_labels:
            yield *self.place(*label.centre), label.text, EDGE_FONT, "normal", _EDGE, "mm"
        if self.bar is not None:
            left, top, width, height = self.bar_box()
            for frac, text in self.bar.ticks:
                yield left + width + 6, top + (1 - frac) * height, text, FONT - 1, "normal", "#000000", "lm"

    def arrows(self):
        """Every edge: its points on the canvas and its arrowhead's three corners."""
        for u, v in self.layout.routes:
            points = [self.place(*p) for p in self.layout.edge_points(u, v)]
            (ax, ay), (bx, by) = points[-2], points[-1]
            length = max(((bx - ax) ** 2 + (by - ay) ** 2) ** 0.5, 1e-9)
            dx, dy = (bx - ax) / length, (by - ay) / length
            back = (bx - dx * _ARROW[0], by - dy * _ARROW[0])
            head = [(bx, by), (back[0] - dy * _ARROW[1], back[1] + dx * _ARROW[1])]
            head.append((back[0] + dy * _ARROW[1], back[1] - dx * _ARROW[1]))
            yield points[:-1] + [back], head

    def label_grounds(self):
        """The white under each edge's label (its edge runs under it): left, top, width, height."""
        for label in self.layout.edge_labels:
            left, top, right, bottom = label.rectangle()
            x, y = self.place(left, top)
            yield x, y, right - left, bottom - top

    def rectangles(self):
        """Every box: left, top, width, height, fill, frame colour and line width."""
        for k in self.layout.ordered:
            (w, h), (x, y) = self.layout.sizes[k], self.place(*self.layout.pos[k])
            framed = self.is_root_cause(k)
            yield x - w / 2, y - h / 2, w, h, _hex(self.faces[k]), _ROOT if framed else _FRAME, 2.5 if framed else 0.8


def _svg(picture: Picture) -> str:
    """The picture as SVG, in points; text as text (DejaVu Sans, as measured)."""
    width, height = picture.size()
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.1f}pt" height="{height:.1f}pt" '
        f'viewBox="0 0 {width:.1f} {height:.1f}" font-family="DejaVu Sans, sans-serif" xml:space="preserve">',
        f'<rect width="{width:.1f}" height="{height:.1f}" fill="#ffffff"/>',
    ]
    for line, head in picture.arrows():
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in line)
        out.append(f'<polyline points="{points}" fill="none" stroke="{_EDGE}" stroke-width="0.9"/>')
        out.append(f'<polygon points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in head)}" fill="{_EDGE}"/>')
    for x, y, w, h in picture.label_grounds():
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="#ffffff"/>')
    for x, y, w, h, fill, stroke, lw in picture.rectangles():
        out.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="4" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="{lw}"/>'
        )
    if picture.bar is not None:
        out += _svg_bar(picture)
    anchors = {"m": "middle", "l": "start"}
    baselines = {"m": "central", "t": "hanging"}
    for x, y, text, size, weight, colour, anchor in picture.texts():
        out.append(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-weight="{weight}" fill="{colour}" '
            f'text-anchor="{anchors[anchor[0]]}" dominant-baseline="{baselines[anchor[1]]}">{html.escape(text)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _svg_bar(picture: Picture) -> list[str]:
    """The colour bar: a gradient in a frame, its marks and its label along its left side."""
    left, top, width, height = picture.bar_box()
    stops = picture.bar.gradient[:: max(1, len(picture.bar.gradient) // 16)]
    out = ['<defs><linearGradient id="scale" x1="0" y1="1" x2="0" y2="0">']
    out += [f'<stop offset="{i / (len(stops) - 1):.3f}" stop-color="{_hex(c)}"/>' for i, c in enumerate(stops)]
    out.append("</linearGradient></defs>")
    out.append(
        f'<rect x="{left:.1f}" y="{top:.1f}" width="{width:.1f}" height="{height:.1f}" '
        'fill="url(#scale)" stroke="#000000" stroke-width="0.6"/>'
    )
    for frac, _ in picture.bar.ticks:
        y = top + (1 - frac) * height
        out.append(
            f'<line x1="{left + width:.1f}" y1="{y:.1f}" x2="{left + width + 4:.1f}" y2="{y:.1f}" stroke="#000000" stroke-width="0.6"/>'
        )
    x, y = left - 7.2, top + height / 2
    out.append(
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{FONT}" text-anchor="middle" '
        f'transform="rotate(-90 {x:.1f} {y:.1f})">{html.escape(picture.bar.label)}</text>'
    )
    return out


def _png(picture: Picture) -> Any:
    """The picture as a Pillow image at ``dpi``: lines and boxes drawn at twice the size
    and halved (smooth edges), text drawn after, at its size (Pillow smooths glyphs itself)."""
    from PIL import Image, ImageDraw

    scale = picture.dpi / 72 * _SUPERSAMPLE
    width, height = picture.size()
    image = Image.new("RGB", (round(width * scale), round(height * scale)), "white")
    draw = ImageDraw.Draw(image)

    def px(points):
        return [(x * scale, y * scale) for x, y in points]

    for line, head in picture.arrows():
        draw.line(px(line), fill=_EDGE, width=max(1, round(0.9 * scale)), joint="curve")
        draw.polygon(px(head), fill=_EDGE)
    for x, y, w, h in picture.label_grounds():
        draw.rectangle(px([(x, y), (x + w, y + h)]), fill="#ffffff")
    for x, y, w, h, fill, stroke, lw in picture.rectangles():
        draw.rounded_rectangle(
            px([(x, y), (x + w, y + h)]), radius=4 * scale, fill=fill, outline=stroke, width=max(1, round(lw * scale))
        )
    if picture.bar is not None:
        _png_bar(picture, image, draw, scale)
    image = image.reduce(_SUPERSAMPLE)
    draw, scale = ImageDraw.Draw(image), scale / _SUPERSAMPLE
    for x, y, text, size, weight, colour, anchor in picture.texts():
        draw.text((x * scale, y * scale), text, fill=colour, font=font(size * scale, weight), anchor=anchor)
    if picture.bar is not None:
        _png_bar_label(picture, image, scale)
    return image


def _png_bar(picture: Picture, image: Any, draw: Any, scale: float) -> None:
    """The colour bar's gradient, frame and marks (its label is drawn after halving)."""
    import numpy as np
    from PIL import Image

    left, top, width, height = (v * scale for v in picture.bar_box())
    rows = picture.bar.gradient[::-1]  # top row first
    strip = (rows[np.linspace(0, len(rows) - 1, max(1, round(height))).round().astype(int)] * 255).round()
    bar = Image.fromarray(np.repeat(strip[:, None, :], max(1, round(width)), axis=1).astype("uint8"), "RGB")
    image.paste(bar, (round(left), round(top)))
    line = max(1, round(0.6 * scale))
    draw.rectangle([left, top, left + width, top + height], outline="#000000", width=line)
    for frac, _ in picture.bar.ticks:
        y = top + (1 - frac) * height
        draw.line([(left + width, y), (left + width + 4 * scale, y)], fill="#000000", width=line)


def _png_bar_label(picture: Picture, image: Any, scale: float) -> None:
    """The colour bar's label, turned to read upwards along its left side."""
    from PIL import Image, ImageDraw

    left, top, _, height = (v * scale for v in picture.bar_box())
    face = font(FONT * scale)
    box = face.getbbox(picture.bar.label)
    text = Image.new("L", (box[2] + 2, box[3] + 2), 0)
    ImageDraw.Draw(text).text((1, 1), picture.bar.label, fill=255, font=face)
    text = text.rotate(90, expand=True)
    x, y = left - 7.2 * scale - text.width, top + height / 2 - text.height / 2
    image.paste(Image.new("RGB", text.size, "black"), (round(x), round(y)), text)
