"""``device_spec="measured"``: this host's roofs, measured in about two seconds and cached.

* matmul FLOP/s per dtype (float32, float64, bfloat16): square matmuls of up to 1024
  (smaller where a dtype is slow, as bfloat16 on a CPU without its instructions), the
  median of about 0.4 s of calls (``2 * n**3`` FLOPs each), as op latencies are medians;
* memory bandwidth: copying a 64 MiB tensor (its bytes read and written), the median;
* launch overhead: the median time of an op on a one-element tensor, what every aten
  op costs beyond its work.

On CUDA (when the default device is one) the same runs are timed with synchronisation.
The result is cached as JSON under ``$XDG_CACHE_HOME/fxinspect`` (``~/.cache``), keyed
by the host, its processor, torch's version and thread count: a second call reads it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

__all__ = ["measure", "measured"]

_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def _cache_file(device: str) -> Path:
    key = "|".join([platform.node(), platform.processor(), torch.__version__, str(torch.get_num_threads()), device])
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return root / "fxinspect" / f"device-{digest}.json"


def measured(device: str | None = None, refresh: bool = False) -> dict:
    """This host's figures (``device``: ``"cpu"``, or ``"cuda"`` when one is present),
    from the cache or measured now; :func:`fxinspect.devices.get` makes them a spec."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    path = _cache_file(device)
    if not refresh and path.exists():
        try:
            data = json.loads(path.read_text())
            if {"peak_flops", "memory_bandwidth", "launch_overhead"} <= set(data):
                return data
        except (ValueError, OSError):
            pass  # a damaged cache: measure again
    data = measure(device)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    except OSError:
        pass  # a read-only home: the figures are still returned
    return data


def _timed(fn, device: str) -> float:
    if device != "cpu":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device != "cpu":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def _median_time(fn, device: str, budget: float) -> float:
    """The median of ``fn``'s times over about ``budget`` seconds (at least 5 calls): the
    statistic the timing pass gives each op, so that the two compare on a busy machine."""
    times: list[float] = []
    while sum(times) < budget or len(times) < 5:
        times.append(_timed(fn, device))
    return statistics.median(times)


def measure(device: str = "cpu", budget: float = 0.4) -> dict:
    """The figures, measured now: each kind takes about ``budget`` seconds."""
    peaks = {}
    for dtype in _DTYPES:
        n = 128
        while True:  # large enough to run at speed, small enough to be quick where a dtype is slow
            a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
            product = functools.partial(torch.mm, a, b)
            first = _timed(product, device)  # (also the warm-up: the kernel picks its path)
            if first > budget / 20 or n >= 1024:
                break
            n *= 2
        peaks[str(dtype).removeprefix("torch.")] = 2 * n**3 / _median_time(product, device, budget)
    src = torch.empty(16 * 2**20, device=device)  # 64 MiB of float32
    dst = torch.empty_like(src)
    dst.copy_(src)
    bandwidth = 2 * src.numel() * src.element_size() / _median_time(lambda: dst.copy_(src), device, budget)
    one = torch.ones(1, device=device)
    times = [_timed(lambda: torch.add(one, one), device) for _ in range(2000)]
    return {
        "device": device,
        "host": platform.node(),
        "torch": torch.__version__,
        "peak_flops": peaks,
        "memory_bandwidth": bandwidth,
        "launch_overhead": statistics.median(times),
    }
