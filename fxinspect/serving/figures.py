"""The integer figures of a report that cost curves are fitted to.

>>> import torch, fxinspect
>>> r = fxinspect.analyze(torch.nn.Linear(8, 4), torch.zeros(2, 8), device="meta")
>>> f = report_figures(r)
>>> f["flops"], f["macs"], f["bytes"], max(f["peak"].values()) == r.memory.peak  # bytes: (16+32+4+8)·4 read + 8·4 written
(136, 64, 240, True)
"""

from __future__ import annotations

from typing import Any

from .records import DecodeCost
from .step_time import call_figures, node_dtypes

__all__ = ["FIGURES", "by_node", "decode_cost", "flat", "report_figures", "step_summary"]

FIGURES = {"flops": "flops", "macs": "macs", "bytes_read": "bytes_read", "bytes_written": "bytes_written",
           "bytes": "bytes_moved"}  # fmt: skip
"""The summed totals fitted (name: the attribute of ``report.totals``): exact integers."""


def report_figures(report: Any) -> dict[str, Any]:
    """``report``'s totals by name, and with a memory model its ``peak`` as the timeline
    (one value per event, by node: the peak is their maximum) and its ``resident`` bytes."""
    totals = report.totals
    out: dict[str, Any] = {name: int(getattr(totals, attribute)) for name, attribute in FIGURES.items()}
    memory = report.memory
    if memory is not None:
        out["peak"] = _events(memory)
        out["resident"] = memory.resident
    return out


def _events(memory: Any) -> dict[str, int]:
    """The timeline's values by the node running and the event's rank in it (``"mul_3#1"``):
    names that stay the same at every size where the graph does."""
    starts = sorted(memory.node_starts)
    out: dict[str, int] = {}
    node, at, rank = "", 0, 0
    for index, live in memory.timeline:
        while at < len(starts) and starts[at][0] <= index:
            node, rank, at = starts[at][1], 0, at + 1
        out[f"{node or 'start'}#{rank}"] = live
        rank += 1
    return out


def step_summary(report: Any, kv: int) -> dict[str, Any]:
    """What a generation reads off one analysed decode step: the figures its curves are
    fitted to (the cache's ``kv`` bytes among them), its totals, its peak and each node's
    priced dtype (all of them numbers or names :func:`~.layers.extrapolate` carries over)."""
    totals, memory = report.totals, report.memory
    return {
        "figures": {**report_figures(report), **call_figures(report), "kv": kv},
        "totals": {
            "flops": totals.flops,
            "macs": totals.macs,
            "bytes": totals.bytes_moved,
            "seconds": totals.predicted_latency,
        },  # fmt: skip
        "peak": None if memory is None else memory.total_peak,
        "dtypes": node_dtypes(report),
    }


def by_node(found: dict[str, Any]) -> dict[str, Any]:
    """``found`` (:func:`report_figures`, or a :func:`step_summary`) with its timeline by node
    (``{node: {rank: bytes}}``: a node's events, as many as it has at that depth) and a
    step's peak as what it holds beyond the resident bytes and the timeline's highest; :func:`flat` undoes it."""
    figures = found.get("figures", found)
    events: dict[str, dict[str, int]] = {}
    for key, live in figures.get("peak", {}).items():
        node, rank = key.rsplit("#", 1)
        events.setdefault(node, {})[rank] = live
    nested = {**figures, "peak": events} if "peak" in figures else figures
    if "figures" not in found:
        return nested
    top = max(figures["peak"].values()) + figures["resident"] if "peak" in figures else 0
    return {**found, "figures": nested, "peak": None if found["peak"] is None else found["peak"] - top}


def flat(found: dict[str, Any]) -> dict[str, Any]:
    """:func:`by_node` undone."""
    figures = found.get("figures", found)
    if "peak" in figures:
        timeline = {f"{node}#{rank}": live for node, ranks in figures["peak"].items() for rank, live in ranks.items()}
        figures = {**figures, "peak": timeline}
    if "figures" not in found:
        return figures
    top = max(figures["peak"].values()) + figures["resident"] if "peak" in figures else 0
    return {**found, "figures": figures, "peak": None if found["peak"] is None else found["peak"] + top}


def decode_cost(gen: Any, context: int, batch: int) -> DecodeCost:
    """``gen``'s decode step at ``context`` for ``batch`` sequences, off its curves (the step
    analysed where its counts are not verified; the peak off its curve even unverified)."""
    curves = gen._exact(context, ("flops", "macs", "bytes"), batch)
    if curves is None:
        step = gen._summary(batch, context)
        t = step["totals"]
        return DecodeCost(batch, context, t["flops"], t["macs"], t["bytes"], t["seconds"], step["peak"])
    counts = (int(curves[name](batch, context)) for name in ("flops", "macs", "bytes"))
    seconds = gen.step_seconds(context, batch) if gen.prefill.time_model is not None else None
    return DecodeCost(batch, context, *counts, seconds, gen.decode_peak(batch, context, exact=False))
