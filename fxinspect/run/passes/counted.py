"""``analyze``'s counting run: count, receptive field, gradients and memory in one run.

By default ``analyze`` models memory, and with ``backward=True`` it differentiates the
loss. Each of those once needed a run of its own; when nothing is measured beside the
model (``measure_memory``), one run does all: the counting modes price every aten op
and hand it to the storage tracker in the same dispatch, and the recorders' probes sit
side by side at every node (:func:`~.one_run.run_once`). Values read for statistics are
copied at once, so no storage lives longer than in a plain run and the timeline is the
memory pass's own (the tests compare the two, figure by figure).

:func:`analysis_recorders` are that run's recorders (the parallel step adds the
collectives'); :func:`rides_along` says when ``analyze`` takes it.

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

import torch

from ...options import Options
from ...records.registry import RECORDERS
from ...tensors import has_data
from ..program import InstrumentedProgram
from ..recorders import Recorder, loss_for, unseen
from ..values import ValueReader
from . import PassResult
from .backward import BackwardRecorder
from .count import counting
from .memory import MemoryRecorder
from .one_run import run_once

__all__ = ["analysis_recorders", "counted_run", "rides_along"]


def rides_along(options: Options) -> bool:
    """Whether the counting run can model the memory (and run the backward) too: the
    memory is asked for and nothing is measured beside it (``measure_memory`` needs a
    run with nothing but the allocator's watch)."""
    return options.memory and not options.measure_memory


def analysis_recorders(program: InstrumentedProgram, options: Options, model: torch.nn.Module | None) -> list[Recorder]:
    """The counting run's recorders: the count (and receptive field), with ``backward``
    the gradients, and the memory model, in that order (the count leads the forward's
    dispatch, the gradients' the backward's)."""
    recorders = counting(program, options.check_finite, model, hold=False)
    if options.backward:  # the gradients' statistics are read (and copied at once) with real data
        real = all(has_data(t) for t in program.inputs)
        recorders.append(BackwardRecorder(program, ValueReader(hold=False) if real else None))
    recorders.append(MemoryRecorder(program, optimizer=options.optimizer if options.backward else None))
    recorders += [unseen(make(program, options)) for make in RECORDERS.values()]  # (register_figure(recorder=))
    return recorders


def counted_run(
    program: InstrumentedProgram, options: Options, model: torch.nn.Module | None, *more: Recorder
) -> PassResult:
    """The counting pass's result with the memory's figures (and, with ``options.backward``,
    the backward's), from one run of ``program``; ``more`` recorders ride along too."""
    return run_once(
        program, [*analysis_recorders(program, options, model), *more], loss_for(options.backward, options.loss_fn)
    )
