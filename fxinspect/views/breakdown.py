"""``plot_breakdown``: where a figure goes, as sorted horizontal bars.

By module (cut to ``depth``, repeated blocks folded as in tables and diagrams) or by op
type; the ``top`` largest shares get a bar each, the rest one "other" bar, so the bars
always add up to the whole. Each bar is labelled with its value and its share.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(288, 10))
>>> report = fxinspect.analyze(model, torch.randn(1, 3, 8, 8), timing=False)
>>> breakdown(report, "flops", by="module", depth=1)      # 2*8*27*36 + 288 ; 2*288*10 + 10 ; 288
[('0  Conv2d', 15840), ('3  Linear', 5770), ('1  ReLU', 288)]
>>> fig = plot_breakdown(report, "flops", by="module", depth=1)    # report.plot_breakdown(...) too
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import formatting as fmt
from .. import paths
from ..records import ReportRecord
from .colouring import colour_figures, node_figure
from .columns import unit_text
from .figures import save_figure
from .folding import Folds

__all__ = ["breakdown", "plot_breakdown"]


def breakdown(
    report: ReportRecord, metric: str = "flops", by: str = "module", depth: int = 1, top: int = 10
) -> list[tuple[str, float]]:
    """``(label, value)`` of the ``top`` largest non-zero parts, then ``("other (n)", rest)``:
    they sum to the total."""
    figures = colour_figures()
    if metric not in figures:
        raise ValueError(f"metric must be one of {sorted(figures)}, got {metric!r}")
    if by not in ("module", "op"):
        raise ValueError(f"by must be 'module' or 'op', got {by!r}")
    if top < 1 or depth < 1:
        raise ValueError(f"top and depth must be at least 1, got top={top}, depth={depth}")
    figure = figures[metric]
    folds = Folds(report)
    parts: dict[str, float] = {}
    for n in report.nodes:
        if not n.is_op:
            continue
        value = node_figure(n, figure)
        if value is None:
            raise ValueError(f"this report has no {metric} figures (was it measured? timing=, backward=, memory=)")
        if by == "op":
            label = n.label
        else:
            path = paths.nearest(paths.cut(n.module_path, depth), report.modules)
            record = report.modules.get(path)
            repeats = folds.repeats(path)
            label = f"{folds.display(path) or '(model)'}  {record.type if record else ''}".rstrip()
            label += f" ×{repeats}" if repeats > 1 else ""
        parts[label] = parts.get(label, 0) + value
    ranked = sorted(((k, v) for k, v in parts.items() if v), key=lambda kv: -kv[1])  # parts of 0 add nothing
    shown, rest = ranked[:top], ranked[top:]
    if rest:
        shown.append((f"other ({len(rest)})", sum(v for _, v in rest)))
    return shown


def plot_breakdown(
    report: ReportRecord,
    metric: str = "flops",
    path: str | Path | None = None,
    *,
    by: str = "module",
    depth: int = 1,
    top: int = 10,
    title: str | None = None,
    dpi: int = 100,
) -> Any:
    """Sorted horizontal bars of ``metric`` by module or op type; returns the Figure."""
    from matplotlib.figure import Figure

    parts = breakdown(report, metric, by, depth, top)
    total = sum(v for _, v in parts)
    figure = colour_figures()[metric]
    unit, text = figure.unit, unit_text(figure.unit)
    fig = Figure(figsize=(8.0, 0.9 + 0.32 * len(parts)), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    values = [v for _, v in parts]
    colors = ["#4c78a8"] * len(parts)
    if parts and parts[-1][0].startswith("other"):
        colors[-1] = "#bbbbbb"
    size, suffix = fmt.axis_unit(max(values, default=0), unit.value)
    ax.barh(range(len(parts)), [v / size for v in values], color=colors)
    ax.set_yticks(range(len(parts)), [label for label, _ in parts], fontsize=9)
    ax.invert_yaxis()
    for i, v in enumerate(values):
        share = v / total if total else 0.0
        ax.text(v / size, i, f"  {text(v, False)}  ({fmt.percent(share)})", va="center", fontsize=8)
    ax.set_xlim(0, (max(values, default=1) * 1.35 or 1) / size)
    axis_unit = f" ({suffix})" if suffix else ""
    ax.set_xlabel(f"{figure.title}{axis_unit}, total {text(total, False)}", fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    root = report.modules.get("")
    where = f"modules to depth {depth}" if by == "module" else "op types"
    ax.set_title(title or f"{root.type if root else 'model'}: {figure.title} by {where}", fontsize=10, loc="left")
    if path is not None:
        save_figure(fig, path)
    return fig
