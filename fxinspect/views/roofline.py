"""The roofline: each op against the device's roofs, and the chart of it.

Needs a report made with ``analyze(..., device_spec=...)``: its roofs are those of the
:class:`~fxinspect.records.DeviceSpec` the ops were priced on (``report.time_model``).
Per op node (:func:`roofline`): its arithmetic intensity (FLOPs per byte moved), the
roof it sits under (``min(peak, intensity * bandwidth)``, the peak of its output's
dtype), whether compute or memory bounds it, the time the roof allows for its work,
its predicted latency (that time plus the launch overhead of each aten call) and, when
timing ran, the fraction of the roof it reached (roof time / measured latency). An op
measured faster than its roof is flagged ``above_roof`` and its fraction left ``None``:
a unit, dtype or sparsity mismatch, never a fraction over 100 %. With a backward, the
same for the backward. :func:`plot_roofline` draws the roofs and every op (or module).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import renamed
from ..records import DeviceSpec, ReportRecord
from ..records.device_spec import priced_dtype

__all__ = ["plot_roofline", "roofline"]


def _place(spec: DeviceSpec, dtype: str | None, flops: int | None, moved: int | None, latency: float | None) -> dict:
    """One op's position under the roofs: intensity, bound, roof time, achieved fraction."""
    if flops is None or moved is None:
        return {}
    compute, memory = spec.seconds(flops, moved, dtype)
    roof_time = max(compute, memory)
    out = {
        "intensity": flops / moved if moved else None,
        "bound": None if roof_time == 0 else "compute" if compute >= memory else "memory",
        "roof_time": roof_time,
        "peak": spec.peak(dtype),
        "fraction": None,
        "above_roof": False,
    }
    if latency and roof_time:
        fraction = roof_time / latency
        out["above_roof"] = fraction > 1.0
        out["fraction"] = None if fraction > 1.0 else fraction
    return out


def roofline(report: ReportRecord) -> list[dict[str, Any]]:
    """A row per op node: see the module. ``ValueError`` without a time model."""
    spec = _spec(report)
    rows = []
    for n in report.nodes:
        if not n.is_op:
            continue
        dtype = priced_dtype(n.outputs)
        row = {"node": n.name, "module": n.module_path, "label": n.label, "dtype": dtype, "flops": n.flops}
        row["bytes"] = n.bytes_moved
        row.update(_place(spec, dtype, n.flops, n.bytes_moved, n.latency))
        row["predicted"], row["latency"] = n.predicted_latency, n.latency
        if n.backward_flops is not None:
            back = _place(spec, dtype, n.backward_flops, n.backward_bytes_moved, n.backward_latency)
            row.update({f"backward_{k}": v for k, v in back.items()})
            row["backward_predicted"] = n.backward_predicted_latency
        rows.append(row)
    return rows


def _spec(report: ReportRecord) -> DeviceSpec:
    """The device the report's ops were priced on; ``ValueError`` without one."""
    if report.time_model is None:
        raise ValueError(
            "the report has no time model: analyze(model, inputs, device_spec=...) with a preset of "
            "fxinspect.devices (such as 'h100-sxm') or 'measured'"
        )
    return report.time_model


def plot_roofline(
    report: ReportRecord,
    path: str | Path | None = None,
    *,
    by: str = "node",
    depth: int = 1,
    color_by: str = "module",
    colour_by: str | None = None,
) -> Any:
    """The roofs and every op (``by="node"``) or module to ``depth`` (``by="module"``),
    placed by intensity and achieved FLOP/s (the measured latency's, else the predicted
    one's), sized by time, coloured by top-level module or (``color_by="op"``, nodes
    only) by op kind; the ten largest groups are named. Returns the Figure; saved to ``path``.
    ``colour_by`` is the deprecated spelling of ``color_by`` (a ``DeprecationWarning``)."""
    import matplotlib.colors as mcolors
    from matplotlib.figure import Figure

    from .figures import save_figure

    if colour_by is not None:
        color_by = renamed("plot_roofline", "colour_by=", "color_by=", colour_by)
    spec = _spec(report)
    if color_by not in ("module", "op"):
        raise ValueError(f"plot_roofline(color_by=...) takes 'module' or 'op', got {color_by!r}")
    points = _points(report, by, depth, color_by == "op")
    fig = Figure(figsize=(9, 6), dpi=100)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [p["intensity"] for p in points] or [1.0]
    low, high = min(min(xs), 0.01) / 2, max(max(xs), 1000) * 2
    bandwidth = spec.memory_bandwidth
    for dtype in sorted({p["dtype"] for p in points} or {"float32"}):
        peak = spec.peak(dtype)
        knee = peak / bandwidth
        ax.plot([low, knee, high], [low * bandwidth, peak, peak], lw=1.2, label=f"roof, {dtype}")
    groups = list(dict.fromkeys(p["group"] for p in points))
    big = sorted(groups, key=lambda g: -sum(p["time"] for p in points if p["group"] == g))[:10]
    colours = dict(zip(big, mcolors.TABLEAU_COLORS.values()))
    longest = max((p["time"] for p in points), default=1.0) or 1.0
    for group in groups:
        mine = [p for p in points if p["group"] == group]
        ax.scatter(
            [p["intensity"] for p in mine],
            [p["achieved"] for p in mine],
            s=[8 + 300 * p["time"] / longest for p in mine],
            color=colours.get(group, "#bbbbbb"),
            alpha=0.7,
            edgecolors="#d62728",
            linewidths=[1.5 if p["above"] else 0.0 for p in mine],
            label=group if group in colours else None,
        )
    ax.set_xlabel("arithmetic intensity (FLOPs per byte moved)")
    ax.set_ylabel("achieved FLOP/s" + ("" if report.totals.latency is not None else " (predicted)"))
    ax.set_xlim(low, high)
    ax.set_title(f"{report.modules[''].type if '' in report.modules else 'model'} on {spec.name}", loc="left")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right", title="size: time; red edge: above its roof", title_fontsize=8)
    if path is not None:
        save_figure(fig, path)
    return fig


def _points(report: ReportRecord, by: str, depth: int, by_op: bool = False) -> list[dict[str, Any]]:
    """What the chart places: ops with FLOPs (or modules), their intensity, achieved
    FLOP/s, the time that sizes them, their group (colour) and whether above the roof."""
    from .. import paths

    spec = _spec(report)
    if by == "module":
        items = [m for p, m in report.modules.items() if p and m.depth == depth]
        dtypes = {}
        for n in report.nodes:
            if n.is_op:
                dtypes.setdefault(paths.cut(n.module_path, depth), next((t.dtype for t in n.outputs), None))
        entries = [(m.path, m.path, dtypes.get(m.path), m) for m in items]
    elif by == "node":
        entries = [
            (
                n.name,
                n.label if by_op else paths.cut(n.module_path, 1) or "(root)",
                next((t.dtype for t in n.outputs), None),
                n,
            )
            for n in report.nodes
            if n.is_op
        ]
    else:
        raise ValueError(f"plot_roofline(by=...) takes 'node' or 'module', got {by!r}")
    points = []
    for name, group, dtype, r in entries:
        time = r.latency if r.latency is not None else r.predicted_latency
        if not r.flops or not r.bytes_moved or not time:
            continue
        place = _place(spec, dtype, r.flops, r.bytes_moved, r.latency)
        points.append(
            {
                "name": name,
                "group": group,
                "dtype": (dtype or "torch.float32").removeprefix("torch."),
                "intensity": r.flops / r.bytes_moved,
                "achieved": r.flops / time,
                "time": time,
                "above": place.get("above_roof", False),
            }
        )
    return points
