"""``fxinspect.devices.calibrate()``: the share of the roofline each kernel class reaches here.

On top of this host's roofs (:mod:`.host`: matmul FLOP/s, copy bandwidth, launch
overhead), it times the workloads of :mod:`.kernel_probes`, a few representative calls
per kernel class (:mod:`.kernel_classes`), and keeps for each its *efficiency*: the
roofline's time for the call (its FLOPs and bytes as the counting rules price them, at
those roofs) over the time it took, less the bare cost of an aten call, which the
pricing adds as the launch overhead. Each class's points, against FLOPs per byte or
bytes per call, are a curve the pricing interpolates in log-log
(:meth:`~fxinspect.records.DeviceSpec.efficiency_at`); the kinds of
:data:`~.kernel_classes.KIND_CURVES` have curves of their own (``"conv.depthwise"``,
``"conv.dense.backward"``, ``"batch_norm.train"``): a depthwise convolution is priced
at the share of the roofs depthwise convolutions reach on this device, not at the
matmul roof nor at a dense convolution's of its FLOPs per byte.

Each time is the best of short trials (another process can only slow one down), a
trial being one call after 64 MiB (256 MiB on a GPU) were written, so that its inputs
and weights come from memory, not from a cache that held them since the last trial (a
model's layer reads weights no other layer read; measured warm, MobileNetV3's
convolutions were priced at 0.6 of their time), with synchronisation on CUDA, taken
in passes over all the workloads (a burst of load then slows some trials of each, not all of one) until, for
three passes, no best improved by a tenth and no point dipped 8 times below both its
neighbours (:func:`problems` names such a dip), or half the budget is spent. The set is checked
(:func:`problems`: every class measured, every efficiency finite and between 1/10,000
and 100, none 8 times below both its neighbours, the bare call under 1 ms) and measured
again, up to three times (in a quarter of the budget each), keeping the best of each
workload. It is cached beside the roofs (``calibration-<key>.json``,
:func:`~.host_cache.cache_file`) with when and how it was taken, the roofs it is
relative to, and every trial; it is measured again when older than the roofs' limits
(:func:`~.host_cache.max_age`), of an older :data:`~.host_cache.FORMAT`, implausible, or
with ``refresh=True``.
"""

from __future__ import annotations

import math
import os
import time

import torch

from ..records import DeviceSpec
from .host_cache import FORMAT, age, cache_file, max_age, read, taken, write
from .kernel_classes import CLASSES, KIND_CURVES, MEASURED_BY_KIND, kernel_class, priced_class, scale
from .kernel_probes import workloads

__all__ = ["calibrated", "measure", "problems", "provenance"]

_ATTEMPTS = 3
_MIN_TRIALS, _MAX_TRIALS = 3, 30  # a workload's trials in the first pass (1 in the next), at most in one
_PASS_BUDGET = 0.01  # seconds of trials a workload gets in one pass at most
_MAX_PASSES = 100
_FLUSH, _FLUSH_GPU = 64 * 2**20, 256 * 2**20  # bytes written before each trial: beyond a CPU's last cache, a GPU's L2
_DIP = 8  # a point this many times below both its neighbours' efficiencies was slowed by load


def calibrated(device: str | None = None, budget_s: float = 60.0, refresh: bool = False) -> dict:
    """This host's calibration (``device``: ``"cpu"``, or ``"cuda"`` when one is present):
    the cached one while fresh and plausible, else measured now in at most about
    ``budget_s`` seconds (and the roofs with it when ``refresh``);
    :func:`fxinspect.devices.calibrate` makes it a spec."""
    from .host import measured

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    path = cache_file(device, kind="calibration")
    cached = read(path)
    if (
        cached
        and not refresh
        and cached.get("format") == FORMAT
        and not problems(cached)
        and age(cached) <= max_age(cached)
    ):
        return cached
    data = measure(device, budget_s, measured(device, refresh=refresh))
    for _ in range(_ATTEMPTS - 1):  # (half the budget for the first, a quarter for each other)
        if not problems(data):
            break
        data = _pooled(data, measure(device, budget_s / 2, data["roofs"]))
    if not problems(data):
        write(path, data)  # (an implausible one is used this once, measured again next time)
    return data


def measure(device: str, budget_s: float, roofs: dict) -> dict:
    """The efficiency of each class's workloads on ``device`` against ``roofs`` (the
    figures of :func:`~.host.measured`), measured now within about ``budget_s`` seconds."""
    from ..run.dispatch import CountingMode  # (the run layer prices ops as the model's are)

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    started = time.perf_counter()
    roof = DeviceSpec("roofs", roofs["peak_flops"], roofs["memory_bandwidth"])
    one = torch.ones(1, device=device)
    bare = min(_trials(lambda: torch.add(one, one), device, 0.02))
    found = workloads(device)
    points: list[tuple[dict, object]] = []
    for cls, calls in found.items():
        needed = {c for c in KIND_CURVES if priced_class(c) == cls} | ({cls} - MEASURED_BY_KIND)
        for label, fn in calls:
            late = time.perf_counter() - started > budget_s / 2
            have = {p["class"] for p, _ in points}
            if late and needed <= have:
                break  # (out of time: a class keeps the points it has, every class and kind at least one)
            point = _point(cls, label, fn, roof, CountingMode)
            if not (late and point["class"] in have):
                points.append((point, fn))
    # passes over every workload, each a few trials: a burst of load slows some trials of
    # each rather than all of one; until, for three passes, no best improved by a tenth and
    # no point dips below its neighbours, or half the budget is spent
    flush = torch.zeros((_FLUSH if device == "cpu" else _FLUSH_GPU) // 4, device=device)
    per_pass = min(_PASS_BUDGET, budget_s / (8 * len(points)))
    steady = 0
    for done in range(_MAX_PASSES):
        improved = False
        for point, fn in points:
            before = min(point["seconds"], default=math.inf)
            point["seconds"] += _trials(fn, device, per_pass, _MIN_TRIALS if not done else 1, flush)
            improved |= min(point["seconds"]) < 0.9 * before
        steady = 0 if improved or _dips(_efficiency(_by_class(points), bare)) else steady + 1
        if time.perf_counter() - started > budget_s / 2 or steady >= 3:
            break
    trials = _by_class(points)
    return {
        **taken(device, load),
        "budget": budget_s,
        "took": time.perf_counter() - started,
        "method": "best of short trials, less a bare aten call",
        "roofs": roofs,
        "bare_call": bare,
        "efficiency": _efficiency(trials, bare),
        "trials": trials,
    }


def _by_class(points: list[tuple[dict, object]]) -> dict[str, list[dict]]:
    trials: dict[str, list[dict]] = {}
    for point, _ in points:
        trials.setdefault(point["class"], []).append({k: v for k, v in point.items() if k != "class"})
    return trials


def _dips(curves: dict[str, list[list[float]]]) -> list[str]:
    """The points of each curve :data:`_DIP` times below both neighbours: slowed by load
    (load only slows a trial; a class's efficiency moves smoothly with its measure)."""
    return [
        f"{cls} at {b[0]:.3g} reached {b[1]:.3g} of its roofs, its neighbours {a[1]:.3g} and {c[1]:.3g}"
        for cls, curve in curves.items()
        if cls not in MEASURED_BY_KIND  # (its kinds' curves together are not one curve)
        for a, b, c in zip(curve, curve[1:], curve[2:])
        if b[1] * _DIP < min(a[1], c[1])
    ]


def _point(cls: str, label: str, fn, roof: DeviceSpec, counting) -> dict:
    """A workload's measure and roof time, its ops counted and priced as a model's are."""
    mode = counting()
    with mode:
        mode.node = "probe"
        fn()  # (also the warm-up: the kernel picks its path)
    costs = [(op, c) for op, c in mode.costs.get("probe", {}).items() if c.flops or c.bytes_read or c.bytes_written]
    if any(priced_class(kernel_class(op)) != priced_class(cls) for op, _ in costs):
        raise AssertionError(f"calibration workload {label!r} of {cls} ran {[op for op, _ in costs]}")
    flops = sum(c.flops for _, c in costs)
    moved = sum(c.bytes_read + c.bytes_written for _, c in costs)
    calls = sum(c.calls for _, c in costs)
    seconds = sum(max(roof.seconds(c.flops, c.bytes_read + c.bytes_written, None)) for _, c in costs)
    kinds = {c.kind for _, c in costs if c.kind}  # (a convolution's, a batch norm's: a curve of its own)
    backward = all("_backward" in op for op, _ in costs)
    return {
        "class": f"{cls}.{kinds.pop()}{'.backward' if backward else ''}" if len(kinds) == 1 else cls,
        "label": label,
        "x": scale(cls, flops, moved, calls),
        "roof": seconds,
        "calls": calls,
        "seconds": [],
    }


def _efficiency(trials: dict[str, list[dict]], bare: float) -> dict[str, list[list[float]]]:
    """Per class, ``[x, efficiency]`` of each workload: its roof time over its fastest
    trial less a bare call per op (never less than a tenth of the trial); workloads at
    the same ``x`` (within 2 %) one point, their geometric mean. A class measured by kind
    alone (``"conv.depthwise"``, ``"conv.dense"``, ...) has a curve of its kinds' forward
    points too (``"conv"``), for calls whose kind is not known (a report read from an
    older JSON)."""
    curves = {}
    for cls, points in trials.items():
        curve = []
        for p in points:
            best = min(p["seconds"])
            curve.append([p["x"], p["roof"] / max(best - p["calls"] * bare, best / 10)])
        curves[cls] = _merged(curve)
    for cls in {priced_class(c) for c in curves} - set(curves):  # (measured by kind alone: "conv")
        forwards = [c for c in curves if priced_class(c) == cls and not c.endswith(".backward")]
        curves[cls] = _merged([p for c in forwards for p in curves[c]])
    return curves


def _merged(curve: list[list[float]]) -> list[list[float]]:
    """``curve``'s points sorted by ``x``, those within 2 % of the first of a run one point (geometric means)."""
    runs: list[list[list[float]]] = []
    for point in sorted(curve):
        if runs and point[0] <= runs[-1][0][0] * 1.02:
            runs[-1].append(point)
        else:
            runs.append([point])
    return [[math.prod(p[i] for p in run) ** (1 / len(run)) for i in (0, 1)] for run in runs]


def problems(data: dict) -> list[str]:
    """What is implausible in a calibration; empty when it is plausible."""
    try:
        curves, bare = data["efficiency"], data["bare_call"]
        data["roofs"]["peak_flops"]["float32"]
    except (KeyError, TypeError):
        return ["the calibration is incomplete"]
    expected = (*CLASSES, *KIND_CURVES)
    found = [f"{cls} was not measured" for cls in expected if not curves.get(cls)]
    for cls, curve in curves.items():
        for x, e in curve:
            if not (math.isfinite(e) and 1e-4 <= e <= 100):
                found.append(f"{cls} at {x:.3g} reached {e!r} of its roofs (outside 1/10,000 to 100)")
    if not (math.isfinite(bare) and 0 < bare < 1e-3):
        found.append(f"a bare aten call took {bare!r} s")
    return found or _dips(curves)


def _pooled(first: dict, second: dict) -> dict:
    """Two calibrations as one: each workload's trials together (by its label: the second,
    in less time, may have fewer), their times and budgets summed."""
    again = {(cls, p["label"]): p["seconds"] for cls, points in second["trials"].items() for p in points}
    trials = {
        cls: [{**p, "seconds": p["seconds"] + again.get((cls, p["label"]), [])} for p in points]
        for cls, points in first["trials"].items()
    }
    bare = min(first["bare_call"], second["bare_call"])
    spent = {k: first[k] + second[k] for k in ("took", "budget")}
    return {**second, **spent, "trials": trials, "bare_call": bare, "efficiency": _efficiency(trials, bare)}


def provenance(data: dict) -> str:
    """When and how a calibration was taken, for its spec's ``source``."""
    fewest = min(len(p["seconds"]) for points in data["trials"].values() for p in points)
    classes = len({priced_class(cls) for cls in data["efficiency"]})
    return (
        f"kernel efficiencies of {classes} classes (convolutions by kind) measured at {data['taken_at']} in "
        f"{data['took']:.1f} s of a {data['budget']:g} s budget, each the best of at least {fewest} trials"
    )


def _trials(fn, device: str, budget: float, least: int = _MIN_TRIALS, flush: torch.Tensor | None = None) -> list[float]:
    """The seconds of one call of ``fn`` each, over about ``budget`` seconds (``least`` to
    30 calls), each after writing ``flush`` when given (so that the call's data and
    weights come from memory, as a model's next layer reads its own)."""
    times: list[float] = []
    while (sum(times) < budget or len(times) < least) and len(times) < _MAX_TRIALS:
        if flush is not None:
            flush.add_(1.0)
        if device != "cpu":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device != "cpu":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return times
