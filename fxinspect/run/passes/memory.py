"""The memory pass: one clean run (and backward) under the storage model and the allocator.

The program runs once with nothing but the :class:`~fxinspect.run.storages.StorageTracker`
(and, with real data, the :class:`~fxinspect.run.allocator.AllocatorWatch`): no value
reads, no counting, so the tensors alive are exactly those of a plain run. With
gradients on, ``saved_tensors_hooks`` mark what autograd keeps for the backward (each
storage once, however many autograd nodes save it). With ``backward=True`` the loss is
differentiated too, every parameter's ``.grad`` starting from ``None`` (a step after
``zero_grad()``); the backward's allocations are charged to the fx node whose backward
made them. ``optimizer=`` adds the optimizer's state and step
(:func:`~fxinspect.run.optimizer.optimizer_footprint`).

Per node: ``output_bytes`` (new storages among its outputs), ``saved_bytes`` (storages
it allocated that autograd saved), ``saves`` (what autograd saved while it ran) and
``measured_growth``; the run as a whole is a
:class:`~fxinspect.records.MemoryRecord` (``report.memory``).

With nothing measured beside it, the memory needs no run of its own: the counting run
models it (:mod:`.one_run`: the tracker follows the aten calls the counting modes
price, in the same dispatch), and ``analyze`` does so by default.

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
from collections.abc import Callable
from typing import Any

import torch

from ...capture import module_of
from ...options import Options
from ...records.memory import LiveTensor, MemoryRecord, Phase, Saves, TensorRole
from ...tensors import has_data, local_tensor, tensors_in
from ..allocator import AllocatorWatch
from ..lazy_dynamo import import_dynamo, may_reach_dynamo
from ..lifetimes import CallInputs
from ..model_call import measure_model_call
from ..optimizer import optimizer_footprint
from ..owners import AutogradOwners
from ..program import InstrumentedProgram, Probe
from ..scratch import Scratch
from ..storages import Allocation, StorageTracker
from . import PassResult
from .backward import default_loss, fresh_grads

__all__ = ["MemoryPass", "ModelledRun"]


def _no_scratch(device: torch.device) -> str:
    """The note of a run whose kernels' scratch is not modelled (a real or fake CUDA run)."""
    return f"kernel scratch (cuDNN's workspace) is not modelled on {device.type}: the peak counts tensors only"


def _unique_bytes(tensors: list[torch.Tensor]) -> int:
    stores = (local_tensor(t).untyped_storage() for t in tensors)
    return sum({id(s): s.nbytes() for s in stores}.values())


def _device(tensors: list[torch.Tensor]) -> torch.device:
    return next((t.device for t in tensors), torch.device("cpu"))


class MemoryPass:
    """Storage lifetimes of one run, its peak and what was alive then; measured beside."""

    def __init__(
        self,
        backward: bool = False,
        loss_fn: Callable[[Any], torch.Tensor] | None = None,
        optimizer: Any = None,
        measure: bool = False,
    ) -> None:
        self.backward, self.loss_fn, self.optimizer, self.measure = (
            backward,
            loss_fn or default_loss,
            optimizer,
            measure,
        )

    @classmethod
    def planned(cls, options: Options, program: InstrumentedProgram, counted: PassResult) -> MemoryPass | None:
        """The pass ``options`` ask for (``memory=True``), or ``None``: also when the
        counting run modelled the memory already (:func:`rides_along`)."""
        if not options.memory or "memory" in counted.report:
            return None
        return cls(
            backward=options.backward,
            loss_fn=options.loss_fn,
            optimizer=options.optimizer,
            measure=options.measure_memory,
        )

    def run(self, program: InstrumentedProgram) -> PassResult:
        params = program.parameters()
        inputs = list(program.inputs)
        run = ModelledRun(program, params, inputs, self.measure)
        trainable = [p for p in params if p.requires_grad]
        with fresh_grads(trainable):  # a step after zero_grad(): the backward allocates every .grad
            output, gradients, param_grads = run.step(self.loss_fn if self.backward else None, trainable)
            del output
        memory = run.record(gradients, param_grads, self.optimizer, trainable)
        model, given = program.capture.model, program.capture.inputs
        if run.watch is not None and model is not None:  # the allocator on the model's own call too
            forward, peak = measure_model_call(
                model, given.args, given.kwargs, run.device, self.loss_fn if self.backward else None
            )
            memory = dataclasses.replace(memory, measured_eager_peak=peak, measured_eager_forward_peak=forward)
        return PassResult(nodes=run.node_figures(), report={"memory": memory})


class ModelledRun:
    """One run of ``program`` under the storage model (and the allocator, with real data).

    :meth:`step` runs it; :meth:`record` and :meth:`node_figures` are its figures. The
    counting run uses it too (:mod:`.one_run`), with its counting modes in the tracker's
    place and its probes beside :meth:`probe`'s.
    """

    def __init__(self, program: InstrumentedProgram, params: list, inputs: list, measure: bool) -> None:
        self.program, self.params, self.inputs = program, params, inputs
        self.buffers = program.buffers()
        gm = program.graph_module
        constants = [a for n in gm.graph.nodes if n.op == "get_attr" for a in tensors_in(program.attribute(n))]
        every = [*inputs, *params]
        self.device = _device(every)
        real = all(has_data(t) for t in every)
        # a run on the CPU takes this CPU's scratch, a virtual one too (its fake tensors are
        # the CPU's, a meta model's included: see run.virtual); CUDA none (_no_scratch)
        self.scratch = Scratch(meta=not real) if self.device.type == "cpu" else None
        # (torch._dynamo is imported by step(), only where the run may need it)
        self.tracker = StorageTracker([*params, *self.buffers, *constants, *inputs], self.scratch, import_dynamo=False)
        self.owners = AutogradOwners()
        measurable = measure and real and self.device.type in ("cpu", "cuda")
        self.watch = AllocatorWatch(self.device, self.owners) if measurable else None
        self.outputs: dict[str, int] = {}  # per node, the new storage bytes among its outputs
        # what the eager model holds past its last use (as the capture saw the model's frames)
        # (a program that runs the model itself holds what its frames hold: nothing to add)
        graph = torch.fx.Graph() if program.runs_the_model else program.graph
        self.calls = CallInputs(graph, frames_seen=program.capture.frames_seen)
        self.forward_peak: tuple[int, str | None] | None = None
        self.backward_start: int | None = None
        self.held_after_backward: int | None = None
        self.starts: list[tuple[int, str]] = []  # (op index, node) where each forward node began

    def probe(self, owned: bool = True) -> Probe:
        """Charge what each node allocates to it; ``owned``: also follow which node made
        each autograd node (for a backward or the allocator's measurement)."""
        tracker, watch, outputs = self.tracker, self.watch, self.outputs
        owners = self.owners if owned or watch is not None else None
        hold, release_after = self.calls.hold, self.calls.release_after
        # a module call's inputs, until the call returns; kept on the run, so that what is
        # held until the program's output (autocast's cached casts) lives to the run's end
        held: dict[str, Any] = {}
        self.held = held

        starts = self.starts

        def before(name: str) -> None:
            tracker.node = name
            starts.append((tracker.ops, name))
            if owners is not None:
                owners.before(name)
            if watch is not None:
                watch.enter(name)

        def after(name: str, out: Any) -> None:
            if owners is not None:
                owners.after(name)
            if watch is not None:
                watch.exit(name)
            if type(out) is torch.Tensor:  # the common case, spelled out: it runs per node
                e = tracker.allocation(out)
                if e is not None and e.node == name:
                    outputs[name] = e.nbytes
            else:
                made = {
                    id(e): e.nbytes
                    for t in tensors_in(out)
                    if (e := tracker.allocation(t)) is not None and e.node == name
                }
                outputs[name] = sum(made.values())  # each new storage once, however many outputs view it
            if name in hold:
                held[name] = out
            for value in release_after.get(name, ()):
                del held[value]
            tracker.node = None

        return Probe(before, after)

    def step(
        self,
        loss_fn: Callable | None,
        trainable: list,
        probe: Probe | None = None,
        forward_mode: Any = None,
        backward_mode: Callable[[Any], Any] | None = None,
    ) -> tuple[Any, int | None, set[int]]:
        """The forward (and with ``loss_fn`` its backward): the output, the parameter
        gradients' bytes and the ids of their allocations.

        By default the tracker is the dispatch mode throughout and :meth:`probe` the
        probe. A counting run passes its own ``probe`` (calling this run's beside its
        own), ``forward_mode`` and ``backward_mode(loss)`` (a mode for the backward of
        ``loss``); each must call ``self.tracker.observe`` after every op. The loss itself
        is modelled, never counted: the tracker is the mode while it is computed.
        """
        tracker, watch = self.tracker, self.watch
        gradients, param_grads = None, set()
        if may_reach_dynamo(self.program, loss_fn):
            import_dynamo()
        with contextlib.ExitStack() as stack:
            if watch is not None:
                stack.enter_context(watch)
            if loss_fn is not None:
                stack.enter_context(torch.enable_grad())
            if torch.is_grad_enabled():
                stack.enter_context(tracker.saving_hooks())
            with forward_mode if forward_mode is not None else tracker:
                output = self.program.run(self.inputs, probe or self.probe())
            if loss_fn is not None:
                with tracker:
                    loss = loss_fn(self.program.output_structure(output))
                forward_end = tracker.events
                self.backward_start = tracker.ops
                tracker.phase, tracker.running = Phase.BACKWARD, self.owners.running
                if watch is not None:
                    watch.begin_backward()
                with backward_mode(loss) if backward_mode is not None else tracker:
                    loss.backward()
                self.held_after_backward = tracker.live  # the output, the loss and the gradients
                del loss
                grads = [p.grad for p in trainable if p.grad is not None]
                gradients = _unique_bytes(grads)
                param_grads = {id(e) for g in grads if (e := tracker.allocation(g)) is not None}
            tracker.stop()  # the run ends here: what is dropped afterwards is not its memory
        tracker.settle()  # each op's kernel scratch, learnt now the run (and its watch) is over
        if loss_fn is not None:
            self.forward_peak = tracker.peak_until(forward_end)
        return output, gradients, param_grads

    def record(
        self, gradients: int | None, param_grads: set[int], optimizer: Any = None, trainable: list = ()
    ) -> MemoryRecord:
        """The run as a :class:`MemoryRecord`; with ``optimizer``, its state and step for
        ``trainable`` (:func:`~fxinspect.run.optimizer.optimizer_footprint`)."""
        tracker, watch = self.tracker, self.watch
        forward_peak = self.forward_peak or (tracker.peak, tracker.peak_node)
        name = state = step = None
        if optimizer is not None:
            name, state, step = optimizer_footprint(optimizer, list(trainable))
        return MemoryRecord(
            device=str(self.device),
            params=_unique_bytes(self.params),
            buffers=_unique_bytes(self.buffers),
            inputs=_unique_bytes(self.inputs),
            timeline=tuple(tracker.timeline),
            backward_start=self.backward_start,
            peak=tracker.peak,
            peak_node=tracker.peak_node,
            peak_phase=tracker.peak_phase,
            forward_peak=forward_peak[0],
            forward_peak_node=forward_peak[1],
            alive_at_peak=_alive(self.program, tracker.alive_at_peak(), param_grads),
            saved=sum(a.nbytes for a in tracker.allocations if a.saved),
            gradients=gradients,
            measured_by=watch.by if watch is not None else None,
            measured_peak=watch.peak if watch is not None else None,
            measured_forward_peak=watch.forward_peak if watch is not None else None,
            measured_peak_node=watch.peak_node if watch is not None else None,
            held_after_backward=self.held_after_backward,
            node_starts=tuple(self.starts),
            optimizer=name,
            optimizer_state=state,
            optimizer_step=step,
            notes=tuple(self.scratch.notes if self.scratch is not None else [_no_scratch(self.device)]),
        )

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


def _alive(
    program: InstrumentedProgram, allocations: list[Allocation], param_grads: set[int]
) -> tuple[LiveTensor, ...]:
    """The allocations alive at the peak as records, largest first."""
    makers = {a.node for a in allocations}
    modules = {n.name: module_of(n) for n in program.graph.nodes if n.name in makers}
    out = []
    for a in allocations:
        path, mtype = modules.get(a.node, ("", "")) if a.node is not None else ("", "")
        if a.scratch is not None:
            role = TensorRole.SCRATCH
        elif a.phase is Phase.BACKWARD:
            role = TensorRole.PARAMETER_GRADIENT if id(a) in param_grads else TensorRole.GRADIENT
        else:
            role = TensorRole.OTHER if a.node is None else TensorRole.SAVED if a.saved else TensorRole.ACTIVATION
        out.append(LiveTensor(a.node or "", path, mtype, a.shape, a.dtype, a.nbytes, role, a.phase))
    return tuple(sorted(out, key=lambda t: -t.nbytes))
