"""Records of the graph's parts: tensors, aten calls, op nodes and modules.

Frozen dataclasses in base units (FLOPs, bytes, seconds), no formatting. The per-node
figures are declared once, in :mod:`fxinspect.records.fields`, and inserted into
:class:`NodeRecord` and :class:`ModuleRecord` (and ``Totals``) from there
(:mod:`fxinspect.records.declared`).

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
from typing import Any, TypeVar

from ..choices import Choice
from .declared import Derived, with_figures

_R = TypeVar("_R")

OP_KINDS = frozenset({"call_function", "call_method", "call_module"})
"""torch.fx node kinds that run something (the others: placeholder, get_attr, output)."""

RECEPTIVE_STOPS = "receptive field: stops at "
"""How the capture note naming where receptive fields were lost begins (the summary reads it)."""

_R = TypeVar("_R")


def _positional(cls: type[_R]) -> type[_R]:
    """Give a frozen record ``cls.of(*values)``: every field, in order, without ``__init__``.

    ``cls`` is a frozen dataclass with ``__slots__`` (a report holds several records per
    node: slots save each one a ``__dict__``). Its ``__init__`` sets each field through
    ``object.__setattr__``; ``of`` (generated, as dataclasses generate ``__init__``)
    fills an instance of a twin class (the same bases and slots, so the same layout, and
    not frozen: a plain attribute store per field, the interpreter's fastest) and then
    makes it a ``cls``, at about a third of the cost (a report of thousands of nodes
    builds a record per node, output and aten call). The result is the same record
    (``==``, hashing, repr, ``type``), for code that builds records from values it
    already checked.
    """
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    twin = type(f"_{cls.__name__}Filling", cls.__bases__, {"__slots__": cls.__slots__})  # type: ignore[attr-defined]
    source = (
        f"def of({', '.join(names)}):\n    record = new(twin)\n"
        + "".join(f"    record.{name} = {name}\n" for name in names)
        + "    record.__class__ = cls\n    return record\n"
    )
    object.__new__(twin).__class__ = cls  # (a layout that differs fails here, at import)
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls, "twin": twin}
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


class OpStatus(Choice):
    """How an aten op's cost was known: priced by a rule, free by its nature, or not."""

    COUNTED = "counted"
    FREE = "free"  # views, metadata, allocation: no arithmetic, no data moved
    UNCOUNTED = "uncounted"  # no rule: totals that include it are partial


@_positional
@dataclass(frozen=True, slots=True)
class AtenCall:
    """One aten op as issued by a graph node, its calls and costs summed; ``kind``, what
    the op's name does not tell of the kernel it ran (a convolution's ``"depthwise"``,
    ``"grouped"`` or ``"dense"``, a batch norm's ``"train"``: :mod:`fxinspect.rules.kinds`),
    else ``""``."""

    op: str
    calls: int
    flops: int
    macs: int
    bytes_read: int
    bytes_written: int
    status: OpStatus
    kind: str = ""


@_positional
@dataclass(frozen=True, slots=True)
@with_figures(after="outputs", summed_only=False, defaults=True)
class NodeRecord(Derived):
    """One node of the captured graph: what ran, where, on what, at what cost.

    After ``outputs`` come the figures declared in :mod:`fxinspect.records.fields`:
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
    # (the figures of fxinspect.records.fields go here)
    aten: tuple[AtenCall, ...] = ()
    grad_outputs: tuple[TensorMeta, ...] | None = None  # gradients w.r.t. the outputs, when a backward ran
    backward_aten: tuple[AtenCall, ...] = ()  # the aten calls of its backward, when one ran
    # which call of each module on module_path ran the node (root's child first, from 0):
    # ``(0, 2)`` is in the first call of ``a`` and the third of ``a.b``
    call: tuple[int, ...] = ()
    # the receptive field of its first output (fxinspect.run.receptive.fields): input positions
    # per spatial dimension of the model's input, "global", or None (not spatial, unknown)
    receptive_field: tuple[int, ...] | str | None = None
    effective_stride: tuple[float, ...] | None = None  # the field's jump per dimension
    effective_padding: tuple[float, ...] | None = None  # positions the first window starts before the input
    # what autograd saved for the backward while the node ran (the memory pass, grad on;
    # a records.memory.Saves: "own", "inputs" or "nothing"), None when not modelled. A
    # checkpoint's recomputation stops at the last node that saves: see planning.recompute
    saves: str | None = None

    @property
    def nonfinite(self) -> bool:
        return bool(self.nan_count) or bool(self.inf_count)

    @property
    def nonfinite_values(self) -> int:
        """NaN and Inf values in its outputs (0 when they were not read)."""
        return (self.nan_count or 0) + (self.inf_count or 0)

    @property
    def is_op(self) -> bool:
        return self.op in OP_KINDS


@dataclass(frozen=True)
@with_figures(after="own_buffers", summed_only=True, defaults=False)
class ModuleRecord(Derived):
    """One module of the model: its parameters and the summed figures of its nodes.

    ``params``/``trainable_params``/``buffers`` count unique tensors in the subtree (a
    tied weight once); ``own_*`` only tensors registered on this module itself.
    After ``own_buffers`` come the summed figures of :mod:`fxinspect.records.fields`
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
    # (the summed figures of fxinspect.records.fields go here)
    nodes: tuple[str, ...]
    children: tuple[str, ...]  # full dotted paths of the direct children
    # the module that ran as one op with this one inside (its work is counted there; "" is
    # the root); None when this module's own figures are broken down
    counted_in: str | None = None
    # the receptive field of its output: that of its last op node (see NodeRecord)
    receptive_field: tuple[int, ...] | str | None = None
    effective_stride: tuple[float, ...] | None = None
    effective_padding: tuple[float, ...] | None = None

    @property
    def frozen_params(self) -> int:
        return self.params - self.trainable_params

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1] if self.path else ""
