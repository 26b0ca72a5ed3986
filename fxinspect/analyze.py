"""``analyze`` and ``instrument``: capture -> instrumented program -> passes -> Report.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
>>> report = fxinspect.analyze(model, torch.randn(4, 16), timing=False)
>>> report.totals.params, report.totals.macs      # 16*8+8 + 8*2+2 ; 4*16*8 + 4*8*2
(154, 576)
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .capture import capture, normalize, unwrap
from .errors import InputError
from .report import Report
from .run.assemble import report_fields
from .run.choose import count_best
from .run.guard import preserved
from .run.lazy import materialized
from .run.passes.backward import BackwardPass, default_loss
from .run.passes.memory import MemoryPass
from .run.passes.timing import TimingPass
from .run.program import InstrumentedProgram
from .run.virtual import virtual
from .tensors import has_data

__all__ = ["analyze", "instrument"]


def analyze(
    model: torch.nn.Module,
    example_inputs: Any = None,
    *,
    kwargs: dict | None = None,
    method: str = "auto",
    leaf_modules: Iterable[Any] = (),
    timing: bool = True,
    warmup: int = 2,
    repeats: int = 10,
    check_finite: bool = True,
    device: str | torch.device | None = None,
    backward: bool = False,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    memory: bool = True,
    optimizer: Any = None,
) -> Report:
    """Analyse ``model`` on ``example_inputs``: every op and module, one immutable Report.

    Parameters
    ----------
    model : the ``torch.nn.Module`` (``DataParallel``/``torch.compile`` wrappers are
        unwrapped). It is left exactly as it was, also when this raises.
    example_inputs : a tensor, a tuple/list of positional arguments, or a dict of
        keyword arguments; nested tuples/lists/dicts of tensors are fine.
    kwargs : keyword arguments added to positional ``example_inputs``.
    method : ``"auto"`` or a capture tier's name (see ``fxinspect.capture.TIERS``).
        ``"auto"`` keeps the first tier that captures, unless its count leaves ops
        uncounted and a later tier's count does not (``report.capture.notes`` says so).
    leaf_modules : module classes, instances or dotted paths captured as one node.
    timing : run warm-up and timing passes for per-node latency (``False`` skips them).
    warmup, repeats : timing passes; latencies are medians over ``repeats``.
    check_finite : read output values for NaN/Inf and statistics.
    device : ``"meta"`` analyses without allocating the model's weights (a copy with fake
        tensors is run; shapes, parameters, FLOPs, MACs and bytes are exact). A model
        whose tensors are on the ``meta`` device, or meta/fake example inputs, do the
        same without asking. Timing, NaN/Inf checks and value statistics need real
        data: they are ``None`` then, never zero. ``None`` runs where the model is.
    backward : also run one backward of ``loss_fn(output)`` (default: the sum of every
        floating output that requires grad): per node its backward FLOPs, MACs and bytes,
        priced by the same rules, and the shapes of the gradients reaching its outputs;
        with ``timing``, each node's backward latency (medians over ``repeats``).
        The model's ``.grad`` are left as they were.
    loss_fn : with ``backward``, ``loss_fn(output) -> scalar tensor`` on the model's output.
    memory : run once more under the memory model (``report.memory``: every storage the
        run allocates, the peak and the tensors alive at it, what autograd saves; with
        ``backward`` through the backward too), beside the allocator's measurement of the
        same run (CPU: ``torch.profiler``; CUDA: ``torch.cuda`` statistics; none on meta).
    optimizer : a ``torch.optim.Optimizer`` class or instance: its state and step are
        added to the training memory (``report.memory.total_peak``). Needs ``backward``.

    The forward runs in the model's current mode (``train()``/``eval()``) and the
    current grad mode (wrap the call in ``torch.no_grad()`` for inference).
    """
    if repeats < 1 or warmup < 0:
        raise InputError(f"repeats must be >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    if optimizer is not None and not (backward and memory):
        raise InputError(
            f"optimizer= adds to the training memory: it needs backward=True and memory=True, "
            f"got backward={backward}, memory={memory}"
        )
    passes = []
    timing_loss = (loss_fn or default_loss) if backward else None
    if backward:
        passes.append(BackwardPass(loss_fn))
    if memory:
        passes.append(MemoryPass(backward=backward, loss_fn=loss_fn, optimizer=optimizer))
    with _no_gc_pauses():
        return _analyze(
            model,
            example_inputs,
            kwargs,
            method,
            leaf_modules,
            timing,
            warmup,
            repeats,
            check_finite,
            device,
            passes,
            timing_loss,
        )


@contextlib.contextmanager
def _no_gc_pauses():
    """Hold the cyclic garbage collector for the duration of the call.

    Tracing and assembling a large graph allocate hundreds of thousands of small
    objects; every collection that triggers then walks all of them (and the model), and
    such pauses were most of the cost on a graph of 2,000 tiny ops. Nothing here makes
    cycles that need collecting mid-call; the collector's previous state is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _analyze(
    model,
    example_inputs,
    kwargs,
    method,
    leaf_modules,
    timing,
    warmup,
    repeats,
    check_finite,
    device,
    passes,
    timing_loss,
) -> Report:
    model, notes = unwrap(model)
    args, kw = normalize(example_inputs, kwargs)
    model, lazy_notes = materialized(model, args, kw)  # a copy when lazy: the user's model is not run
    notes += lazy_notes
    # virtual(): fake copies of the model and inputs when the run is virtual (device="meta" or
    # meta/fake tensors); run.model is the copy then, and preserved() guards the user's model
    with preserved(model), virtual(model, args, kw, device) as run:
        program, counted = count_best(run.model, run.args, run.kwargs, method, leaf_modules, check_finite)
        program.capture.notes[:0] = notes + run.notes
        results = [counted]
        if timing and not run.virtual and all(has_data(t) for t in program.inputs):
            # the counting run wrote these inputs as calling the model would; the timing
            # runs must not write them again (each gets copies of them as they are now)
            written = counted.extras.get("written_inputs", ())
            results.append(TimingPass(warmup, repeats, copy_inputs=written, loss_fn=timing_loss).run(program))
        for p in passes:  # backward and memory: each runs the forward again
            with _kept(program, counted.extras.get("written_inputs", ())):
                results.append(p.run(program))
    return Report(**report_fields(run.model, program, results, virtual=run.virtual))


@contextlib.contextmanager
def _kept(program: InstrumentedProgram, written: Iterable[str]):
    """Put back the inputs the forward writes in place as they were before a later pass
    ran it again: the caller's inputs are written once, as calling the model would."""
    tensors = dict(zip(program.capture.inputs.names, program.inputs))
    kept = [(tensors[n], tensors[n].clone()) for n in written if has_data(tensors[n])]
    try:
        yield
    finally:
        with torch.no_grad():
            for t, value in kept:
                t.copy_(value)


def instrument(
    model: torch.nn.Module,
    example_inputs: Any = None,
    *,
    kwargs: dict | None = None,
    method: str = "auto",
    leaf_modules: Iterable[Any] = (),
) -> InstrumentedProgram:
    """Capture ``model`` on ``example_inputs`` as an :class:`InstrumentedProgram`.

    ``print()`` it to see the probe points between the ops; call it like the model to
    run the captured program, or run passes over it (``fxinspect.run.passes``). The
    program calls the model's own modules and parameters; capturing leaves the model
    as it was. Arguments as for :func:`analyze`.

    >>> import torch, fxinspect
    >>> program = fxinspect.instrument(torch.nn.Linear(4, 2), torch.randn(3, 4))
    >>> program.probe_points, str(program.method)
    (('linear',), 'symbolic')
    """
    model, notes = unwrap(model)
    args, kw = normalize(example_inputs, kwargs)
    model, lazy_notes = materialized(model, args, kw)
    with preserved(model):
        cap = capture(model, args, kw, method=method, leaf_modules=leaf_modules)
    cap.notes[:0] = notes + lazy_notes
    return InstrumentedProgram(cap)
