"""The report model: frozen records of every op and module, and their aggregation.

Everything here is in base units (FLOPs, bytes, seconds) and carries no formatting;
views turn these records into text, pictures and files. This module imports nothing
from capture or instrumentation, and nothing from torch.

Example
-------
>>> import torch, fxinspect
>>> report = fxinspect.analyze(torch.nn.Linear(4, 2), torch.randn(3, 4), timing=False)
>>> report.totals.params, report.totals.macs     # 4*2 + 2 ; 3*4*2
(10, 24)
>>> report.modules[""].type
'Linear'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Iterable, Mapping, TypeVar

SCHEMA_VERSION = 1

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
    status: str  # "counted", "free" (views, metadata) or "uncounted"


@_positional
@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node of the captured graph: what ran, where, on what, at what cost.

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
    flops: int = 0
    macs: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    latency: float | None = None
    nan_count: int | None = None
    inf_count: int | None = None
    aten: tuple[AtenCall, ...] = ()

    @property
    def nonfinite(self) -> bool:
        return bool(self.nan_count) or bool(self.inf_count)

    @property
    def is_op(self) -> bool:
        return self.op in ("call_function", "call_method", "call_module")


@dataclass(frozen=True)
class ModuleRecord:
    """One module of the model: its parameters and the summed figures of its nodes.

    ``params``/``trainable_params``/``buffers`` count unique tensors in the subtree (a
    tied weight once); ``own_*`` only tensors registered on this module itself.
    ``flops`` .. ``latency`` are exact sums over ``nodes`` (this module's and its
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
    flops: int
    macs: int
    bytes_read: int
    bytes_written: int
    latency: float | None
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
    kind: str  # "nan", "inf" or "nan+inf"
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
class Totals:
    """Whole-model figures; ``partial`` when some aten op had no FLOP rule."""

    params: int
    trainable_params: int
    buffers: int
    param_bytes: int
    buffer_bytes: int
    flops: int
    macs: int
    bytes_read: int
    bytes_written: int
    latency: float | None
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
class Report:
    """Everything ``fxinspect.analyze`` measured, immutable, in base units.

    ``nodes`` are in graph order; ``modules`` maps a dotted path to its record (``""``
    is the root) in the model's ``named_modules`` order.

    Example
    -------
    >>> import torch, fxinspect
    >>> r = fxinspect.analyze(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()),
    ...                       torch.randn(2, 8), timing=False)
    >>> r.modules["0"].macs            # 2 * 8 * 4
    64
    >>> [n.label for n in r.nodes if n.is_op]
    ['Linear', 'ReLU']
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
    schema_version: int = SCHEMA_VERSION

    def node(self, name: str) -> NodeRecord:
        """The record of the node called ``name``."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node named {name!r}; nodes are {[n.name for n in self.nodes][:20]}...")

    # Views live in fxinspect.views; these are conveniences that import them lazily so
    # the report model itself stays free of tabulate, networkx and matplotlib.
    def table(self, by: str = "module", **options: Any) -> str:
        """A text table of modules, ops or nodes; see ``fxinspect.views.table.table``."""
        from .views.table import table

        return table(self, by=by, **options)

    def summary(self) -> str:
        """Totals, capture method, uncounted ops and non-finite findings, as text."""
        from .views.summary import summary

        return summary(self)

    def __str__(self) -> str:
        return self.summary()

    def to_networkx(self, level: str = "node", depth: int | None = None):
        """The dataflow graph as a ``networkx.DiGraph``; see ``fxinspect.graph``."""
        from .graph import to_networkx

        return to_networkx(self, level=level, depth=depth)

    def to_dict(self) -> dict[str, Any]:
        from .views.export import report_to_dict

        return report_to_dict(self)

    def to_json(self, path: Any = None) -> str:
        """The report as JSON text, also written to ``path`` when given."""
        from .views.export import to_json

        return to_json(self, path)

    @classmethod
    def from_json(cls, source: Any) -> "Report":
        """Read a report written by ``to_json`` from a path or a JSON string."""
        from .views.export import from_json

        return from_json(source)

    def to_dataframe(self, by: str = "node"):
        """Nodes or modules as a pandas DataFrame (needs the ``pandas`` extra)."""
        from .views.export import to_dataframe

        return to_dataframe(self, by=by)


# --------------------------------------------------------------------------- aggregation


@dataclass(frozen=True)
class ModuleInfo:
    """What the analyser knows of one module before its nodes are summed."""

    path: str
    type: str
    params: int
    trainable_params: int
    buffers: int
    own_params: int
    own_buffers: int
    children: tuple[str, ...]


_SUMMED = ("flops", "macs", "bytes_read", "bytes_written")


def _ancestors(path: str) -> Iterable[str]:
    """``"a.b.c"`` -> ``"a.b.c", "a.b", "a", ""``."""
    while path:
        yield path
        path = path.rpartition(".")[0]
    yield ""


def aggregate_modules(
    nodes: Iterable[NodeRecord],
    infos: Iterable[ModuleInfo],
    calls: Mapping[str, int],
    timed: bool,
    leaves: Iterable[str] = (),
) -> dict[str, ModuleRecord]:
    """Sum node figures into every enclosing module, exactly (integers; latency only
    when ``timed``). Modules strictly inside one of ``leaves`` (captured as one node)
    get ``counted_in`` set to that leaf.

    A node whose module path is not among ``infos`` (an attribute path the capture
    produced) is summed into its nearest known ancestor's subtree.
    """
    infos = list(infos)
    known = {i.path for i in infos}
    # per module: [flops, macs, bytes_read, bytes_written, latency, node names] (the order of _SUMMED)
    sums: dict[str, list[Any]] = {p: [0, 0, 0, 0, 0.0, []] for p in known}
    chains: dict[str, list[list[Any]]] = {}  # module path -> its known ancestors' sums
    for node in nodes:
        if not node.is_op:
            continue
        chain = chains.get(node.module_path)
        if chain is None:
            chain = chains[node.module_path] = [sums[p] for p in _ancestors(node.module_path) if p in known]
        flops, macs, read, written, name = node.flops, node.macs, node.bytes_read, node.bytes_written, node.name
        for acc in chain:
            acc[0] += flops
            acc[1] += macs
            acc[2] += read
            acc[3] += written
            acc[5].append(name)
            if timed:
                acc[4] += node.latency
    leaves = set(leaves)
    records = {}
    for info in infos:
        acc = sums[info.path]
        counted_in = next((p for p in _ancestors(info.path) if p in leaves and p != info.path), "")
        records[info.path] = ModuleRecord(
            path=info.path,
            type=info.type,
            depth=0 if not info.path else info.path.count(".") + 1,
            calls=calls.get(info.path, 0),
            params=info.params,
            trainable_params=info.trainable_params,
            buffers=info.buffers,
            own_params=info.own_params,
            own_buffers=info.own_buffers,
            **dict(zip(_SUMMED, acc)),
            latency=acc[4] if timed else None,
            nodes=tuple(acc[5]),
            children=info.children,
            counted_in=counted_in,
        )
    return records


def sum_nodes(nodes: Iterable[NodeRecord], name: str) -> int:
    """Sum one integer figure over the op nodes."""
    return sum(getattr(n, name) for n in nodes if n.is_op)
