"""The pure parts of ``benchmarks/gpu_check.py``: op classes, the allocator's blocks, error statistics, goals, the table.

Nothing here runs a model: each is a function of numbers and names, unit-tested in
``tests/test_gpu_check.py`` against hand-computed figures.

Example
-------
>>> op_class("aten.addmm.default"), op_class("aten::_scaled_dot_product_flash_attention")
('gemm', 'attention')
>>> allocator_block(1), allocator_block(513), allocator_block(0)  # 512-byte blocks
(512, 1024, 0)
>>> allocator_block(23 * 2**19) == 12 * 2**20  # 11.5 MiB: its 12 MiB segment, 0.5 MiB left unsplit
True
"""

from __future__ import annotations

import math

from fxinspect.timemodel.kernel_classes import kernel_class, priced_class

__all__ = [
    "GOALS",
    "MIN_BLOCK",
    "allocator_block",
    "error_stats",
    "goal_lines",
    "goals",
    "op_class",
    "percentile",
    "rounded_peak",
    "table",
]

# the CUDA caching allocator's constants (c10/cuda/CUDACachingAllocator.cpp)
MIN_BLOCK = 512  # kMinBlockSize: every block a multiple of it
_MIN_LARGE_ALLOC = 10 * 2**20  # kMinLargeAlloc: from here a request gets its own segment...
_ROUND_LARGE = 2 * 2**20  # kRoundLarge: ...rounded up to 2 MiB
_SPLIT_ABOVE = 2**20  # kSmallSize: a large-pool block is split only when over this is left


# (name, bound, what the value is): each checked and printed, PASS or MISS, never failing the run
GOALS = (
    ("calibrated median error", 0.10, "median over workloads of |predicted / measured - 1|, calibrated spec"),
    ("calibrated p90 error", 0.20, "90th percentile of the same errors"),
    ("datasheet worst factor", 1.5, "largest max(r, 1/r) of predicted / measured, datasheet preset"),
    ("memory worst error", 0.03, "largest |estimate / measured - 1| of the peaks, allocator's rounding modelled"),
)


def op_class(op: str) -> str:
    """The kernel class an aten op's time is grouped under, from its name as the report
    (``aten.addmm.default``) or the profiler (``aten::addmm``) spells it: the class whose
    calibrated curve prices it (:func:`fxinspect.timemodel.kernel_classes.kernel_class`,
    a convolution's kinds as one)."""
    name = op.replace("aten::", "aten.")
    return priced_class(kernel_class(name if "." in name.removeprefix("aten.") else name + ".default"))


def allocator_block(nbytes: int) -> int:
    """The bytes ``torch.cuda.memory_allocated`` counts for a request of ``nbytes``, as
    the caching allocator's default configuration serves it from a fresh segment.

    The request is rounded up to a multiple of 512 (none for an empty tensor: it takes
    no block). From 10 MiB up it gets a segment of its own, rounded up to 2 MiB, and a
    block is split only when what is left is over 1 MiB: under that, the block keeps the
    rest and counts it. (Smaller requests are cut from 2 MiB or 20 MiB segments, whose
    rest is always split off.) A block reused from the cache is likewise kept whole when
    it is under 1 MiB larger than the request."""
    if nbytes <= 0:
        return 0
    block = -(-nbytes // MIN_BLOCK) * MIN_BLOCK
    if block >= _MIN_LARGE_ALLOC:
        segment = -(-block // _ROUND_LARGE) * _ROUND_LARGE
        if segment - block <= _SPLIT_ABOVE:
            return segment
    return block


def rounded_peak(sizes) -> int:
    """The estimated peak as the allocator counts it: each storage alive at the peak
    (``report.memory.alive_at_peak``'s ``nbytes``) in its 512-byte block."""
    return sum(allocator_block(n) for n in sizes)


def percentile(values, q: float) -> float:
    """The ``q``-th quantile (0 to 1) of ``values``, linear between the closest ranks
    (numpy's default): at rank ``q * (n - 1)`` of the sorted values."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def error_stats(ratios) -> dict[str, float] | None:
    """Median and 90th percentile of the errors ``|r - 1|`` of predicted / measured
    ratios; ``None`` when there are none."""
    errors = [abs(r - 1) for r in ratios if r is not None and math.isfinite(r)]
    if not errors:
        return None
    return {"median": percentile(errors, 0.5), "p90": percentile(errors, 0.9), "n": len(errors)}


def goals(rows: list[dict]) -> dict[str, dict]:
    """Each goal of :data:`GOALS` on the workloads' ``rows`` (``ratio``: ``{"datasheet":
    r, "calibrated": r}``, ``memory``: ``{"ratio": r}``): its value, bound and whether
    it is met (``None`` with no figures to judge)."""
    ratios = {
        spec: [r["ratio"][spec] for r in rows if r.get("ratio", {}).get(spec) is not None]
        for spec in ("datasheet", "calibrated")
    }
    stats = error_stats(ratios["calibrated"])
    memory = [r["memory"]["ratio"] for r in rows if r.get("memory", {}).get("ratio") is not None]
    values = {
        "calibrated median error": stats and stats["median"],
        "calibrated p90 error": stats and stats["p90"],
        "datasheet worst factor": max((max(r, 1 / r) for r in ratios["datasheet"]), default=None),
        "memory worst error": max((abs(r - 1) for r in memory), default=None),
    }
    return {
        name: {"value": values[name], "bound": bound, "met": None if values[name] is None else values[name] <= bound}
        for name, bound, _ in GOALS
    }


def _num(value: float | None, form: str) -> str:
    width = form.split(".")[0]
    return format("—", f">{width}") if value is None else format(value, form)


def table(rows: list[dict]) -> str:
    """One table: per workload (and under it per op class) measured time, predicted ÷
    measured on each spec, and the memory estimate against the allocator's peak."""
    head = f"{'workload / op class':24} {'measured':>11} {'datasheet':>9} {'calibrated':>10} {'mem est':>10} {'measured':>10} {'est/meas':>8}"
    lines = [head, "-" * len(head)]
    for row in rows:
        if row.get("error") or row.get("skipped"):
            lines.append(f"{row['workload']:24} {row.get('error') or row['skipped']}")
            continue
        ratio, mem = row["ratio"], row["memory"]
        lines.append(
            f"{row['workload']:24} {row['measured_s'] * 1e3:8.2f} ms {_num(ratio.get('datasheet'), '9.2f')} "
            f"{_num(ratio.get('calibrated'), '10.2f')} {mem['estimate_blocks'] / 2**20:6.1f} MiB "
            f"{mem['measured'] / 2**20:6.1f} MiB {_num(mem['ratio'], '8.3f')}"
        )
        for cls, got in row["classes"].items():
            measured = _num(got["measured_s"] and got["measured_s"] * 1e3, "8.2f")
            lines.append(
                f"  {cls:22} {measured:>8} ms {_num(got['ratio'].get('datasheet'), '9.2f')} "
                f"{_num(got['ratio'].get('calibrated'), '10.2f')}"
            )
    return "\n".join(lines)


def goal_lines(found: dict) -> list[str]:
    lines = []
    for name, bound, meaning in GOALS:
        got = found[name]
        verdict = {True: "PASS", False: "MISS", None: "n/a "}[got["met"]]
        lines.append(f"{verdict} {name} {_num(got['value'], '.3f')} (bound {bound}): {meaning}")
    return lines
