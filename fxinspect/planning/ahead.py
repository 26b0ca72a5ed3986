"""A sweep's points analysed ahead, in forked workers, while the sweep asks for them in turn.

:func:`~fxinspect.planning.sweep.sweep` decides which points to analyse as it goes (the
line's two ends, a third to check it, then only what the line cannot give), but it knows
from the start which it will most likely ask for. :class:`Ahead` forks a worker
(:mod:`.workers`) for each, at the two moments a fork is possible (before this process
runs its first backward):

* when the model is prepared: a point the capture will not serve, batch 1 beside an
  export that keeps the batch a symbol from 2, is captured on its own in a worker, while
  this process makes the shared capture;
* when the shared capture is made, before it is counted: the other expected points, on
  that capture, each in a worker, while this process counts the largest batch.

When the sweep asks for a point, a worker's result is taken if it is what this process
would have computed: a point captured on its own, if the capture does not serve it; a
point on the shared capture, if the count kept that capture (``method="auto"`` may move
on to another tier). Otherwise, and for a point no worker took, it is analysed here. The
figures and notes are those of one process asking in order: a point analysed ahead and
never asked for is not reported, and its worker is killed when the sweep ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..analyze import no_gc_pauses, report_of
from ..options import Options
from ..run.choose import count_best
from ..timemodel.pricing import TimeModelPricing
from .derived import Analysed
from .points import point_of
from .shared import Shared
from .workers import Job, Workers

__all__ = ["Ahead"]


def _own_step(run: Any, opts: Options, args: tuple, kwargs: dict, batch: int, seq: int | None) -> Analysed:
    """(in a worker) The step at ``batch`` captured on its own, as :meth:`Shared.computed` does."""
    with no_gc_pauses():
        report = report_of(run, count_best(run.model, args, kwargs, opts), opts, TimeModelPricing.planned(opts))
    return Analysed.of(report, point_of(report, batch, seq))


def _shared_step(shared: Shared, batch: int) -> Analysed:
    """(in a worker) The step at ``batch`` on the capture not yet counted."""
    report, point, _ = shared.computed(batch)
    return Analysed.of(report, point)


class Ahead:
    """The steps of one sweep's points, from workers where they were forked ahead.

    ``expected``: the batches the sweep will likely ask for, in that order; ``workers``:
    at most this many are analysed ahead on the shared capture.
    """

    def __init__(self, pool: Workers | None, workers: int, expected: list[int]) -> None:
        self.pool, self.workers, self.expected = pool, workers, expected
        self.shared: Shared | None = None
        self._jobs: dict[int, tuple[Job, bool]] = {}  # batch -> (worker, whether captured on its own)
        self._on: Any = None  # the capture the workers of shared points were forked on

    def prepared(self, run: Any, opts: Options, convert: Callable, first: int, seq: int | None, asked: bool) -> None:
        """The model is prepared: capture batch 1 on its own beside an export of the batch."""
        if self.pool is not None and asked and 1 in self.expected and first != 1:
            self._fork(1, True, _own_step, run, opts, *convert(1), 1, seq)

    def captured(self, provisional: Shared) -> None:
        """The shared capture is made, not yet counted: fork the expected points on it."""
        if self.pool is None:
            return
        self._on = provisional.capture
        for batch, (job, _) in list(self._jobs.items()):
            if provisional.route(batch)[3] is None:  # the capture serves it after all (a symbolic one)
                job.kill()
                del self._jobs[batch]
        left = [b for b in self.expected if b != provisional.first and b not in self._jobs]
        for batch in left[: self.workers]:
            self._fork(batch, False, _shared_step, provisional, batch)

    def _fork(self, batch: int, own: bool, call: Callable, *args: Any) -> None:
        job = self.pool.start(call, *args)
        if job is not None:
            self._jobs[batch] = (job, own)

    def counted(self, shared: Shared) -> None:
        """The capture is counted: workers forked on a capture it did not keep are stopped."""
        self.shared = shared
        for batch, (job, own) in list(self._jobs.items()):
            if not own and shared.capture is not self._on:
                job.kill()
                del self._jobs[batch]

    def step(self, batch: int) -> Analysed:
        """The analysed step at ``batch``, recorded in the capture's notes."""
        shared = self.shared
        job, own = self._jobs.pop(batch, (None, False))
        if job is not None:
            why = shared.route(batch)[3]  # (None: the capture serves it)
            found = job.result() if not own or why is not None else job.kill()
            if found is not None:  # (None: the worker raised or died; it is analysed here)
                shared.record(batch, why)
                return found
        return Analysed.of(*shared.analysed(batch))
