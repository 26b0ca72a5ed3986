"""One training (or inference) step analysed at one input size: the figures plans compare.

Every planning tool (:mod:`.sweep`, :mod:`.fit`, :mod:`.checkpointing`) runs
:func:`~fxinspect.analyze` per point and keeps a :class:`StepPoint`: the FLOPs, the memory
peak with and without resident memory, what that peak is made of, and, where the
analysis timed the step or priced it on a device, its latency and inputs per second.

>>> import torch
>>> model = torch.nn.Linear(8, 4)
>>> p = analysed_point(model, lambda b: torch.randn(b, 8), 2, None, Options(timing=False))[1]
>>> p.batch, p.flops, sum(p.composition.values()) == p.total_peak   # 2 * (2*8*4) + 2*4 bias adds
(2, 136, True)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ..analyze import analyze
from ..errors import InputError
from ..options import Options
from ..records import MemoryRecord, TensorRole
from ..report import Report

__all__ = ["StepPoint", "analysed_point", "composition"]

_ROLE_NAMES = {
    TensorRole.ACTIVATION: "activations",
    TensorRole.SAVED: "saved for backward",
    TensorRole.GRADIENT: "gradients in flight",
    TensorRole.PARAMETER_GRADIENT: "parameter gradients",
    TensorRole.OTHER: "other",
    TensorRole.SCRATCH: "kernel scratch",
    TensorRole.STATE: "cache (state given to the step)",
}


@dataclass(frozen=True)
class StepPoint:
    """The figures of one analysed step.

    ``flops`` is forward plus backward when a backward ran. ``peak`` is what the step
    allocated on top of resident memory at its highest; ``total_peak`` includes the
    resident memory (parameters, buffers, inputs, optimizer state), the figure budgets
    are held to. ``composition`` splits ``total_peak`` into parts that sum to it exactly.
    ``latency`` is a measured step (forward, loss and backward with ``backward=True``),
    ``predicted_latency`` the time model's (``device_spec=``); each is ``None`` when not known.
    """

    batch: int
    seq_len: int | None
    flops: int
    macs: int
    peak: int
    total_peak: int
    resident: int
    latency: float | None
    predicted_latency: float | None
    method: str
    composition: Mapping[str, int] = field(default_factory=dict)
    derived: bool = False  # from two analysed steps on a line (:mod:`.derived`), not analysed itself

    @property
    def dominant(self) -> str:
        """The largest part of the peak."""
        return max(self.composition, key=self.composition.get) if self.composition else ""

    @property
    def inputs_per_second(self) -> float | None:
        return self.batch / self.latency if self.latency else None

    @property
    def predicted_inputs_per_second(self) -> float | None:
        return self.batch / self.predicted_latency if self.predicted_latency else None


def composition(memory: MemoryRecord) -> dict[str, int]:
    """``memory.total_peak`` split into what held it: resident parts, then the run's.

    At the run's own peak, the tensors alive then grouped by why they were alive (their
    bytes sum to ``memory.peak``); when the optimizer's ``step()`` is the higher point,
    the gradients and what else the loop still holds, and the step's own scratch.
    """
    parts = {
        "parameters": memory.params,
        "buffers": memory.buffers,
        "inputs": memory.inputs,
        "optimizer state": memory.optimizer_state or 0,
    }
    run = memory.resident + memory.peak
    if memory.total_peak == run:
        for tensor in memory.alive_at_peak:
            name = _ROLE_NAMES[tensor.role]
            parts[name] = parts.get(name, 0) + tensor.nbytes
    else:  # the optimizer's step, beside what the backward left
        held = memory.held_after_backward if memory.held_after_backward is not None else (memory.gradients or 0)
        gradients = min(memory.gradients or 0, held)
        parts["parameter gradients"] = gradients
        parts["output and loss"] = held - gradients
        parts["optimizer step"] = memory.optimizer_step or 0
    return {name: size for name, size in parts.items() if size}


def point_of(report: Report, batch: int, seq_len: int | None) -> StepPoint:
    """The :class:`StepPoint` of one report (its memory must have been modelled)."""
    memory, totals = report.memory, report.totals
    if memory is None:
        raise InputError("planning needs the memory model: do not pass memory=False")
    timing = report.timing
    latency = None
    if timing is not None:
        latency = timing.training_step if totals.backward_flops is not None else timing.plain_forward
    predicted = totals.predicted_latency
    if predicted is not None and totals.backward_predicted_latency is not None:
        predicted += totals.backward_predicted_latency
    return StepPoint(
        batch=batch,
        seq_len=seq_len,
        flops=totals.flops + (totals.backward_flops or 0),
        macs=totals.macs + (totals.backward_macs or 0),
        peak=memory.peak,
        total_peak=memory.total_peak,
        resident=memory.resident,
        latency=latency,
        predicted_latency=predicted,
        method=str(report.capture.method),
        composition=composition(memory),
    )


def analysed_point(
    model: torch.nn.Module,
    make_inputs: Callable[..., Any],
    batch: int,
    seq_len: int | None,
    opts: Options,
    kwargs: dict | None = None,
) -> tuple[Report, StepPoint]:
    """Build the inputs of one point and analyse the step on them, with ``opts``
    (``kwargs``: keywords beside positional inputs).

    With ``device="meta"`` the inputs are built under ``torch.device("meta")``, so a large
    batch allocates nothing (a factory given an explicit device still makes real tensors,
    which the analysis then copies as fake ones).
    """
    where = torch.device("meta") if str(opts.device) == "meta" else contextlib.nullcontext()
    with where:
        inputs = make_inputs(batch) if seq_len is None else make_inputs(batch, seq_len)
    report = analyze(model, inputs, kwargs=kwargs, **opts.keywords())
    return report, point_of(report, batch, seq_len)
