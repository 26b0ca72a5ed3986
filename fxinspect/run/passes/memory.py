"""The memory pass: one clean run (and backward) under the storage model and the allocator.

The program runs once with nothing but the :class:`~fxinspect.run.memory.storages.StorageTracker`
(and, with real data, the :class:`~fxinspect.run.memory.allocator.AllocatorWatch`): no value
reads, no counting, so the tensors alive are exactly those of a plain run. With
gradients on, ``saved_tensors_hooks`` mark what autograd keeps for the backward (each
storage once, however many autograd nodes save it). With ``backward=True`` the loss is
differentiated too, every parameter's ``.grad`` starting from ``None`` (a step after
``zero_grad()``); the backward's allocations are charged to the fx node whose backward
made them. ``optimizer=`` adds the optimizer's state and step
(:func:`~fxinspect.run.memory.optimizer.optimizer_footprint`).

Per node: ``output_bytes`` (new storages among its outputs), ``saved_bytes`` (storages
it allocated that autograd saved), ``saves`` (what autograd saved while it ran) and
``measured_growth``; the run as a whole is a
:class:`~fxinspect.records.MemoryRecord` (``report.memory``).

The model is a recorder (:class:`MemoryRecorder`, see :mod:`fxinspect.run.recorders`):
with nothing measured beside it, the memory needs no run of its own: the counting run
models it (:mod:`.counted`: the tracker follows the aten calls the counting modes price,
in the same dispatch), and ``analyze`` does so by default. The record it makes is
:mod:`.memory_record`'s.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU())
>>> program = fxinspect.instrument(model, torch.randn(64, 256))
>>> result = MemoryPass(backward=True).run(program)
>>> result.nodes["_0"]["output_bytes"], result.nodes["_1"]["saved_bytes"]   # 64*256*4 each
(65536, 65536)
>>> memory = result.report["memory"]
>>> memory.gradients, sum(t.nbytes for t in memory.alive_at_peak) == memory.peak   # (256*256+256)*4
(263168, True)
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...capture.states import held_tensors, rewound
from ...options import Options
from ...records.memory import Phase, Saves
from ...tensors import has_data, tensors_in
from ..lazy_dynamo import import_dynamo, may_reach_dynamo
from ..memory.allocator import AllocatorWatch
from ..memory.donated import Donated
from ..memory.lifetimes import CallInputs
from ..memory.model_call import measure_model_call
from ..memory.scratch import Scratch
from ..memory.storages import StorageTracker
from ..program import InstrumentedProgram
from ..recorders import Recorder, fresh_grads, loss_for
from . import PassResult
from .memory_record import memory_record, unique_bytes
from .one_run import OneRun, run_once

__all__ = ["MemoryPass", "MemoryRecorder"]


class MemoryPass:
    """Storage lifetimes of one run, its peak and what was alive then; measured beside."""

    def __init__(
        self,
        backward: bool = False,
        loss_fn: Callable[[Any], torch.Tensor] | None = None,
        optimizer: Any = None,
        measure: bool = False,
    ) -> None:
        self.loss, self.optimizer, self.measure = loss_for(backward, loss_fn), optimizer, measure

    @classmethod
    def planned(cls, options: Options, program: InstrumentedProgram, counted: PassResult) -> MemoryPass | None:
        """The pass ``options`` ask for (``memory=True``), or ``None``: also when the
        counting run modelled the memory already (:func:`~.counted.rides_along`)."""
        if not options.memory or MemoryRecorder in counted.recorded:
            return None
        return cls(
            backward=options.backward,
            loss_fn=options.loss_fn,
            optimizer=options.optimizer,
            measure=options.measure_memory,
        )

    def run(self, program: InstrumentedProgram) -> PassResult:
        recorder = MemoryRecorder(program, self.measure, self.optimizer)
        model, given = program.capture.model, program.capture.inputs
        # a state object among the inputs (a KV cache) is as given for each run: its
        # tensors' writes are put back, the model's call gets fresh objects around them
        states = held_tensors(given.args, given.kwargs)
        with rewound(states):
            result = run_once(program, [recorder], self.loss)
        if recorder.watch is not None and model is not None:  # the allocator on the model's own call too
            args, kwargs = given.rebuild(given.tensors) if states else (given.args, given.kwargs)
            with rewound(states):
                forward, peak = measure_model_call(model, args, kwargs, recorder.device, self.loss)
            memory = result.report["memory"]
            memory = dataclasses.replace(memory, measured_eager_peak=peak, measured_eager_forward_peak=forward)
            result.report["memory"] = memory
        return result


class MemoryRecorder(Recorder):
    """One run of ``program`` under the storage model (and the allocator, with real data
    and ``measure``): per node its figures, for the run ``report.memory``.

    Alone it leads the dispatch (the tracker is the mode); beside the counting recorder
    the tracker follows the ops that mode prices. The loss is modelled, never counted.
    ``optimizer``: its state and step are added to the record.
    """

    def __init__(self, program: InstrumentedProgram, measure: bool = False, optimizer: Any = None) -> None:
        self.program, self.optimizer = program, optimizer
        self.params, self.inputs = program.parameters(), list(program.inputs)
        # a state object's tensors among the inputs (a KV cache): the run's, freed when replaced
        given = program.capture.inputs
        states = {id(t) for t in held_tensors(given.args, given.kwargs)}
        self.donated = Donated(program.graph, [(n, t) for n, t in zip(given.names, self.inputs) if id(t) in states])
        self.trainable = [p for p in self.params if p.requires_grad]
        self.buffers = program.buffers()
        gm = program.graph_module
        constants = [a for n in gm.graph.nodes if n.op == "get_attr" for a in tensors_in(program.attribute(n))]
        every = [*self.inputs, *self.params]
        self.device = next((t.device for t in every), torch.device("cpu"))
        real = all(has_data(t) for t in every)
        # a run on the CPU takes this CPU's scratch, a virtual one too (its fake tensors are
        # the CPU's, a meta model's included: see run.virtual); CUDA none (memory_record.no_scratch)
        self.scratch = Scratch(meta=not real) if self.device.type == "cpu" else None
        # (torch._dynamo is imported by start(), only where the run may need it)
        resident = [t for t in self.inputs if id(t) not in states]
        self.tracker = StorageTracker(
            [*self.params, *self.buffers, *constants, *resident], self.scratch, import_dynamo=False
        )
        self.op = self.backward_op = self.tracker.observe  # (per aten op: no call between)
        self.owned = measure and real and self.device.type in ("cpu", "cuda")  # (the allocator's watch)
        self.watch: AllocatorWatch | None = None
        self.outputs: dict[str, int] = {}  # per node, the new storage bytes among its outputs
        # what the eager model holds past its last use (as the capture saw the model's frames)
        # (a program that runs the model itself holds what its frames hold: nothing to add)
        graph = torch.fx.Graph() if program.runs_the_model else program.graph
        self.calls = CallInputs(graph, frames_seen=program.capture.frames_seen)
        # a module call's inputs, until the call returns; kept on the recorder, so that what
        # is held until the program's output (autocast's cached casts) lives to the run's end
        self.held: dict[str, Any] = {}
        self.forward_peak: tuple[int, str | None] | None = None
        self.forward_end: int | None = None
        self.backward_start: int | None = None
        self.held_after_backward: int | None = None
        self.gradients: int | None = None  # the parameters' gradients' bytes
        self.param_grads: set[int] = set()  # the ids of their allocations
        self.starts: list[tuple[int, str]] = []  # (op index, node) where each forward node began

    def start(self, run: OneRun) -> None:
        if may_reach_dynamo(self.program, run.loss):
            import_dynamo()
        self.owners = run.owners
        self.watch = AllocatorWatch(self.device, run.owners) if self.owned else None

    def mode(self) -> StorageTracker:
        return self.tracker

    backward_mode = loss_mode = mode

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """A step after ``zero_grad()`` (the backward allocates every ``.grad``), under the
        allocator's watch, what autograd saves marked; the timeline ends with the run."""
        with fresh_grads(self.trainable), contextlib.ExitStack() as stack:
            if self.watch is not None:
                stack.enter_context(self.watch)
            if torch.is_grad_enabled():
                stack.enter_context(self.tracker.saving_hooks())
            self.tracker.donate(self.donated.tensors)
            yield
            self.tracker.stop()  # what is dropped afterwards is not the run's memory

    def before(self, name: str) -> None:
        tracker = self.tracker
        tracker.node = name
        self.starts.append((tracker.ops, name))
        if self.watch is not None:
            self.watch.enter(name)

    def after(self, name: str, out: Any) -> None:
        tracker, outputs = self.tracker, self.outputs
        if self.watch is not None:
            self.watch.exit(name)
        if type(out) is torch.Tensor:  # the common case, spelled out: it runs per node
            e = tracker.allocation(out)
            if e is not None and e.node == name:
                outputs[name] = e.nbytes
        else:
            made = {
                id(e): e.nbytes for t in tensors_in(out) if (e := tracker.allocation(t)) is not None and e.node == name
            }
            outputs[name] = sum(made.values())  # each new storage once, however many outputs view it
        if name in self.calls.hold:
            self.held[name] = out
        for value in self.calls.release_after.get(name, ()):
            del self.held[value]
        if self.donated:
            for storage in self.donated.after(name, out):
                tracker.release(storage)
        tracker.node = None

    def differentiating(self, loss: Any) -> None:
        tracker = self.tracker
        self.forward_end = tracker.events
        self.backward_start = tracker.ops
        tracker.phase, tracker.running = Phase.BACKWARD, self.owners.running
        if self.watch is not None:
            self.watch.begin_backward()

    def differentiated(self) -> None:
        self.held_after_backward = self.tracker.live  # the output, the loss and the gradients
        grads = [p.grad for p in self.trainable if p.grad is not None]
        self.gradients = unique_bytes(grads)
        self.param_grads = {id(e) for g in grads if (e := self.tracker.allocation(g)) is not None}

    def result(self, run: OneRun) -> PassResult:
        tracker = self.tracker
        tracker.settle()  # each op's kernel scratch, learnt now the run (and its watch) is over
        if self.forward_end is not None:
            self.forward_peak = tracker.peak_until(self.forward_end)
        memory = memory_record(self, self.optimizer, self.trainable)
        return PassResult(nodes=self.node_figures(), report={"memory": memory})

    def node_figures(self) -> dict[str, dict[str, Any]]:
        """Per node: output and saved bytes, and the allocator's growth when it measured."""
        saved: dict[str, int] = {}
        for a in self.tracker.allocations:
            if a.saved and a.node is not None:
                saved[a.node] = saved.get(a.node, 0) + a.nbytes
        nodes = {}
        for name in self.program.probe_points:
            nodes[name] = {"output_bytes": self.outputs.get(name, 0), "saved_bytes": saved.get(name, 0)}
            if self.tracker.saves is not None:
                nodes[name]["saves"] = self.tracker.saves.get(name, Saves.NOTHING)
            if self.watch is not None:
                nodes[name]["measured_growth"] = self.watch.growth.get(name, 0)
        return nodes
