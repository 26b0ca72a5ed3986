"""A training step's model and hardware FLOPs, from its exact counts: MFU and HFU.

``StepFlops`` reads an analysed step (``analyze(..., backward=True)``):

* ``model_flops``: ``2 ×`` the matmul MACs of the forward and the backward, without any
  recomputation. Only the matmuls count (the convention of PaLM's appendix B and
  torchtitan, whose ``6·N + 12·L·s·h`` per token is this count for a dense
  transformer): a peak FLOP/s is a matmul rate. The counts are the ops that ran: a
  mixture of experts counts the experts each token was routed to, a frozen layer has no
  weight gradient, the first layer no input gradient.
* ``hardware_flops``: the same as the step runs, with its recomputation: the forward
  that activation checkpointing reruns in the backward (ops the backward runs with
  gradients on) and the ``Q K^T`` a fused attention kernel's backward recomputes (flash,
  memory-efficient, cuDNN: ``backward - 2 × forward`` MACs of the node).
* ``all_flops``: every floating-point op the step ran (elementwise, norms, softmax too).

``mfu(seconds)`` is ``model_flops / (seconds × peak)``, ``hfu(seconds)`` the same of
``hardware_flops``; the peak is the device spec's for the dtype that carries the most
MACs (TF32's for float32 when torch allows TF32 matmuls and the spec lists it).

Example
-------
>>> import torch, fxinspect
>>> from fxinspect.integrations import step_flops
>>> flops = step_flops(torch.nn.Linear(8, 4, bias=False), torch.randn(2, 8))
>>> flops.model_flops        # 2 * (2*8*4 forward + 2*8*4 weight-gradient MACs; the input needs no gradient)
256
>>> spec = fxinspect.timemodel.DeviceSpec("toy", {"float32": 1e3}, 1e9)
>>> flops.mfu(seconds=0.5, device_spec=spec)          # 256 / (0.5 * 1e3)
0.512
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..analyze import no_gc_pauses, report_of
from ..capture.checkpoints import CheckpointRegion
from ..capture.kept import CheckpointCall
from ..errors import InputError
from ..options import Options
from ..records.device_spec import DeviceSpec, priced_dtype
from ..report import Report
from ..rules.attention import FUSED_BACKWARDS, FUSED_FORWARDS
from ..rules.registry import FREE, lookup
from ..run.choose import count_best
from ..run.passes.one_run import run_once
from ..run.prepare import prepared
from ..run.recorders import Recorder, loss_for
from ..timemodel import devices

__all__ = ["StepFlops", "peak_of", "step_flops"]


@dataclass(frozen=True)
class StepFlops:
    """One training step's FLOPs (see the module): per step, whatever it takes."""

    model_flops: int  # 2 x matmul MACs, forward + backward, without recomputation
    hardware_flops: int  # the same with the recomputation the step runs
    all_flops: int  # every floating-point op the step ran
    checkpoint_flops: int  # 2 x MACs of the forward activation checkpointing reruns
    attention_flops: int  # 2 x MACs of Q K^T the fused attention backwards recompute
    dtype: str  # the dtype that carries the most MACs (its peak is the one used)
    tokens: int | None  # tokens in the step's batch (input_ids' elements), if known
    samples: int | None  # its batch size, if known
    partial: bool  # some op had no rule: the counts are lower bounds

    @classmethod
    def of(cls, report: Report, rerun: Rerun | None = None) -> StepFlops:
        """The figures of ``report`` (analysed with ``backward=True``); ``rerun``: what
        activation checkpointing reran in its backward (:func:`step_flops` measures it)."""
        rerun = rerun or Rerun()
        totals = report.totals
        if totals.backward_macs is None:
            raise ValueError("StepFlops.of: the report has no backward; analyse with backward=True")
        outside = (*report.unattributed, *report.backward_unattributed)
        macs = totals.macs + totals.backward_macs + sum(c.macs for c in outside)
        attention = sum(_attention_recompute(n) for n in report.nodes)
        every = totals.flops + totals.backward_flops + sum(c.flops for c in outside)
        weights: dict[str, int] = {}
        for n in report.nodes:
            dtype = priced_dtype(n.outputs) or "float32"
            weights[dtype] = weights.get(dtype, 0) + n.macs + (n.backward_macs or 0)
        return cls(
            model_flops=2 * (macs - attention - rerun.macs),
            hardware_flops=2 * macs,
            all_flops=every,
            checkpoint_flops=2 * rerun.macs,
            attention_flops=2 * attention,
            dtype=max(weights, key=weights.get) if weights else "float32",
            tokens=_tokens(report),
            samples=report.inputs[0].shape[0] if report.inputs and report.inputs[0].shape else None,
            partial=totals.partial or rerun.uncounted,
        )

    def mfu(self, seconds: float, device_spec: Any = None) -> float:
        """Model FLOPs utilisation of a step that took ``seconds``, against ``device_spec``'s peak."""
        return self.model_flops / (seconds * peak_of(device_spec, self.dtype))

    def hfu(self, seconds: float, device_spec: Any = None) -> float:
        """Hardware FLOPs utilisation: the step's FLOPs as it runs them, recomputation included."""
        return self.hardware_flops / (seconds * peak_of(device_spec, self.dtype))


def peak_of(device_spec: Any, dtype: str) -> float:
    """Dense matmul FLOP/s of ``device_spec`` (a preset's name, a :class:`DeviceSpec`,
    ``"measured"``; ``None``: this host's GPU preset, else ``"measured"``) for ``dtype``."""
    spec = default_spec() if device_spec is None else devices.get(device_spec)
    tf32 = torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"
    if dtype == "float32" and spec.tf32_flops and tf32:
        return spec.tf32_flops
    return spec.peak(dtype)


def default_spec() -> DeviceSpec:
    """This host's device: the current GPU's preset, else the figures measured on it (or on this CPU)."""
    if torch.cuda.is_available():
        try:
            return devices.get(torch.cuda.get_device_name())
        except InputError:  # a GPU without a preset: its own figures, measured once and cached
            pass
    return devices.get("measured")


def step_flops(
    model: torch.nn.Module,
    example_inputs: Any = None,
    *,
    kwargs: dict | None = None,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    **options: Any,
) -> StepFlops:
    """Analyse one training step of ``model`` and return its :class:`StepFlops`.

    Inputs and options as for :func:`fxinspect.analyze` (``backward`` is always on,
    ``timing``, ``memory`` and ``check_finite`` default to off). ``loss_fn`` defaults to
    the output's ``loss`` when it has one (a Hugging Face model given ``labels``), else
    fxinspect's default. Where the captured program keeps activation checkpoints, the
    backward is run once more to measure what they recompute. The model is left as it was.
    """
    options = {"timing": False, "memory": False, "check_finite": False, **options}
    opts = Options.of("step_flops", {**options, "backward": True, "loss_fn": loss_fn or model_loss})
    with no_gc_pauses(), prepared(model, example_inputs, kwargs, device=opts.device, caller="step_flops") as run:
        counted = count_best(run.model, run.args, run.kwargs, opts)
        report = report_of(run, counted, opts)
        rerun = Rerun()
        if any(isinstance(n.target, (CheckpointCall, CheckpointRegion)) for n in counted.program.graph.nodes):
            run_once(counted.program, [rerun], loss_for(True, opts.loss_fn))
    return StepFlops.of(report, rerun)


def model_loss(output: Any) -> torch.Tensor:
    """The loss a model returns (``output.loss`` or ``output["loss"]``), else fxinspect's default."""
    from ..run.recorders import default_loss

    found = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    return found if isinstance(found, torch.Tensor) else default_loss(output)


class Rerun(Recorder):
    """Sums the ops the backward runs with gradients on: a checkpoint's recomputed forward
    (torch reruns it under ``enable_grad``; the backward's own ops run without)."""

    def __init__(self) -> None:
        self.flops = self.macs = 0
        self.uncounted = False

    def backward_op(self, func: Any, args: tuple, kwargs: dict | None, out: Any) -> None:
        if not torch.is_grad_enabled():
            return
        rule = lookup(func)
        if rule is FREE:
            return
        if rule is None:
            self.uncounted = True
            return
        cost = rule(args, kwargs or {}, out)
        self.flops += cost.flops
        self.macs += cost.macs


def _packet(op: str) -> str:
    """``"aten.mm.default"`` -> ``"mm"``."""
    return op.split(".")[1] if op.count(".") >= 2 else op


def _attention_recompute(node) -> int:
    """MACs of ``Q K^T`` the fused attention backward of ``node`` recomputes: its kernels'
    ``(3 d_qk + 2 d_v)`` less twice the forward's ``(d_qk + d_v)`` (:mod:`fxinspect.rules.attention`)."""
    backward = sum(c.macs for c in node.backward_aten if _packet(c.op) in FUSED_BACKWARDS)
    if not backward:
        return 0
    forward = sum(c.macs for c in node.aten if _packet(c.op) in FUSED_FORWARDS)
    return max(0, backward - 2 * forward)


def _tokens(report: Report) -> int | None:
    """Tokens of the batch: the elements of its first integer input (``input_ids``)."""
    found = next((t for t in report.inputs if t.dtype in ("int64", "int32") and len(t.shape) == 2), None)
    return found.numel if found is not None else None
