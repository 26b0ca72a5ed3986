"""``analyze`` and ``instrument``: prepare -> capture -> program -> passes -> Report.

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
import dataclasses
import gc
from collections.abc import Iterable
from typing import Any

import torch

from .capture import capture
from .capture.autocast_cache import fresh_autocast_cache
from .options import CAPTURE_OPTIONS, Options, signature_of
from .parallel.step import rank_counted
from .progress import reporting, task
from .report import Report
from .run.assemble import report_fields
from .run.choose import Counted, count_best
from .run.passes import PassResult
from .run.passes.backward import BackwardPass
from .run.passes.memory import MemoryPass
from .run.passes.timing import TimingPass
from .run.prepare import Prepared, prepared
from .run.program import InstrumentedProgram
from .tensors import has_data
from .timemodel.pricing import TimeModelPricing

__all__ = ["LATER_PASSES", "analyze", "instrument", "no_gc_pauses", "report_of"]

LATER_PASSES = (TimingPass, BackwardPass, MemoryPass)
"""The passes after the counting run, in the order they run; each plans itself from the
options (``planned``) and is skipped when they do not ask for it."""


def analyze(
    model: torch.nn.Module, example_inputs: Any = None, *, kwargs: dict | None = None, **options: Any
) -> Report:
    """Analyse ``model`` on ``example_inputs``: every op and module, one immutable Report.

    Parameters
    ----------
    model : the ``torch.nn.Module`` (``DataParallel``/``torch.compile`` wrappers are
        unwrapped). It is left exactly as it was, also when this raises.
    example_inputs : a tensor, a tuple/list of positional arguments, or a dict of
        keyword arguments; nested tuples/lists/dicts of tensors are fine.
    kwargs : keyword arguments added to positional ``example_inputs``.

    Options (keywords only; :class:`~fxinspect.options.Options` declares and checks them,
    and an unknown name is an error naming the closest one):

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
    memory : model the memory of the run (``report.memory``: every storage it allocates,
        the peak and the tensors alive at it, what autograd saves; with ``backward``
        through the backward too). It is modelled in the counting run itself, which with
        ``backward`` differentiates the loss too: the default analysis runs the forward
        once (and the backward once).
    measure_memory : also measure the same run with the allocator, beside the model
        (CPU: ``torch.profiler``; CUDA: ``torch.cuda`` statistics; none on meta): one
        more run, and on CPU the profiler's cost. Without it the memory is the model's
        estimate (it does not see scratch a kernel allocates and frees inside one op).
    optimizer : a ``torch.optim.Optimizer`` class or instance: its state and step are
        added to the training memory (``report.memory.total_peak``). Needs ``backward``.
    parallel : a :class:`fxinspect.Parallel` (``Parallel.fsdp(world_size)``,
        ``Parallel.tp(world_size, plan)``, or ``Parallel(mesh, apply)`` for the user's own
        wrapping): the report is of one rank's step, run on fake tensors over torch's fake
        process group (see ``fxinspect.parallel``), with every collective it issued in
        ``report.communication``.
    progress : show progress on stderr (phase and fraction: ``analyze · timing 3/10``) when
        it is a terminal and the work runs over 2 s (:mod:`fxinspect.progress`; also
        ``FXINSPECT_PROGRESS=0``/``1``). ``False``: never.
    device_spec : a device to predict each node's latency on (``predicted_latency``, see
        ``fxinspect.timemodel.pricing``): a preset of ``fxinspect.devices``
        (``"h100-sxm"``, or a driver's name as ``torch.cuda.get_device_name()`` gives it),
        a ``DeviceSpec``, or ``"measured"`` (this host, measured once and cached).

    The forward runs in the model's current mode (``train()``/``eval()``) and the
    current grad mode (wrap the call in ``torch.no_grad()`` for inference).
    """
    opts = Options.of("analyze", options)
    doing = "one rank's step" if opts.parallel is not None else ""
    with (
        reporting(opts.progress),
        task("analyze", detail=doing),
        no_gc_pauses(),
        prepared(model, example_inputs, kwargs, device=opts.device) as run,
    ):
        pricing = TimeModelPricing.planned(opts)  # (a device spec resolved, or refused, before any run)
        if opts.parallel is not None:
            counted = rank_counted(run, opts)
        else:
            counted = count_best(run.model, run.args, run.kwargs, opts)
        return report_of(run, counted, opts, pricing)


def report_of(run: Prepared, counted: Counted, opts: Options, pricing: TimeModelPricing | None = None) -> Report:
    """The report of a counted capture: the later passes ``opts`` ask for, then assembly.

    ``analyze`` calls it once; a sweep that reuses one capture across input sizes calls
    it per point (:mod:`fxinspect.planning.shared`).
    """
    program = counted.program
    results: list[PassResult] = [counted.result]
    for kind in LATER_PASSES:  # each runs the forward again
        planned = kind.planned(opts, program, counted.result)
        if planned is not None:
            with _kept(program, counted.result.written_inputs), fresh_autocast_cache():
                results.append(planned.run(program))
    if pricing is not None:  # (runs nothing: prices what the passes counted)
        results.append(pricing.priced(results))
    fields = report_fields(
        run.model,
        program,
        results,
        run.virtual,
        notes=run.notes,
        chosen_notes=counted.notes,
        failures=counted.failures,
    )
    return Report(**fields)


@contextlib.contextmanager
def no_gc_pauses():
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
    model: torch.nn.Module, example_inputs: Any = None, *, kwargs: dict | None = None, **options: Any
) -> InstrumentedProgram:
    """Capture ``model`` on ``example_inputs`` as an :class:`InstrumentedProgram`.

    ``print()`` it to see the probe points between the ops; call it like the model to
    run the captured program, or run passes over it (``fxinspect.run.passes``). The
    program calls the model's own modules and parameters; capturing leaves the model
    as it was. Inputs, ``method`` and ``leaf_modules`` as for :func:`analyze`.

    >>> import torch, fxinspect
    >>> program = fxinspect.instrument(torch.nn.Linear(4, 2), torch.randn(3, 4))
    >>> program.probe_points, str(program.method)
    (('linear',), 'symbolic')
    """
    opts = Options.of("instrument", options, CAPTURE_OPTIONS)
    with prepared(model, example_inputs, kwargs, virtual_copy=False, caller="instrument") as run:
        cap = capture(run.model, run.args, run.kwargs, method=opts.method, leaf_modules=opts.leaf_modules)
    return InstrumentedProgram(dataclasses.replace(cap, notes=run.notes + cap.notes))


analyze.__signature__ = signature_of(analyze)  # help() lists every option with its default
instrument.__signature__ = signature_of(instrument, CAPTURE_OPTIONS)
