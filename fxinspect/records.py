"""The report's records: frozen dataclasses of every op and module, in base units.

Everything here is in base units (FLOPs, bytes, seconds) and carries no formatting;
views turn these records into text, pictures and files. This module imports nothing
from capture, the run layer, the views or torch: it is the bottom of the package.
The per-node figures (FLOPs, bytes, latency, ...) are declared once, in
:mod:`fxinspect.fields`, and inserted into :class:`NodeRecord`, :class:`ModuleRecord`
and :class:`Totals` from there.

Example
-------
>>> NodeRecord("relu", "call_function", "torch.relu", "relu", "", "Net", ("x",), (), (), flops=8).flops
8
>>> OpStatus("free") is OpStatus.FREE
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, Mapping, TypeVar

from .fields import with_figures

SCHEMA_VERSION = 2

OP_KINDS = frozenset({"call_function", "call_method", "call_module"})
"""torch.fx node kinds that run something (the others: placeholder, get_attr, output)."""

_R = TypeVar("_R")

def _positional(cls: type[_R]) -> type[_R]:
    """Give a frozen record ``cls.of(*values)``: every field, in order, without ``__init__``.

    ``cls`` is a frozen dataclass with ``__slots__`` (a report holds several records per
    node: slots save each one a ``__dict__``). Its ``__init__`` sets each field through
    ``object.__setattr__``; ``of`` (generated, as dataclasses generate ``__init__``)
    calls the slots' setters directly, at about half the cost. The result is the same
    record (``==``, hashing, repr), for code that builds records from values it
    already checked.
    """
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    source = (
        f"def of({', '.join(names)}):\n    record = new(cls)\n"
        + "".join(f"    set_{name}(record, {name})\n" for name in names)
        + "    return record\n"
    )
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    namespace.update({f"set_{name}": getattr(cls, name).__set__ for name in names})  # the slots' setters
    exec(source, namespace)
    cls.of = staticmethod(namespace["of"])  # type: ignore[attr-defined]
    return cls


def _same_float(a: float | None, b: float | None) -> bool:
    """Float equality in which NaN equals NaN (a NaN statistic is a finding, not noise)."""
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


@_positional
@dataclass(frozen=True, eq=False, slots=True)
class ValueStats:
    """Statistics of one floating tensor's values, computed in float32 or wider.

    ``min``/``max``/``mean``/``std`` are NaN when the tensor holds a NaN; ``std`` is
    the population standard deviation (0 for a single element).
    """

    min: float
    max: float
    mean: float
    std: float
    nan_count: int
    inf_count: int

    @property
    def finite(self) -> bool:
        return self.nan_count == 0 and self.inf_count == 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ValueStats):
            return NotImplemented
        return (
            all(_same_float(getattr(self, n), getattr(other, n)) for n in ("min", "max", "mean", "std"))
            and self.nan_count == other.nan_count
            and self.inf_count == other.inf_count
        )

    __hash__ = None  # type: ignore[assignment]


@_positional
@dataclass(frozen=True, slots=True)
class TensorMeta:
    """Shape, dtype, device and size of one tensor; ``stats`` when values were read."""

    shape: tuple[int, ...]
    dtype: str
    device: str
    nbytes: int
    stats: ValueStats | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


class OpStatus(str, Enum):
    """How an aten op's cost was known: priced by a rule, free by its nature, or not."""

    COUNTED = "counted"
    FREE = "free"  # views, metadata, allocation: no arithmetic, no data moved
    UNCOUNTED = "uncounted"  # no rule: totals that include it are partial

    def __str__(self) -> str:
        return self.value


class NonFiniteKind(str, Enum):
    """What a non-finite tensor holds."""

    NAN = "nan"
    INF = "inf"
    BOTH = "nan+inf"

    def __str__(self) -> str:
        return self.value


@_positional
@dataclass(frozen=True, slots=True)
class AtenCall:
    """One aten op as issued by a graph node, its calls and costs summed."""

    op: str
    calls: int
    flops: int
    macs: int
    bytes_read: int
    bytes_written: int
    status: OpStatus


@_positional
@dataclass(frozen=True, slots=True)
@with_figures(after="outputs", summed_only=False, defaults=True)
class NodeRecord:
    """One node of the captured graph: what ran, where, on what, at what cost.

    After ``outputs`` come the figures declared in :mod:`fxinspect.fields`:
    ``flops``/``macs``/``bytes_*`` are sums over ``aten`` (every aten op the node
    issued, inside leaf modules too). ``latency`` is a median in seconds, ``None`` when
    timing did not run; ``nan_count``/``inf_count`` are ``None`` when values were not
    read (meta tensors, ``check_finite=False``).
    """

    name: str
    op: str  # torch.fx op kind: placeholder, get_attr, call_function, call_method, call_module, output
    target: str
    label: str  # short op name used to group by op: "conv2d", "Linear", "add"
    module_path: str
    module_type: str
    args: tuple[str, ...]
    inputs: tuple[TensorMeta, ...]
    outputs: tuple[TensorMeta, ...]
    # (the figures of fxinspect.fields go here)
    aten: tuple[AtenCall, ...] = ()

    @property
    def nonfinite(self) -> bool:
        return bool(self.nan_count) or bool(self.inf_count)

    @property
    def is_op(self) -> bool:
        return self.op in OP_KINDS


@dataclass(frozen=True)
@with_figures(after="own_buffers", summed_only=True, defaults=False)
class ModuleRecord:
    """One module of the model: its parameters and the summed figures of its nodes.

    ``params``/``trainable_params``/``buffers`` count unique tensors in the subtree (a
    tied weight once); ``own_*`` only tensors registered on this module itself.
    After ``own_buffers`` come the summed figures of :mod:`fxinspect.fields`
    (``flops`` .. ``latency``): exact sums over ``nodes`` (this module's and its
    descendants' nodes). ``calls`` is how many times the module ran in the forward.
    """

    path: str
    type: str
    depth: int
    calls: int
    params: int
    trainable_params: int
    buffers: int
    own_params: int
    own_buffers: int
    # (the summed figures of fxinspect.fields go here)
    nodes: tuple[str, ...]
    children: tuple[str, ...]  # full dotted paths of the direct children
    counted_in: str = ""  # the leaf module whose node ran this one; its work is counted there

    @property
    def frozen_params(self) -> int:
        return self.params - self.trainable_params

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1] if self.path else ""


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

    @property
    def node_sum_ratio(self) -> float:
        """Per-node sum over the plain forward: 1.0 means the parts add up to the whole."""
        return self.node_sum / self.plain_forward if self.plain_forward else float("nan")


@dataclass(frozen=True)
@with_figures(after="buffer_bytes", summed_only=True, defaults=False)
class Totals:
    """Whole-model figures; ``partial`` when some aten op had no FLOP rule.

    The summed figures of :mod:`fxinspect.fields` follow ``buffer_bytes``: sums over
    every op node of the report.
    """

    params: int
    trainable_params: int
    buffers: int
    param_bytes: int
    buffer_bytes: int
    # (the summed figures of fxinspect.fields go here)
    partial: bool

    @property
    def frozen_params(self) -> int:
        return self.params - self.trainable_params

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte moved."""
        moved = self.bytes_read + self.bytes_written
        return self.flops / moved if moved else float("nan")


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
    that ran while no graph node was running (between probes); they are listed, never
    dropped. :class:`fxinspect.Report` adds the views to this record.
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
    schema_version: int = SCHEMA_VERSION

    def node(self, name: str) -> NodeRecord:
        """The record of the node called ``name``."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node named {name!r}; nodes are {[n.name for n in self.nodes][:20]}...")
