"""Records of the analysis as a whole: totals, findings, how it ran, the report.

Example
-------
>>> str(NonFiniteKind("nan+inf")), SCHEMA_VERSION
('nan+inf', 7)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any  # noqa: F401 (the annotation of the records' registered figures)

from ..choices import Choice
from .communication import Communication
from .declared import Derived, with_figures
from .device_spec import DeviceSpec
from .memory import MemoryRecord
from .nodes import AtenCall, ModuleRecord, NodeRecord, TensorMeta

SCHEMA_VERSION = 7  # 7: report.time_model is the DeviceSpec; 6: comm_bytes per node, module and total


class NonFiniteKind(Choice):
    """What a non-finite tensor holds."""

    NAN = "nan"
    INF = "inf"
    BOTH = "nan+inf"


@dataclass(frozen=True)
class SharedParameter:
    """A parameter or buffer reachable under several names; counted once, as ``name``."""

    name: str
    aliases: tuple[str, ...]
    numel: int


@dataclass(frozen=True)
class UncountedOp:
    """An aten op without a FLOP rule: totals that include its nodes are partial."""

    op: str
    calls: int
    nodes: tuple[str, ...]
    modules: tuple[str, ...]


@dataclass(frozen=True)
class NonFinite:
    """Where NaN/Inf first appeared in the forward pass, and what it reached.

    ``root_cause`` is the first node whose output holds a NaN or Inf while all of its
    inputs were finite (``kind`` says which); when a model input, parameter or buffer is
    already non-finite, that tensor is named in ``sources`` and ``root_cause`` is the
    first node that read it. ``inputs`` are the root cause's input tensors with
    their statistics; ``downstream`` every later node whose output is non-finite.

    For the backward (``grad_nonfinite``): ``root_cause`` is the node whose backward
    turned finite gradients (``inputs``: those reaching its outputs) into non-finite
    ones; ``downstream`` every node, in backward order, whose output gradient is not finite.
    """

    root_cause: str
    module_path: str
    module_type: str
    kind: NonFiniteKind
    inputs: tuple[TensorMeta, ...]
    downstream: tuple[str, ...]
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class CaptureInfo:
    """Which capture tier produced the graph, and why earlier tiers did not."""

    method: str
    notes: tuple[str, ...] = ()
    failures: tuple[tuple[str, str], ...] = ()  # (tier, one-line reason)
    # modules whose torch.utils.checkpoint the capture traced through (its program keeps
    # what they would free and never recomputes them; the notes say so)
    lost_checkpoints: tuple[str, ...] = ()


@dataclass(frozen=True)
class TimingInfo:
    """How latency was measured; all times are medians in seconds."""

    device: str
    warmup: int
    repeats: int
    forward: float  # whole instrumented forward, first probe to last
    plain_forward: float  # the captured program without probes
    node_sum: float  # sum of per-node medians
    batch_size: int | None
    throughput: float | None  # samples per second at ``plain_forward``, when a batch size is known
    backward: float | None = None  # with a backward: the timed backward, hooks on every autograd node
    plain_backward: float | None = None  # the backward of the program without probes or hooks
    backward_node_sum: float | None = None  # sum of per-node backward medians
    plain_forward_iqr: float | None = None  # interquartile range of the plain forward's times
    plain_forward_p10: float | None = None  # the plain forward's 10th and 90th percentile times
    plain_forward_p90: float | None = None
    # with a backward: a whole training step of the plain program (forward, loss, backward)
    training_step: float | None = None
    training_step_p10: float | None = None
    training_step_p90: float | None = None

    @property
    def inputs_per_second(self) -> float | None:
        """Inputs (samples of the batch) per second at the plain forward's median."""
        return self.throughput

    @property
    def training_inputs_per_second(self) -> float | None:
        """Inputs per second through a whole training step (``None`` without a backward)."""
        if self.batch_size is None or not self.training_step:
            return None
        return self.batch_size / self.training_step

    @property
    def node_sum_ratio(self) -> float:
        """Per-node sum over the plain forward: 1.0 means the parts add up to the whole."""
        return self.node_sum / self.plain_forward if self.plain_forward else float("nan")

    @property
    def backward_node_sum_ratio(self) -> float | None:
        """Per-node backward sum over the plain backward (``None`` without a backward)."""
        if self.backward_node_sum is None or not self.plain_backward:
            return None
        return self.backward_node_sum / self.plain_backward


@dataclass(frozen=True)
@with_figures(after="buffer_bytes", summed_only=True, defaults=False)
class Totals(Derived):
    """Whole-model figures; ``partial`` when some aten op had no FLOP rule.

    The summed figures of :mod:`fxinspect.records.fields` follow ``buffer_bytes``: sums over
    every op node of the report.
    """

    params: int
    trainable_params: int
    buffers: int
    param_bytes: int
    buffer_bytes: int
    # (the summed figures of fxinspect.records.fields go here)
    partial: bool

    @property
    def frozen_params(self) -> int:
        return self.params - self.trainable_params


@dataclass(frozen=True)
class Environment:
    """Where the report was made."""

    torch_version: str
    python_version: str
    platform: str
    device: str
    num_threads: int
    virtual: bool = False  # run on fake tensors (meta device): no values, no timing


@dataclass(frozen=True)
class ReportRecord:
    """Everything ``fxinspect.analyze`` measured, immutable, in base units.

    ``nodes`` are in graph order; ``modules`` maps a dotted path to its record (``""``
    is the root) in the model's ``named_modules`` order. ``unattributed`` are aten ops
    that ran while no graph node was running (between probes, or the user's own code
    around the model under ``inspect``: the loss, the optimizer); ``backward_unattributed``
    the backward's ops that belong to no node (the loss's backward, accumulating into a
    parameter's ``.grad``). Both are listed apart from the nodes' figures and the totals,
    never dropped. :class:`fxinspect.Report` adds the views to this record.
    """

    nodes: tuple[NodeRecord, ...]
    modules: Mapping[str, ModuleRecord]
    totals: Totals
    capture: CaptureInfo
    uncounted: tuple[UncountedOp, ...]
    nonfinite: NonFinite | None
    shared: tuple[SharedParameter, ...]
    inputs: tuple[TensorMeta, ...]
    outputs: tuple[TensorMeta, ...]
    timing: TimingInfo | None
    environment: Environment
    unattributed: tuple[AtenCall, ...] = ()
    backward_unattributed: tuple[AtenCall, ...] = ()
    grad_nonfinite: NonFinite | None = None  # where NaN/Inf first appeared in the backward
    memory: MemoryRecord | None = None  # the memory pass's model and measurement
    time_model: DeviceSpec | None = None  # the device the predicted latencies are for
    communication: Communication | None = None  # a parallel step's collectives (one rank's)
    schema_version: int = SCHEMA_VERSION

    def node(self, name: str) -> NodeRecord:
        """The record of the node called ``name``."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node named {name!r}; nodes are {[n.name for n in self.nodes][:20]}...")
