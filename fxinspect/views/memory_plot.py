"""``plot_memory``: the memory timeline of a run as a matplotlib figure.

The x axis is execution order (aten ops, as the memory pass saw them), the y axis the
memory held: resident memory (parameters, buffers, inputs, optimizer state) as the
band at the bottom, what the run allocated on top of it. The forward/backward boundary
is marked, the peak annotated with its node, the allocator's measured peak drawn as a
line when there is one, and the tensors alive at the peak listed by size, grouped by
the node that made them and why they were alive.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(288, 10))
>>> report = fxinspect.analyze(model, torch.randn(1, 3, 8, 8), timing=False)
>>> fig = report.plot_memory()           # report.plot_memory("memory.png") writes the file
>>> fig.axes[0].get_title(loc="left")
'Sequential: memory of one forward'
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from .. import formatting as fmt
from ..records import MemoryRecord, ReportRecord
from .figures import save_figure

__all__ = ["plot_memory"]

_RESIDENT = "#c9d3df"
_RUN = "#4c78a8"
_PEAK = "#d62728"
_MEASURED = "#ff7f0e"


def _contributors(m: MemoryRecord, depth: int, top: int) -> list[tuple[str, int]]:
    """The alive-at-peak tensors grouped by (module at ``depth``, role), largest first."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for t in m.alive_at_peak:
        where = ".".join(t.module_path.split(".")[:depth]) if t.module_path else (t.node or "(outside nodes)")
        groups[(where, str(t.role))].append(t.nbytes)
    ranked = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    lines = [
        (f"{where} · {role}" + (f", {len(sizes)} tensors" if len(sizes) > 1 else ""), sum(sizes))
        for (where, role), sizes in ranked[:top]
    ]
    rest = ranked[top:]
    if rest:
        lines.append((f"{len(rest)} smaller groups", sum(sum(sizes) for _, sizes in rest)))
    return lines


def plot_memory(
    report: ReportRecord,
    path: str | Path | None = None,
    *,
    depth: int = 1,
    top: int = 8,
    title: str | None = None,
    figsize: tuple[float, float] = (12.0, 5.5),
    dpi: int = 120,
) -> Any:
    """The memory timeline of ``report`` (needs ``analyze(..., memory=True)``, the default).

    Returns a ``matplotlib.figure.Figure``; with ``path`` also saves it (PNG, SVG or PDF
    by the extension). Beside the timeline, the tensors alive at the peak, grouped by
    their module at ``depth`` and their role (saved activation, gradient, ...), the
    ``top`` largest groups named.
    """
    m = report.memory
    if m is None:
        raise ValueError("this report has no memory timeline: analyze it with memory=True (the default)")
    from matplotlib.figure import Figure

    xs = [x for x, _ in m.timeline]
    ys = [m.resident + b for _, b in m.timeline]
    highest = max([m.resident + m.peak, m.resident + (m.measured_peak or 0), 1])
    scale, unit = fmt.axis_unit(highest, "byte")

    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    grid = fig.add_gridspec(1, 2, width_ratios=(3.2, 1))
    ax, side = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
    end = max(xs[-1], 1)
    _draw_timeline(ax, m, xs, ys, scale, end)
    _mark_peaks(ax, m, xs, ys, scale)
    ax.set_xlim(0, end)
    ax.set_ylim(0, highest / scale * 1.2)
    ax.set_xlabel("execution order (aten ops)")
    ax.set_ylabel(f"memory held ({unit})")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3, fontsize=8, frameon=False)
    root = report.modules.get("")
    kind = "training step (forward + backward)" if m.backward_start is not None else "forward"
    ax.set_title(title or f"{root.type if root else 'model'}: memory of one {kind}", fontsize=11, loc="left")
    _draw_alive_at_peak(side, _contributors(m, depth, top), m.peak, scale, unit)
    if path is not None:
        save_figure(fig, path)
    return fig


def _draw_timeline(ax: Any, m: MemoryRecord, xs: list[int], ys: list[int], scale: float, end: float) -> None:
    """Resident memory as a band, what the run allocated on top, the forward/backward boundary."""
    resident = m.resident
    ax.fill_between(
        [0, end],
        0,
        resident / scale,
        color=_RESIDENT,
        step="post",
        label="resident (params, buffers, inputs" + (", optimizer state)" if m.optimizer_state else ")"),
        linewidth=0,
    )
    ax.fill_between(
        xs,
        resident / scale,
        [y / scale for y in ys],
        step="post",
        color=_RUN,
        alpha=0.85,
        label="allocated by the run",
        linewidth=0,
    )
    if m.backward_start is not None:  # the boundary, drawn up to the curve (clear of the notes above it)
        at = max((y for x, y in zip(xs, ys) if x <= m.backward_start), default=resident)
        ax.vlines(m.backward_start, 0, at / scale, color="black", linestyle="--", linewidth=1)
        label_y = resident / scale / 2  # inside the resident band, clear of the curve and the legend
        ax.text(m.backward_start, label_y, "  backward →", ha="left", va="center", fontsize=9)
        ax.text(m.backward_start, label_y, "← forward  ", ha="right", va="center", fontsize=9)


def _mark_peaks(ax: Any, m: MemoryRecord, xs: list[int], ys: list[int], scale: float) -> None:
    """The peak as a dot with a note naming its node; the allocator's measured peak as a line."""
    resident = m.resident
    peak_x = next(x for x, y in zip(xs, ys) if y - resident == m.peak)
    ax.plot([peak_x], [(resident + m.peak) / scale], "o", color=_PEAK, zorder=5)
    where = f"{m.peak_node} ({m.peak_phase})" if m.peak_node else str(m.peak_phase)
    right = peak_x > 0.6 * max(xs[-1], 1)  # the note goes where there is room
    ax.annotate(
        f"peak {fmt.nbytes(resident + m.peak)} at {where}",
        (peak_x, (resident + m.peak) / scale),
        xytext=(-10 if right else 10, 18),
        textcoords="offset points",
        color=_PEAK,
        fontsize=9,
        ha="right" if right else "left",
        arrowprops={"arrowstyle": "-", "color": _PEAK, "linewidth": 0.8},
    )
    if m.measured_peak is not None:
        ax.axhline(
            (resident + m.measured_peak) / scale,
            color=_MEASURED,
            linestyle=":",
            linewidth=1.5,
            label=f"measured peak ({m.measured_by})",
        )


def _draw_alive_at_peak(side: Any, names: list[tuple[str, int]], peak: int, scale: float, unit: str) -> None:
    """The groups of tensors alive at the peak as bars, largest on top, each with its size."""
    side.barh(range(len(names)), [b / scale for _, b in names], color=_RUN, alpha=0.85)
    side.set_yticks(range(len(names)), [n for n, _ in names], fontsize=8)
    side.invert_yaxis()
    side.set_xlabel(unit)
    side.set_title(f"alive at the peak: {fmt.nbytes(peak)}\nby module and role", fontsize=10, loc="right")
    side.grid(axis="x", alpha=0.3)
    for i, (_, b) in enumerate(names):
        side.text(b / scale, i, f" {fmt.nbytes(b)}", va="center", fontsize=7)
    side.set_xlim(0, max((b for _, b in names), default=1) / scale * 1.45)
