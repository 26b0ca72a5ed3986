"""Plots of plans: a sweep's memory and throughput, a checkpoint plan's trade-off curve.

Both return a matplotlib ``Figure`` (built without pyplot, so no window opens) and write
it to ``path`` when one is given (PNG, SVG or PDF by the extension). They take a
:class:`~.sweep.Sweep` and a :class:`~.checkpointing.CheckpointPlan`, which call them,
and read only their fields (no import back).
"""

from __future__ import annotations

from typing import Any

from ..formatting import units
from ..views.figures import save_figure

__all__ = ["plot_checkpoint_plan", "plot_sweep"]

_MEMORY = "#4c78a8"
_RESIDENT = "#9ab0c8"
_SPEED = "#f58518"
_BUDGET = "#d62728"


def plot_sweep(sweep: Any, path: Any = None):
    """Total peak and resident memory against the batch, and inputs per second.

    One line a sequence length; inputs per second on a second axis when the points were
    timed or priced; the budget as a horizontal line.
    """
    from matplotlib.figure import Figure

    points = sweep.points
    fig = Figure(figsize=(8, 4.8), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    largest = max([p.total_peak for p in points] + [sweep.budget.total if sweep.budget else 0])
    scale, unit = units.axis_unit(largest, "byte")
    seqs = list(dict.fromkeys(p.seq_len for p in points))
    for i, seq in enumerate(seqs):
        line = [p for p in points if p.seq_len == seq]
        label = "total peak" + (f", seq {seq}" if seq is not None else "")
        style = ("-", "--", ":", "-.")[i % 4]
        ax.plot(
            [p.batch for p in line], [p.total_peak / scale for p in line], style, marker="o", color=_MEMORY, label=label
        )
    resident = [p for p in points if p.seq_len == seqs[0]]
    ax.plot([p.batch for p in resident], [p.resident / scale for p in resident], color=_RESIDENT, label="resident")
    if sweep.budget is not None:
        ax.axhline(sweep.budget.usable / scale, color=_BUDGET, linewidth=1, label=f"budget {sweep.budget}")
    batches = sorted({p.batch for p in points})
    if batches[-1] >= 8 * batches[0]:
        ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_xlabel("batch size")
    ax.set_ylabel(f"memory ({unit})")
    ax.set_ylim(0, 1.3 * largest / scale)  # room above the lines for the legend
    measured = all(p.inputs_per_second is not None for p in points)
    predicted = all(p.predicted_inputs_per_second is not None for p in points)
    handles, labels = ax.get_legend_handles_labels()
    if measured or predicted:
        speed = ax.twinx()
        name = "inputs/s" if measured else "predicted inputs/s"
        speeds = []
        for i, seq in enumerate(seqs):
            line = [p for p in points if p.seq_len == seq]
            rate = [p.inputs_per_second if measured else p.predicted_inputs_per_second for p in line]
            speeds.append(rate)
            style = ("-", "--", ":", "-.")[i % 4]
            speed.plot([p.batch for p in line], rate, style, marker="s", color=_SPEED, label=name)
        speed.set_ylabel(name)
        speed.set_ylim(0, 1.3 * max(max(r for r in rates if r is not None) for rates in speeds))
        more, more_labels = speed.get_legend_handles_labels()
        handles, labels = handles + more[:1], labels + more_labels[:1]
    ax.legend(handles, labels, loc="upper left", frameon=False, ncols=min(3, len(labels)))
    title = "memory" + (" and throughput" if measured or predicted else "") + " against the batch size"
    ax.set_title(title, loc="left")
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_checkpoint_plan(plan: Any, path: Any = None):
    """The trade-off curve: each plan's peak against its recompute cost.

    Estimated plans hollow, analysed ones filled, the chosen plan ringed, the budget as a
    horizontal line.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.8), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    curve = plan.curve
    largest = max([c.peak for c in curve] + [plan.budget.total])
    scale, unit = units.axis_unit(largest, "byte")
    cost_scale, cost_unit = units.axis_unit(max(c.recompute_flops for c in curve) or 1, "flop")
    xs = [c.recompute_flops / cost_scale for c in curve]
    ax.step(xs, [c.peak / scale for c in curve], where="post", color=_MEMORY, linewidth=1)
    ax.plot(xs, [c.estimated_peak / scale for c in curve], "o", mfc="white", mec=_MEMORY, label="plan (estimated)")
    done = [c for c in curve if c.analysed_peak is not None]
    ax.plot(
        [c.recompute_flops / cost_scale for c in done],
        [c.analysed_peak / scale for c in done],
        "o",
        color=_MEMORY,
        label="plan (analysed)",
    )
    ax.axhline(plan.budget.usable / scale, color=_BUDGET, linewidth=1, label=f"budget {plan.budget}")
    if plan.fits:
        ax.plot([plan.recompute_flops / cost_scale], [plan.peak / scale], "o", ms=12, mfc="none", mec=_BUDGET)
        ax.annotate(
            f"chosen: {len(plan.modules)} module(s), {units.nbytes(plan.peak)}",
            (plan.recompute_flops / cost_scale, plan.peak / scale),
            xytext=(12, 12),
            textcoords="offset points",
        )
    ax.set_xlabel(f"recomputed forward FLOPs ({cost_unit}FLOP)")
    ax.set_ylabel(f"total peak ({unit})")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", frameon=False)
    ax.set_title("activation checkpointing: peak against recompute", loc="left")
    if path is not None:
        save_figure(fig, path)
    return fig
