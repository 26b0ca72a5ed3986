"""Time several variants interleaved, so that machine noise hits all of them alike."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable


def medians(variants: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Each variant's median seconds over ``repeats`` rounds (see :func:`samples`)."""
    return {k: statistics.median(v) for k, v in samples(variants, repeats).items()}


def samples(variants: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Each variant's seconds in each of ``repeats`` rounds, one call of each per round,
    after one warm-up call of each (lazy imports, the allocator).

    Each call is charged for collecting the cyclic garbage it leaves (a ``gc.collect()``
    inside its time), and for nothing else's: the objects that exist before the rounds
    (torch, torchvision, the models: hundreds of thousands) are frozen out of the
    collector, so a full collection another variant's garbage triggers, walking all of
    them, does not land in whichever variant happens to run next.
    """
    found: dict[str, list[float]] = {k: [] for k in variants}
    for fn in variants.values():
        fn()
    gc.collect()
    gc.freeze()
    try:
        for _ in range(repeats):
            for key, fn in variants.items():
                t0 = time.perf_counter()
                fn()
                gc.collect()
                found[key].append(time.perf_counter() - t0)
    finally:
        gc.unfreeze()
    return found
