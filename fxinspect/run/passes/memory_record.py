"""The memory model's run as a :class:`~fxinspect.records.MemoryRecord`: its peak, what was alive then.

:func:`memory_record` turns what the storage tracker (and the allocator's watch) saw
during one run (:class:`~fxinspect.run.passes.memory.MemoryRecorder`) into the report's
record.
"""

from __future__ import annotations

from typing import Any

import torch

from ...capture import module_of
from ...records.memory import LiveTensor, MemoryRecord, Phase, TensorRole
from ...tensors import stored_bytes
from ..memory.optimizer import optimizer_footprint
from ..memory.storages import Allocation
from ..program import InstrumentedProgram

__all__ = ["memory_record", "no_scratch", "unique_bytes"]


def no_scratch(device: torch.device) -> str:
    """The note of a run whose kernels' scratch is not modelled (a real or fake CUDA run)."""
    return f"kernel scratch (cuDNN's workspace) is not modelled on {device.type}: the peak counts tensors only"


def unique_bytes(tensors: list[torch.Tensor]) -> int:
    """The bytes of the storages behind ``tensors``, each once (a wrapper subclass's:
    its inner tensors', a quantized weight as stored)."""
    return stored_bytes(tensors)


def memory_record(run: Any, optimizer: Any = None, trainable: list = ()) -> MemoryRecord:
    """``run`` (a finished :class:`~fxinspect.run.passes.memory.MemoryRecorder`) as a
    :class:`MemoryRecord`; with ``optimizer``, its state and step for
    ``trainable`` (:func:`~fxinspect.run.memory.optimizer.optimizer_footprint`)."""
    tracker, watch = run.tracker, run.watch
    forward_peak = run.forward_peak or (tracker.peak, tracker.peak_node)
    name = state = step = None
    if optimizer is not None:
        name, state, step = optimizer_footprint(optimizer, list(trainable))
    return MemoryRecord(
        device=str(run.device),
        params=unique_bytes(run.params),
        buffers=unique_bytes(run.buffers),
        inputs=unique_bytes([t for t in run.inputs if all(t is not d for _, d in run.donated.tensors)]),
        timeline=tuple(tracker.timeline),
        backward_start=run.backward_start,
        peak=tracker.peak,
        peak_node=tracker.peak_node,
        peak_phase=tracker.peak_phase,
        forward_peak=forward_peak[0],
        forward_peak_node=forward_peak[1],
        alive_at_peak=_alive(
            run.program, tracker.alive_at_peak(), run.param_grads, {n for n, _ in run.donated.tensors}
        ),
        saved=sum(a.nbytes for a in tracker.allocations if a.saved),
        gradients=run.gradients,
        measured_by=watch.by if watch is not None else None,
        measured_peak=watch.peak if watch is not None else None,
        measured_forward_peak=watch.forward_peak if watch is not None else None,
        measured_peak_node=watch.peak_node if watch is not None else None,
        held_after_backward=run.held_after_backward,
        node_starts=tuple(run.starts),
        optimizer=name,
        optimizer_state=state,
        optimizer_step=step,
        notes=tuple(run.scratch.notes if run.scratch is not None else [no_scratch(run.device)]) + _state_note(run),
    )


def _state_note(run: Any) -> tuple[str, ...]:
    if not run.donated:
        return ()
    given = unique_bytes([t for _, t in run.donated.tensors])
    return (
        f"the state objects among the inputs (a KV cache, {given:,} B) are the step's from its start, not "
        "resident: each tensor is freed after the last node that reads it unless the step returns it, as the "
        "model's own cache drops what it replaces (an allocator that watched the analysed run saw them held)",
    )


def _alive(
    program: InstrumentedProgram, allocations: list[Allocation], param_grads: set[int], states: set[str]
) -> tuple[LiveTensor, ...]:
    """The allocations alive at the peak as records, largest first (``states``: the
    inputs a state object gave the run, :mod:`~fxinspect.run.memory.donated`)."""
    makers = {a.node for a in allocations}
    modules = {n.name: module_of(n) for n in program.graph.nodes if n.name in makers}
    out = []
    for a in allocations:
        path, mtype = modules.get(a.node, ("", "")) if a.node is not None else ("", "")
        if a.scratch is not None:
            role = TensorRole.SCRATCH
        elif a.node in states:
            role = TensorRole.STATE
        elif a.phase is Phase.BACKWARD:
            role = TensorRole.PARAMETER_GRADIENT if id(a) in param_grads else TensorRole.GRADIENT
        else:
            role = TensorRole.OTHER if a.node is None else TensorRole.SAVED if a.saved else TensorRole.ACTIVATION
        out.append(LiveTensor(a.node or "", path, mtype, a.shape, a.dtype, a.nbytes, role, a.phase))
    return tuple(sorted(out, key=lambda t: -t.nbytes))
