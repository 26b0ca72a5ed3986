"""Records of memory: what a run held, when, and what was alive at its peak.

Bytes are storage bytes: a view or an in-place result shares its base's storage and
counts once. ``resident`` memory (parameters, buffers, the example inputs, optimizer
state) exists before the run; every other figure is memory the run allocated on top
of it, so ``peak`` is comparable with an allocator's growth during the same run.

Example
-------
>>> t = LiveTensor("relu", "layer1", "ReLU", (2, 64), "torch.float32", 512, TensorRole.SAVED, Phase.FORWARD)
>>> str(t.role), t.nbytes
('saved', 512)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..choices import Choice

__all__ = ["LiveTensor", "MemoryRecord", "Phase", "Saves", "TensorRole"]


class Phase(Choice):
    """Which part of a training step was running."""

    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"


class Saves(Choice):
    """What autograd saved for the backward while a node ran (``NodeRecord.saves``)."""

    OWN = "own"  # a tensor the node made: its output or a temporary (torch packs it after the op)
    INPUTS = "inputs"  # only tensors that existed before it: its inputs, parameters (packed before)
    NOTHING = "nothing"


class TensorRole(Choice):
    """Why a storage the run allocated was alive."""

    ACTIVATION = "activation"  # a forward node's output or temporary, not saved for backward
    SAVED = "saved"  # saved by autograd for the backward
    GRADIENT = "gradient"  # a gradient flowing through the backward
    PARAMETER_GRADIENT = "parameter gradient"  # ends up in a parameter's ``.grad``
    OTHER = "other"  # made outside every node (the loss, the probes' caller)
    SCRATCH = "scratch"  # a kernel's working memory, taken and given back inside one op
    STATE = "state"  # a state object's tensor given to the step (a KV cache), until the step replaces it


@dataclass(frozen=True)
class LiveTensor:
    """One storage alive at the peak: who made it, its shape, its bytes.

    ``node`` is the fx node whose forward (or, in the backward phase, whose backward)
    allocated it; ``""`` when no node was running. ``shape`` and ``dtype`` are those of
    the tensor that first held the storage.
    """

    node: str
    module_path: str
    module_type: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    role: TensorRole
    phase: Phase


@dataclass(frozen=True)
class MemoryRecord:
    """The memory of one run: resident bytes, the timeline, the peak and what made it.

    * ``params``, ``buffers``, ``inputs``: resident bytes, each storage once.
    * ``timeline``: ``(op index, bytes allocated by the run and alive)`` after every
      aten op and every free; ``backward_start`` is the op index where the backward began
      (``None`` without a backward).
    * ``peak`` and ``peak_node``/``peak_phase``: the highest point of the timeline (bytes
      on top of resident memory); ``alive_at_peak`` lists the storages alive then, and
      their ``nbytes`` sum to ``peak`` exactly. ``forward_peak`` is the forward's own.
    * ``saved``: bytes autograd saved for the backward, each storage once (resident
      tensors it saved, such as weights, are not counted: they exist anyway).
    * ``gradients``: bytes of the parameters' ``.grad`` after the backward.
    * ``held_after_backward``: bytes the run still holds when the backward ends, as a
      training loop that keeps the model's output and the loss leaves them: the output,
      the loss and the gradients (what the optimizer's ``step()`` runs beside).
    * ``optimizer``/``optimizer_state``/``optimizer_step``: with ``optimizer=``, its class,
      the bytes of its state (Adam: two moments and a step per parameter) and the bytes
      its ``step()`` allocates on top of that state while it runs.
    * ``measured_*``: the same run's peak growth as the allocator saw it (``measured_by``
      says which: ``torch.profiler`` on CPU, ``torch.cuda`` statistics on CUDA), ``None``
      on the meta device; ``measured_peak_node`` the node (or whose backward) running
      then. The estimate counts tensors; the allocator also sees the scratch memory
      kernels take and give back inside one op.
    * ``measured_eager_peak``/``measured_eager_forward_peak``: the allocator's peak growth
      over the model's own eager call (and backward), the run the estimate models: the
      program above frees each value at its last use, the model keeps a module's
      arguments until it returns and its locals until its forward does.
    * ``node_starts``: ``(op index, node)`` where each forward node began, so that a point
      of the timeline can be named by the node that was running.
    * ``notes``: what the estimate assumed (the kernels' scratch: where it was learnt,
      what was left out).
    """

    device: str
    params: int
    buffers: int
    inputs: int
    timeline: tuple[tuple[int, int], ...]
    backward_start: int | None
    peak: int
    peak_node: str
    peak_phase: Phase
    forward_peak: int
    forward_peak_node: str
    alive_at_peak: tuple[LiveTensor, ...]
    saved: int | None = None
    gradients: int | None = None
    optimizer: str | None = None
    optimizer_state: int | None = None
    optimizer_step: int | None = None
    measured_by: str | None = None
    measured_peak: int | None = None
    measured_forward_peak: int | None = None
    measured_peak_node: str | None = None  # the node running at the allocator's peak (CPU)
    held_after_backward: int | None = None
    measured_eager_peak: int | None = None
    measured_eager_forward_peak: int | None = None
    node_starts: tuple[tuple[int, str], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def resident(self) -> int:
        """Parameters, buffers, inputs and optimizer state: held before the run starts."""
        return self.params + self.buffers + self.inputs + (self.optimizer_state or 0)

    @property
    def total_peak(self) -> int:
        """The most memory the step holds at once, resident memory included.

        With an optimizer its state is resident through the forward and backward (a
        step after the first), and its ``step()`` runs while what the backward left is
        held: the gradients, and the output and the loss (a loop that keeps them).
        """
        run = self.resident + self.peak
        if self.optimizer_step is None:
            return run
        held = self.held_after_backward if self.held_after_backward is not None else (self.gradients or 0)
        return max(run, self.resident + held + self.optimizer_step)
