"""The context axis of a decode step, cut at its sliding windows into ranges of one graph each.

A decode step's costs are exact polynomials in batch and context while its graph stays the
same. A sliding window changes that: once the context reaches the window, a windowed layer
stops growing, and transformers' attention takes another path (Mistral's step gains 29 ops
at ``window - 1`` cached tokens, its peak jumps), so no one polynomial holds across it.
:class:`Segments` fits each range between windows on its own (from steps analysed inside
it, checked on spare ones, at most ``calls`` a range) and leaves the few contexts next to a
window (``window - 2 .. window + 1``, where implementations differ by a token on where the
cut falls) to analyses of their own. A range is fitted when a context in it is first
asked for.

>>> s = Segments((8,), fit=lambda lo, hi: (lo, hi))
>>> s.range_of(3), s.range_of(7), s.range_of(10), s.curves(100)
((1, 5), None, (10, None), (10, None))
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InputError
from ..planning.workers import Workers, can_fork, worker_count
from .curves import basis, fit
from .design import design

__all__ = ["Segments", "contexts_in", "fit_range", "side_by_side"]

_MARGIN = (2, 1)  # contexts analysed one by one around a window: window - 2 .. window + 1


def contexts_in(lo: int, hi: int | None) -> list[int]:
    """A few contexts spread over ``lo..hi`` (``hi`` ``None``: no end), for a fit there."""
    steps = (0, 3, 8, 17, 31) if hi is None else sorted({0, (hi - lo) // 3, (2 * (hi - lo)) // 3, hi - lo})
    return [lo + s for s in steps if hi is None or lo + s <= hi]


class Segments:
    """Per range of contexts between ``windows``, the curves ``fit(lo, hi)`` makes (``hi``
    ``None``: no end); ``None`` for a context next to a window (see the module)."""

    def __init__(self, windows: tuple[int, ...], fit: Callable[[int, int | None], Any]) -> None:
        self._fit = fit
        self.ranges: list[tuple[int, int | None]] = []
        lo = 1
        for w in sorted(set(windows)):
            below, above = w - _MARGIN[0], w + _MARGIN[1]
            if below - 1 >= lo:
                self.ranges.append((lo, below - 1))
            lo = above + 1
        self.ranges.append((lo, None))
        self._fitted: dict[tuple[int, int | None], Any] = {}

    def range_of(self, context: int) -> tuple[int, int | None] | None:
        """The range holding ``context``, or ``None`` next to a window."""
        for lo, hi in self.ranges:
            if lo <= context and (hi is None or context <= hi):
                return lo, hi
        return None

    def curves(self, context: int) -> Any:
        """The fitted curves of ``context``'s range (``None`` next to a window)."""
        where = self.range_of(context)
        if where is None:
            return None
        if where not in self._fitted:
            self._fitted[where] = self._fit(*where)
        return self._fitted[where]


def side_by_side(figures: Callable[[int, int], Any], points: Sequence[tuple[int, int]], device: Any) -> dict:
    """``figures(b, c)`` at every point; on the meta device they are shared out between this
    process and forked workers (:mod:`fxinspect.planning.workers`: a step of a 70B model is
    seconds of Python on one core), a worker's point computed here if the worker fails."""
    if len(points) < 2 or not can_fork(device):
        return {p: figures(*p) for p in points}
    width = max(1, worker_count(None) - 1)
    mine, *theirs = [list(points[i :: width + 1]) for i in range(width + 1)]
    with Workers() as pool:
        jobs = [(share, pool.start(_each, figures, share)) for share in theirs if share]
        found = {p: figures(*p) for p in mine}
        for share, job in jobs:
            values = job.result() if job is not None else None
            for p, value in zip(share, values or [None] * len(share)):
                found[p] = value if value is not None else figures(*p)
    return {p: found[p] for p in points}


def _each(figures: Callable[[int, int], Any], points: list[tuple[int, int]]) -> list[Any]:
    return [figures(*p) for p in points]


def fit_range(gen: Any, lo: int, hi: int | None) -> dict[str, Any] | None:
    """The curves of generation ``gen``'s decode steps over the contexts ``lo..hi``, fitted
    from steps analysed side by side (``None``: a range too short to tell the terms apart,
    whose steps are analysed one by one)."""
    # 1, c, b, b·c: a step's costs per sequence and per cached token of each; c alone: a
    # kernel's scratch that grows with the context whatever the batch (CPU attention's)
    terms = basis(1, 1)
    try:
        points = design(terms, gen._batches, contexts_in(lo, hi), calls=6)  # (two spare steps check them)
    except InputError:
        return None
    _ = gen._shallow  # (made here, not in each worker)
    found = side_by_side(functools.partial(_step_figures, gen), points, gen.device)
    return fit(lambda b, c: found[(b, c)], terms, points=points)


def _step_figures(gen: Any, batch: int, context: int) -> dict[str, Any]:
    """What the curves are fitted to, of the step at ``(batch, context)``."""
    return gen._summary(batch, context)["figures"]
