"""Each run of the analysis in a fresh autocast region, and none of its casts left behind.

Inside ``torch.autocast``, a float32 leaf tensor that requires grad (a parameter) is
cast to the region's lower precision once: the copy is cached, reused by every later op
that casts the same tensor, and freed only when the outermost region exits
(``torch.clear_autocast_cache``). So a forward under autocast holds a low-precision
copy of every weight it used, from the op that first cast it until the region ends:
half the float32 weights, for bfloat16 or float16. The storage model sees those copies
as they are made (``aten._to_copy`` of a parameter) and, the cache holding them, keeps
them alive to the end of the run, as the eager call's region does.

That holds only when a run starts with nothing cached. ``analyze`` called inside the
user's region runs the model several times (count, memory, the allocator on the model's
own call) in that one region: the first run would fill the cache, the later ones would
find every weight cast already, and the estimate and the measured eager figure would
both leave the copies out. :func:`fresh_autocast_cache` empties the cache before a run
and again after it, so each run casts as a step in a region of its own does, and the
user's code after ``analyze`` finds none of the analysis' copies. torch offers no way
to read the cache or put entries back: copies the user's own code cached before the call
are dropped too, and made again when next needed (the same values: nothing changed the
weights).

The eager tier records autocast's casts as plain ``aten._to_copy`` nodes: see
:mod:`fxinspect.capture.autocast_casts` for how they are held.

Example
-------
>>> import torch
>>> weight = torch.nn.Parameter(torch.ones(4, 4))
>>> with torch.autocast("cpu", dtype=torch.bfloat16):
...     with fresh_autocast_cache():
...         y = torch.mm(torch.ones(2, 4), weight)   # weight's bfloat16 copy: cached
...     y.dtype
torch.bfloat16
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["autocast_on", "empty_autocast_cache", "fresh_autocast_cache"]


def autocast_on() -> bool:
    """Whether any device's autocast is enabled on this thread (where the cache is)."""
    probe = getattr(torch._C, "_is_any_autocast_enabled", None)
    if probe is not None:
        return bool(probe())
    return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()


def empty_autocast_cache() -> None:
    """Empty autocast's cache if autocast is on: the next run casts as a fresh region's
    first does (a timed run that found the weights cast would leave their casts out)."""
    if autocast_on():
        torch.clear_autocast_cache()


@contextlib.contextmanager
def fresh_autocast_cache() -> Iterator[None]:
    """Run the block as in a fresh autocast region: the cache empty at its start and at
    its end. Outside autocast, nothing is done (nothing is cached there)."""
    if not autocast_on():
        yield
        return
    torch.clear_autocast_cache()
    try:
        yield
    finally:
        torch.clear_autocast_cache()
