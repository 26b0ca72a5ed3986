"""The integer figures of a report that cost curves are fitted to.

>>> import torch, fxinspect
>>> r = fxinspect.analyze(torch.nn.Linear(8, 4), torch.zeros(2, 8), device="meta")
>>> f = report_figures(r)
>>> f["flops"], f["macs"], f["bytes"], max(f["peak"].values()) == r.memory.peak  # bytes: (16+32+4+8)·4 read + 8·4 written
(136, 64, 240, True)
"""

from __future__ import annotations

from typing import Any

__all__ = ["FIGURES", "report_figures"]

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
