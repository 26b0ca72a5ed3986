"""The counting run with the memory model (and the backward) in it: one run, not three.

By default ``analyze`` models memory, and with ``backward=True`` it differentiates the
loss. Each of those once needed a run of its own: the counting pass (forward), the
backward pass (forward and backward, counted) and the memory pass (forward and
backward, modelled). When nothing is measured beside the model (``measure_memory``),
one run does all three: the counting modes price every aten op and hand it to the
storage tracker in the same dispatch (:meth:`~fxinspect.run.storages.StorageTracker.observe`),
and the probes of each pass sit side by side at every node. Values read for statistics
are copied at once, so no storage lives longer than in a plain run and the timeline is
the memory pass's own (the tests compare the two, figure by figure).

:func:`counted_run` is that run; :func:`rides_along` says when ``analyze`` takes it.

Example
-------
>>> import torch, fxinspect
>>> from fxinspect.options import Options
>>> model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
>>> program = fxinspect.instrument(model, torch.randn(2, 8))
>>> result = counted_run(program, Options.of("analyze", {"backward": True}), model)
>>> node = result.nodes["_0"]
>>> node["macs"], node["backward_macs"], node["output_bytes"]    # 2*8*4; weight grad 2*8*4; 2*4*4 B
(64, 64, 32)
"""

from __future__ import annotations

from typing import Any

import torch

from ...options import Options
from ...tensors import has_data
from ..dispatch import CountingMode
from ..program import InstrumentedProgram, Probe
from ..values import ValueReader
from . import PassResult
from .backward import BackwardMode, Gradients, NonFiniteTurns, backward_result, default_loss, fresh_grads
from .count import ForwardRecorder
from .memory import ModelledRun

__all__ = ["counted_run", "rides_along"]


def rides_along(options: Options) -> bool:
    """Whether the counting run can model the memory (and run the backward) too: the
    memory is asked for and nothing is measured beside it (``measure_memory`` needs a
    run with nothing but the allocator's watch)."""
    return options.memory and not options.measure_memory


def counted_run(program: InstrumentedProgram, options: Options, model: torch.nn.Module | None) -> PassResult:
    """The counting pass's result with the memory pass's figures (and, with
    ``options.backward``, the backward pass's), from one run of ``program``."""
    params = program.parameters()
    run = ModelledRun(program, params, list(program.inputs), measure=False)
    recorder = ForwardRecorder(program, options.check_finite, CountingMode(observe=run.tracker.observe), hold=False)
    counting, modelled = recorder.probe, run.probe(owned=options.backward)
    gradients = None
    if options.backward:  # the gradients' statistics are read (and copied at once) with real data
        gradients = Gradients(ValueReader(hold=False) if all(has_data(t) for t in program.inputs) else None)

    def before(name: str) -> None:
        modelled.before(name)
        counting.before(name)

    def after(name: str, out: Any) -> None:
        counting.after(name, out)
        modelled.after(name, out)
        if gradients is not None:
            gradients.watch(name, out)

    backward: list[Any] = []  # the backward's counting mode and root-cause finder, once made

    def backward_mode(loss: torch.Tensor) -> BackwardMode:
        reader = gradients.reader
        turns = NonFiniteTurns(run.owners, loss) if reader is not None else None
        mode = BackwardMode(run.owners, before_write=reader.flush if reader else None)
        mode.observe = run.tracker.observe
        backward.extend((mode, turns))
        return mode

    trainable = [p for p in params if p.requires_grad]
    loss_fn = (options.loss_fn or default_loss) if options.backward else None
    with fresh_grads(trainable):  # a step after zero_grad(): the backward allocates every .grad
        output, grads, param_grads = run.step(loss_fn, trainable, Probe(before, after), recorder.mode, backward_mode)
        del output
    result = recorder.result(model)
    for name, figures in run.node_figures().items():
        result.nodes.setdefault(name, {}).update(figures)
    result.report["memory"] = run.record(grads, param_grads, options.optimizer if options.backward else None, trainable)
    if backward:
        mode, turns = backward
        stats = gradients.reader.finish() if gradients.reader else []
        done = backward_result(program, mode.costs, gradients, stats, turns.first() if turns else None)
        for name, figures in done.nodes.items():
            result.nodes.setdefault(name, {}).update(figures)
        result.report.update(done.report)
    return result
