"""Time several variants interleaved, so that machine noise hits all of them alike."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def medians(variants: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Each variant's median seconds over ``repeats`` rounds, one call of each per round,
    after one warm-up call of each (lazy imports, the allocator)."""
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for fn in variants.values():
        fn()
    for _ in range(repeats):
        for key, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            samples[key].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}
