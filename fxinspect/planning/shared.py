"""One capture for every batch size of a sweep: the model prepared and captured once.

An export capture is specialised to the shapes it saw, unless told which dimensions
follow the batch: then ``torch.export`` keeps the batch a symbol and checks that the
model computes the same way at every batch from 2 (it assumes, without checking, that
the batch is not 1). A symbolic capture runs at any size already. :func:`shared_capture`
prepares the model once (on meta, one fake copy), finds the dimensions that follow the
batch by building the inputs at two sizes (each such dimension equal to the batch at
both), captures once at the largest batch and analyses every other point on that
program with its own inputs. A point it cannot serve is captured on its own, in the
same prepared run, and :attr:`Shared.notes` says which and why: batch 1 under export,
every point of a capture that came out specialised (the eager tier, a model that fixes
its batch), inputs whose structure changes with the batch.

>>> import torch
>>> model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
>>> with shared_capture(model, lambda b: torch.randn(b, 8), None, Options(timing=False), [1, 2, 4]) as shared:
...     points = [shared.analysed(b)[1] for b in (4, 2, 1)]
>>> [p.macs for p in points], shared.notes                # 8*4 MACs a sample
([128, 64, 32], ['one symbolic capture served batches 1, 2, 4'])
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import torch
from torch.utils import _pytree as pytree

from ..analyze import no_gc_pauses, report_of
from ..capture import Capture, Method, flat_inputs, normalize
from ..options import Options
from ..report import Report
from ..run.choose import Counted, count_best, count_with
from ..run.prepare import prepared
from ..timemodel.pricing import TimeModelPricing
from .points import StepPoint, analysed_point, point_of

__all__ = ["EachOnItsOwn", "Forks", "Shared", "batch_dims", "shared_capture"]


def batch_dims(small: Any, large: Any, b_small: int, b_large: int) -> tuple[tuple[int, ...], ...] | None:
    """Per tensor input, the dimensions that follow the batch, found from the inputs at two
    batch sizes; ``None`` when the structure differs, a non-tensor input changes, or a size
    that changes is not the batch itself."""
    leaves_s, spec_s = pytree.tree_flatten(small)
    leaves_l, spec_l = pytree.tree_flatten(large)
    if spec_s != spec_l:
        return None
    dims = []
    for s, big in zip(leaves_s, leaves_l):
        if not isinstance(s, torch.Tensor):
            if isinstance(big, torch.Tensor) or s != big:
                return None
            continue
        if not isinstance(big, torch.Tensor) or s.dim() != big.dim():
            return None
        changed = tuple(d for d in range(s.dim()) if s.shape[d] != big.shape[d])
        if any((s.shape[d], big.shape[d]) != (b_small, b_large) for d in changed):
            return None
        dims.append(changed)
    return tuple(dims) if any(dims) else None


class Forks(Protocol):
    """What :func:`shared_capture` tells as it goes, to fork workers (:class:`~.ahead.Ahead`)."""

    def prepared(self, run: Any, opts: Options, convert: Callable, first: int, seq: int | None, asked: bool) -> None:
        """The model is prepared; ``asked``: whether the capture is asked to keep the batch a symbol."""

    def captured(self, provisional: Shared) -> None:
        """The capture is made, not yet counted (``provisional.counted`` is ``None``)."""

    def counted(self, shared: Shared) -> None:
        """The capture kept is counted at the largest batch."""


class Shared:
    """Analyses points of one prepared model, on one capture where it serves."""

    def __init__(
        self,
        run: Any,
        opts: Options,
        make: Callable[[int], tuple[tuple, dict]],
        first: int,
        capture: Capture,
        counted: Counted | None,
        seq: int | None,
        asked: bool,
    ) -> None:
        """``make(batch)``: the ``(args, kwargs)`` of a point, as ``run`` takes them;
        ``counted``: ``capture`` counted at ``first`` (``None`` in a worker forked before
        that count, which the counts it makes equal when that capture is kept);
        ``asked``: whether the capture was asked to serve every batch."""
        self.run, self.opts, self.make, self.first, self.seq = run, opts, make, first, seq
        self.capture, self.counted, self.asked = capture, counted, asked
        self.pricing = TimeModelPricing.planned(opts)
        self.general = capture.method != Method.EAGER and capture.inputs.batch_dims is not None
        self.served: list[int] = []
        self.own: dict[int, str] = {}  # batch -> why it was captured on its own

    def analysed(self, batch: int) -> tuple[Report, StepPoint]:
        """The report and point of ``batch``."""
        report, point, why = self.computed(batch)
        self.record(batch, why)
        return report, point

    def computed(self, batch: int) -> tuple[Report, StepPoint, str | None]:
        """The report and point of ``batch``, and why it was captured on its own
        (``None``: the capture served it), not yet recorded in the notes."""
        with no_gc_pauses():  # (as analyze: the collector runs between points, not inside one)
            counted, why = self._counted(batch)
            report = report_of(self.run, counted, self.opts, self.pricing)
        return report, point_of(report, batch, self.seq), why

    def record(self, batch: int, why: str | None) -> None:
        """Note that ``batch`` was served by the capture (``why is None``) or captured on its own."""
        if why is None:
            self.served.append(batch)
        else:
            self.own[batch] = why

    def _counted(self, batch: int) -> tuple[Counted, str | None]:
        if batch == self.first and self.counted is not None:
            return self.counted, None
        args, kwargs, capture, why = self.route(batch)
        if capture is None:
            return count_best(self.run.model, args, kwargs, self.opts), why
        counted = count_with(capture, self.run.model, self.opts)
        if self.counted is None:  # (the first capture is kept only if its count chose no other)
            return counted, None
        return dataclasses.replace(counted, notes=self.counted.notes, failures=self.counted.failures), None

    def route(self, batch: int) -> tuple[tuple, dict, Capture | None, str | None]:
        """``batch``'s inputs, and the capture that serves them, or ``None`` and why not."""
        args, kwargs = self.make(batch)
        why = self._why_own(batch)
        if why is None:
            cap = self.capture
            inputs, _ = flat_inputs(self.run.model, args, kwargs)
            if inputs.names == cap.inputs.names:
                serving = dataclasses.replace(cap, inputs=dataclasses.replace(inputs, batch_dims=cap.inputs.batch_dims))
                return args, kwargs, serving, None
            why = "its inputs are named differently"
        return args, kwargs, None, why

    def _why_own(self, batch: int) -> str | None:
        if not self.general:
            cap = self.capture
            if cap.method == Method.EAGER:
                return "the eager tier's capture is one executed path"
            if self.asked:  # export could not keep the batch a symbol (its note says why)
                return "the capture fixes the batch"
            return "the inputs' sizes do not follow the batch alone"
        lowest = self.capture.inputs.batch_min
        return f"the capture serves batches from {lowest}" if batch < lowest else None

    @property
    def notes(self) -> list[str]:
        """Which points the capture served, and which were captured on their own, why."""
        method = self.capture.method
        served = sorted(set(self.served))
        where = f" (sequence length {self.seq})" if self.seq is not None else ""
        said = [
            f"one {method} capture{where} served {'batches' if len(served) > 1 else 'batch'} {', '.join(map(str, served))}"
        ]
        for why in dict.fromkeys(self.own[b] for b in sorted(self.own)):  # (in batch order, however computed)
            batches = sorted(b for b, w in self.own.items() if w == why)
            said.append(
                f"{'batches' if len(batches) > 1 else 'batch'} {', '.join(map(str, batches))} captured on its own ({why})"
            )
        return ["; ".join(said)]


class EachOnItsOwn:
    """Analyses every point with its own ``analyze`` call (a parallel step has no capture
    to share: :mod:`fxinspect.parallel.step` runs the model itself, three times a point)."""

    def __init__(
        self,
        model: torch.nn.Module,
        make_inputs: Callable[..., Any],
        seq: int | None,
        opts: Options,
        kwargs: dict | None,
    ) -> None:
        self.model, self.make_inputs, self.seq, self.opts, self.kwargs = model, make_inputs, seq, opts, kwargs
        self.served: list[int] = []

    def analysed(self, batch: int) -> tuple[Report, StepPoint]:
        """The report and point of ``batch``."""
        self.served.append(batch)
        return analysed_point(self.model, self.make_inputs, batch, self.seq, self.opts, self.kwargs)

    @property
    def notes(self) -> list[str]:
        batches = ", ".join(map(str, sorted(set(self.served))))
        return [f"batches {batches} each analysed on its own: a parallel step is run, not captured"]


@contextlib.contextmanager
def shared_capture(
    model: torch.nn.Module,
    make_inputs: Callable[..., Any],
    seq: int | None,
    opts: Options,
    batches: list[int],
    forks: Forks | None = None,
    kwargs: dict | None = None,
) -> Iterator[Shared | EachOnItsOwn]:
    """Prepare ``model`` once and capture it once, at the largest of ``batches``, for
    every batch size it can serve (see the module). ``forks`` is told when the model is
    prepared, captured and counted (:class:`Forks`), to fork its workers; ``kwargs`` are
    keywords beside positional inputs, as ``analyze`` takes them."""
    extra = kwargs
    if opts.parallel is not None:  # a parallel step runs the model itself: nothing to share
        yield EachOnItsOwn(model, make_inputs, seq, opts, kwargs)
        return
    where = torch.device("meta") if str(opts.device) == "meta" else contextlib.nullcontext()

    def make(batch: int) -> Any:
        with where:
            return make_inputs(batch) if seq is None else make_inputs(batch, seq)

    sizes = sorted(set(batches))
    first = sizes[-1]
    example = make(first)
    dims = None
    if len(sizes) >= 2:
        dims = batch_dims(normalize(make(sizes[-2]), extra), normalize(example, extra), sizes[-2], first)
    with prepared(model, example, extra, device=opts.device) as run:
        convert = lambda batch: run.converted(make(batch), extra)  # noqa: E731
        asked = dims is not None
        if forks is not None:
            forks.prepared(run, opts, convert, first, seq, asked)

        def captured(capture: Capture) -> None:
            forks.captured(Shared(run, opts, convert, first, capture, None, seq, asked))

        with no_gc_pauses():
            counted = count_best(
                run.model, run.args, run.kwargs, opts, batch_dims=dims, captured=captured if forks else None
            )
        shared = Shared(run, opts, convert, first, counted.program.capture, counted, seq, asked)
        if forks is not None:
            forks.counted(shared)
        yield shared
