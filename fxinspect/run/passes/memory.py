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
it allocated that autograd saved) and ``measured_growth``; the run as a whole is a
:class:`~fxinspect.records.MemoryRecord` (``report.memory``).

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
from ...records.memory import LiveTensor, MemoryRecord, Phase, TensorRole
from ...tensors import has_data, tensors_in
from ..allocator import AllocatorWatch
from ..optimizer import optimizer_footprint
from ..owners import AutogradOwners
from ..program import InstrumentedProgram, Probe
from ..storages import Allocation, StorageTracker
from . import PassResult
from .backward import default_loss, fresh_grads

__all__ = ["MemoryPass"]


def _unique_bytes(tensors: list[torch.Tensor]) -> int:
    return sum({id(s): s.nbytes() for t in tensors if (s := t.untyped_storage()) is not None}.values())


def _device(tensors: list[torch.Tensor]) -> torch.device:
    return next((t.device for t in tensors), torch.device("cpu"))


class MemoryPass:
    """Storage lifetimes of one run, its peak and what was alive then; measured beside."""

    fields = ("output_bytes", "saved_bytes", "measured_growth")

    def __init__(
        self,
        backward: bool = False,
        loss_fn: Callable[[Any], torch.Tensor] | None = None,
        optimizer: Any = None,
        measure: bool = True,
    ) -> None:
        self.backward, self.loss_fn, self.optimizer, self.measure = (
            backward,
            loss_fn or default_loss,
            optimizer,
            measure,
        )

    def run(self, program: InstrumentedProgram) -> PassResult:
        gm = program.graph_module
        params, buffers = program.parameters(), program.buffers()
        constants = [a for n in gm.graph.nodes if n.op == "get_attr" for a in tensors_in(program.attribute(n))]
        inputs = list(program.inputs)
        tracker = StorageTracker([*params, *buffers, *constants, *inputs])
        every = [*inputs, *params]
        device = _device(every)
        real = all(has_data(t) for t in every)
        owners = AutogradOwners()
        watch = AllocatorWatch(device, owners) if self.measure and real and device.type in ("cpu", "cuda") else None
        outputs: dict[str, int] = {}

        def before(name: str) -> None:
            tracker.node = name
            owners.before(name)
            if watch is not None:
                watch.enter(name)

        def after(name: str, out: Any) -> None:
            owners.after(name)
            if watch is not None:
                watch.exit(name)
            made = {
                id(e): e.nbytes for t in tensors_in(out) if (e := tracker.allocation(t)) is not None and e.node == name
            }
            outputs[name] = sum(made.values())  # each new storage once, however many outputs view it
            tracker.node = None

        trainable = [p for p in params if p.requires_grad]
        forward_peak, gradients, param_grads = None, None, set()
        with fresh_grads(trainable):  # a step after zero_grad(): the backward allocates every .grad
            with contextlib.ExitStack() as stack:
                if watch is not None:
                    stack.enter_context(watch)
                if self.backward:
                    stack.enter_context(torch.enable_grad())
                stack.enter_context(tracker)
                if torch.is_grad_enabled():
                    stack.enter_context(torch.autograd.graph.saved_tensors_hooks(tracker.pack, tracker.unpack))
                output = program.run(inputs, Probe(before, after))
                backward_start = None
                if self.backward:
                    loss = self.loss_fn(program.output_structure(output))
                    forward_peak = (tracker.peak, tracker.peak_node)
                    backward_start = tracker.ops
                    tracker.phase, tracker.running = Phase.BACKWARD, owners.running
                    if watch is not None:
                        watch.begin_backward()
                    loss.backward()
                    del loss
                    grads = [p.grad for p in trainable if p.grad is not None]
                    gradients = _unique_bytes(grads)
                    param_grads = {id(e) for g in grads if (e := tracker.allocation(g)) is not None}
                tracker.stop()  # the run ends here: what is dropped afterwards is not its memory
            del output
        forward_peak = forward_peak or (tracker.peak, tracker.peak_node)
        memory = MemoryRecord(
            device=str(device),
            params=_unique_bytes(params),
            buffers=_unique_bytes(buffers),
            inputs=_unique_bytes(inputs),
            timeline=tuple(tracker.timeline),
            backward_start=backward_start,
            peak=tracker.peak,
            peak_node=tracker.peak_node,
            peak_phase=tracker.peak_phase,
            forward_peak=forward_peak[0],
            forward_peak_node=forward_peak[1],
            alive_at_peak=_alive(program, tracker.alive_at_peak(), param_grads),
            saved=sum(a.nbytes for a in tracker.allocations if a.saved),
            gradients=gradients,
            measured_by=watch.by if watch is not None else None,
            measured_peak=watch.peak if watch is not None else None,
            measured_forward_peak=watch.forward_peak if watch is not None else None,
            measured_peak_node=watch.peak_node if watch is not None else None,
        )
        if self.optimizer is not None:
            name, state, step = optimizer_footprint(self.optimizer, trainable)
            memory = dataclasses.replace(memory, optimizer=name, optimizer_state=state, optimizer_step=step)
        saved: dict[str, int] = {}
        for a in tracker.allocations:
            if a.saved and a.node is not None:
                saved[a.node] = saved.get(a.node, 0) + a.nbytes
        result = PassResult(fields=self.fields if watch is not None else self.fields[:2])
        for name in program.probe_points:
            result.nodes[name] = {
                "output_bytes": outputs.get(name, 0),
                "saved_bytes": saved.get(name, 0),
                "measured_growth": watch.growth.get(name, 0) if watch is not None else None,
            }
        result.report["memory"] = memory
        return result


def _alive(
    program: InstrumentedProgram, allocations: list[Allocation], param_grads: set[int]
) -> tuple[LiveTensor, ...]:
    """The allocations alive at the peak as records, largest first."""
    modules = {n.name: module_of(n) for n in program.graph.nodes}
    out = []
    for a in allocations:
        path, mtype = modules.get(a.node, ("", "")) if a.node is not None else ("", "")
        if a.phase is Phase.BACKWARD:
            role = TensorRole.PARAMETER_GRADIENT if id(a) in param_grads else TensorRole.GRADIENT
        else:
            role = TensorRole.OTHER if a.node is None else TensorRole.SAVED if a.saved else TensorRole.ACTIVATION
        out.append(LiveTensor(a.node or "", path, mtype, a.shape, a.dtype, a.nbytes, role, a.phase))
    return tuple(sorted(out, key=lambda t: -t.nbytes))
