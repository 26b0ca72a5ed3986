"""``device_spec="measured"``: this host's roofs, measured in about two seconds, checked and cached.

Each figure is the best of several short trials, not their median: another process can
only make a trial slower, so the fastest is the one closest to what the machine can do,
where a median moves with the load (it read 4.5 to 102 GFLOP/s on one busy host).

* matmul FLOP/s per dtype (float32, float64, bfloat16): one square matmul per trial
  (``2 * n**3`` FLOPs), trials at ``n`` = 128, 256, ... up to 1024 (8192 on CUDA), fewer
  where a dtype is slow, as bfloat16 on a CPU without its instructions;
* memory bandwidth: copying a 64 MiB tensor (its bytes read and written) per trial, its
  pages written first (untouched pages all map to one zero page, read from the cache);
* on a CPU, float32 matmuls that stream a 64 MiB weight (four taken in turn, so that
  none is in a cache), ``x @ w.T`` as a Linear runs them, for 1, 2, 4 ... 128 rows of
  ``x``: their FLOP/s against their FLOPs per byte (``matmul_rates``, with the largest
  square matmul's), which price a 2-D matmul
  (:meth:`~fxinspect.records.DeviceSpec.work_seconds`). A decode step's matmuls have a
  row per sequence: they run far from both roofs (a matrix-vector product reads its
  weight slower than a copy does; a few rows take the packing path of a large matmul);
* launch overhead: a decoder block's module code on one token of width 16 per trial
  (:func:`~.probes.eager_block`), per aten call the time model prices in it: on a CPU an
  eager model's op costs its Python, module call and views besides its launch, several
  times what a bare op in a tight loop takes.

On CUDA (when the default device is one) each trial is timed with synchronisation.

:func:`problems` checks a set: every figure finite and positive; float32 matmul at
least a quarter of float64's (never far below it on a CPU or a GPU), float64 at least
an eighth of float32's on a CPU (half in theory), 1/128 on a GPU; float32 and
float64 at least 0.2 GFLOP/s; the copy between 0.5 GB/s and 50 TB/s, and float32's
FLOP/s at least a quarter of its bytes/s; launch overhead under 1 ms; and, against the
previous plausible measurement, no figure below half of it (launch overhead: above
twice). A set that fails is measured again, up to three times with all trials pooled.

The cache is ``$XDG_CACHE_HOME/fxinspect/device-<key>.json`` (``~/.cache`` when unset;
:func:`cache_file`), one file per host, processor, torch version, thread count and
device. It records when and how the figures were taken (``taken_at`` in UTC, torch,
threads, the load average before, the budget, each kind's trials in seconds and the work
of one trial). It is measured again when it is older than :data:`MAX_AGE` (7 days), of
an older format, or implausible, and after :data:`BUSY_MAX_AGE` (an hour) when the load
average was above the CPUs this process may use as it was taken (a machine busy alike
through all the trials slows every figure alike, which no check sees);
``measured(refresh=True)`` measures now. A measurement that stays implausible is not
cached as the figures: the last plausible ones are used (with a warning) and kept, and
for an hour no new attempt is made; deleting the file starts afresh.
"""

from __future__ import annotations

import functools
import math
import os
import time
import warnings
from datetime import timedelta

import torch

from .host_cache import BUSY_MAX_AGE, FORMAT, MAX_AGE, age, cache_file, max_age, read, taken, write
from .probes import eager_block, priced_calls, streamed_matmuls

__all__ = ["BUSY_MAX_AGE", "MAX_AGE", "cache_file", "measure", "measured", "problems"]

_RETRY_AFTER = timedelta(hours=1)  # after an implausible re-measure, the last good set is used this long
_ATTEMPTS = 3
_DTYPES = (torch.float32, torch.float64, torch.bfloat16)
_MIN_TRIALS, _MAX_TRIALS = 5, 50
_STREAMED = (1024, 16384, (1, 2, 4, 8, 16, 32, 64, 128))  # the weight's in, out features; the rows


def measured(device: str | None = None, refresh: bool = False) -> dict:
    """This host's figures (``device``: ``"cpu"``, or ``"cuda"`` when one is present):
    the cached ones while fresh and plausible, else measured now and checked;
    :func:`fxinspect.timemodel.devices.get` makes them a spec."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    path = cache_file(device)
    cached = read(path)
    good = {k: v for k, v in cached.items() if k != "rejected"} if cached and not problems(cached) else None
    previous = good if good and good.get("format") == FORMAT else None  # (an older layout measured otherwise)
    if good and not refresh:
        if cached.get("format") == FORMAT and age(good) <= max_age(good):
            return good
        if age(cached.get("rejected", {})) <= _RETRY_AFTER:
            return good  # a re-measure failed a moment ago: the machine is likely still busy
    data = measure(device)
    for _ in range(_ATTEMPTS - 1):
        if not problems(data, previous):
            break
        data = _pooled(data, measure(device))
    found = problems(data, previous)
    if not found:
        write(path, data)
        return data
    rejected = {**data, "problems": found}
    used = f"using those of {good.get('taken_at', 'an earlier run')}" if good else "using them for now"
    warnings.warn(
        f"fxinspect: this host's measured figures look implausible ({'; '.join(found)}), {used}; "
        f"the machine may be busy. Measure again later with "
        f"fxinspect.timemodel.host.measured(refresh=True), or delete {path}",
        stacklevel=2,
    )
    write(path, {**good, "rejected": rejected} if good else rejected)
    return good or data


def problems(data: dict, previous: dict | None = None) -> list[str]:
    """What is implausible in a set of figures, alone and against ``previous`` (a set
    taken earlier on this host); empty when it is plausible."""
    try:
        peaks, bandwidth, launch = data["peak_flops"], data["memory_bandwidth"], data["launch_overhead"]
        figures = {**{f"{k} matmul": v for k, v in peaks.items()}, "copy": bandwidth, "launch overhead": launch}
        f32, f64 = peaks["float32"], peaks["float64"]
    except (KeyError, TypeError):
        return ["the figures are incomplete"]
    bad = [f"{name} is {value!r}" for name, value in figures.items() if not (math.isfinite(value) and value > 0)]
    if bad:
        return bad
    found = []
    if f32 < f64 / 4:  # float32 is as fast as float64 or faster on every CPU and GPU
        found.append(f"float32 matmul {_rate(f32)} is below a quarter of float64's {_rate(f64)}")
    share, said = (8, "an eighth") if data.get("device", "cpu") == "cpu" else (128, "1/128")  # 1/64 on some GPUs
    if f64 < f32 / share:
        found.append(f"float64 matmul {_rate(f64)} is below {said} of float32's {_rate(f32)}")
    if min(f32, f64) < 2e8:
        found.append(f"matmul {_rate(min(f32, f64))} is below 0.2 GFLOP/s")
    if not 5e8 <= bandwidth <= 5e13:
        found.append(f"copy {_rate(bandwidth, 'B/s')} is outside 0.5 GB/s to 50 TB/s")
    if f32 < bandwidth / 4:
        found.append(f"float32 matmul {_rate(f32)} is below a quarter of the copy's {_rate(bandwidth, 'B/s')}")
    if launch > 1e-3:
        found.append(f"launch overhead {launch * 1e6:.0f} µs is over 1 ms")
    streamed = [rate for _, rate in data.get("matmul_rates", ())]
    if not all(math.isfinite(rate) and rate > 0 for rate in streamed):
        found.append(f"a streamed matmul's rate is not finite and positive: {streamed}")
    if previous and not problems(previous):
        when = previous.get("taken_at", "an earlier run")
        before = {**{f"{k} matmul": v for k, v in previous["peak_flops"].items()}, "copy": previous["memory_bandwidth"]}
        for name, value in figures.items():
            if name in before and value < before[name] / 2:
                found.append(f"{name} {_rate(value, 'B/s' if name == 'copy' else 'FLOP/s')} is below half of {when}'s")
        if launch > 2 * previous["launch_overhead"]:
            found.append(f"launch overhead {launch * 1e6:.1f} µs is over twice {when}'s")
    return found


def measure(device: str = "cpu", budget: float = 0.4) -> dict:
    """The figures, measured now (each kind in about ``budget`` seconds), with how they were taken."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    trials = {}
    for dtype in _DTYPES:
        trials[str(dtype).removeprefix("torch.")] = _matmuls(dtype, device, budget)
    src = torch.ones(16 * 2**20, device=device)  # 64 MiB of float32, written: its pages are its own
    dst = torch.empty_like(src)
    dst.copy_(src)  # (the warm-up: the destination's pages touched)
    copy = functools.partial(dst.copy_, src)
    trials["copy"] = [{"work": 2 * src.numel() * src.element_size(), "seconds": _trials(copy, device, budget)}]
    del src, dst
    if device == "cpu":
        trials["streamed"] = _streamed(device, budget)
    block = eager_block(device)
    block()  # (the warm-up)
    trials["launch"] = [{"work": priced_calls(block), "seconds": _trials(block, device, budget / 4)}]
    return {
        **taken(device, load),
        "budget": budget,
        "method": "best of short trials",
        **_figures(trials),
        "trials": trials,
    }


def _figures(trials: dict) -> dict:
    """The figures of a set of trials (per kind, a list of ``{"work", "seconds"}``, one
    per size): each kind's fastest trial."""
    rate = {kind: max(t["work"] / min(t["seconds"]) for t in runs) for kind, runs in trials.items()}
    figures = {
        "peak_flops": {kind: rate[kind] for kind in trials if kind not in ("copy", "launch", "streamed")},
        "memory_bandwidth": rate["copy"],
        "launch_overhead": 1 / rate["launch"],
    }
    if "streamed" in trials:
        figures["matmul_rates"] = _matmul_rates(trials["streamed"], trials["float32"])
    return figures


def _matmul_rates(streamed: list[dict], squares: list[dict]) -> list[list[float]]:
    """``(FLOPs per byte, FLOP/s)`` of each streamed matmul's rows (their fastest trial),
    and of the largest square matmul (``n`` by ``n``: ``n / 6`` FLOPs per byte in float32),
    the most intense, which the curve tends to past its streamed points."""
    best: dict[float, float] = {}
    for t in streamed:
        intensity = t["work"] / t["bytes"]
        best[intensity] = max(best.get(intensity, 0.0), t["work"] / min(t["seconds"]))
    square = max(squares, key=lambda t: t["work"])
    n = round((square["work"] / 2) ** (1 / 3))
    best[n / 6] = max(best.get(n / 6, 0.0), square["work"] / min(square["seconds"]))
    return [[i, r] for i, r in sorted(best.items())]


def _pooled(first: dict, second: dict) -> dict:
    """Two measurements as one: their trials together, and the figures of those."""
    trials = {kind: runs + second["trials"][kind] for kind, runs in first["trials"].items()}
    return {**second, **_figures(trials), "trials": trials}


def _matmuls(dtype: torch.dtype, device: str, budget: float) -> list[dict]:
    """Trials of square matmuls from 128 up, each size in about a quarter of ``budget``,
    up to 1024 (8192 on CUDA). Every size is kept and the figure is the fastest of all:
    under load the short calls of a middle size are the likeliest to run undisturbed.

    A slow dtype stops the growth: its fastest call over ``budget / 20`` and about 8
    times the last size's (the work's growth; a call stalled by another process takes
    a time slice whatever its size, and must not stop it), or over ``budget / 4``."""
    sizes, n, largest = [], 128, 1024 if device == "cpu" else 8192
    while True:
        a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
        product = functools.partial(torch.mm, a, b)
        product()  # (the warm-up: the kernel picks its path)
        sizes.append({"work": 2 * n**3, "seconds": _trials(product, device, budget / 4)})
        best = min(sizes[-1]["seconds"])
        grew = len(sizes) > 1 and best > 4 * min(sizes[-2]["seconds"])
        if n >= largest or best > budget / 4 or (best > budget / 20 and grew):
            return sizes
        n *= 2


def _streamed(device: str, budget: float) -> list[dict]:
    """Trials of ``x @ w.T`` over 64 MiB float32 weights taken in turn (each call reads
    its weight from memory), one size per count of rows, each in about ``budget / 8``."""
    sizes = []
    for size, product in streamed_matmuls(*_STREAMED, device):
        product()  # (the warm-up: the kernel picks its path)
        sizes.append({**size, "seconds": _trials(product, device, budget / 8)})
    return sizes


def _trials(fn, device: str, budget: float) -> list[float]:
    """The seconds of one call of ``fn`` each, over about ``budget`` seconds (5 to 50)."""
    times: list[float] = []
    while (sum(times) < budget or len(times) < _MIN_TRIALS) and len(times) < _MAX_TRIALS:
        times.append(_timed(fn, device))
    return times


def _timed(fn, device: str) -> float:
    if device != "cpu":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device != "cpu":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def _rate(value: float, unit: str = "FLOP/s") -> str:
    return f"{value / 1e9:.3g} G{unit}"
