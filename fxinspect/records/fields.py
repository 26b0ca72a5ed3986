"""The one declaration of per-node figures: name, unit, and how each sums into modules.

A figure is a number every op node may carry (FLOPs, bytes, latency, ...). Declaring it
here gives :class:`~fxinspect.records.NodeRecord` the field (and, when it sums,
:class:`~fxinspect.records.ModuleRecord` and :class:`~fxinspect.records.Totals` too);
assembly sums it into modules and totals as its ``aggregate`` says, and the views find
its header and unit here. A new figure is one entry below and the pass that measures it.

Example
-------
>>> [f.name for f in FIELDS if f.aggregate is Aggregate.EXACT]
['flops', 'macs', 'bytes_read', 'bytes_written']
>>> FIELD["latency"].unit
<Unit.SECOND: 'second'>
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from ..choices import Choice

__all__ = ["FIELD", "FIELDS", "SUMMED", "Aggregate", "Derived", "Field", "Unit", "add_up", "sums", "with_figures"]


class Unit(Choice):
    """What one unit of a figure is (values are stored in base units, never scaled)."""

    FLOP = "flop"
    MAC = "mac"
    BYTE = "byte"
    SECOND = "second"
    COUNT = "count"


class Aggregate(Choice):
    """How a node figure sums into its modules and the totals."""

    EXACT = "exact"  # integers, summed exactly; every node has one (0 when it did nothing)
    KNOWN = "known"  # summed when every part is known; None when any part is None
    NONE = "none"  # a node's own observation; modules and totals do not carry it


@dataclass(frozen=True)
class Field:
    """One per-node figure."""

    name: str
    type: str  # the annotation the records get, as text (records resolve it)
    unit: Unit
    aggregate: Aggregate
    header: str  # column title in tables
    doc: str
    default: Any = None  # a node's value when no pass produced one

    @property
    def sums(self) -> bool:
        return self.aggregate is not Aggregate.NONE


FIELDS: tuple[Field, ...] = (
    Field("flops", "int", Unit.FLOP, Aggregate.EXACT, "FLOPs", "floating-point operations (2 per MAC)", 0),
    Field("macs", "int", Unit.MAC, Aggregate.EXACT, "MACs", "multiply-accumulates of matmul-like ops", 0),
    Field("bytes_read", "int", Unit.BYTE, Aggregate.EXACT, "read", "tensor bytes the node's aten ops read", 0),
    Field("bytes_written", "int", Unit.BYTE, Aggregate.EXACT, "written", "tensor bytes they wrote", 0),
    Field("latency", "float | None", Unit.SECOND, Aggregate.KNOWN, "latency", "median seconds; None when not timed"),
    Field("latency_iqr", "float | None", Unit.SECOND, Aggregate.NONE, "IQR", "interquartile range of its times"),
    # the time model (analyze(device_spec=...)): None without one
    Field(
        "predicted_latency",
        "float | None",
        Unit.SECOND,
        Aggregate.KNOWN,
        "predicted",
        "seconds the roofline gives: per aten op max(FLOPs / peak, bytes / bandwidth) + launch",
    ),
    Field("nan_count", "int | None", Unit.COUNT, Aggregate.NONE, "NaN", "NaN values in the outputs; None when unread"),
    Field("inf_count", "int | None", Unit.COUNT, Aggregate.NONE, "Inf", "Inf values in the outputs; None when unread"),
    # the backward of the autograd ops a node created; None when no backward ran
    Field("backward_flops", "int | None", Unit.FLOP, Aggregate.KNOWN, "bwd FLOPs", "FLOPs of the node's backward"),
    Field("backward_macs", "int | None", Unit.MAC, Aggregate.KNOWN, "bwd MACs", "MACs of the node's backward"),
    Field("backward_bytes_read", "int | None", Unit.BYTE, Aggregate.KNOWN, "bwd read", "bytes its backward read"),
    Field("backward_bytes_written", "int | None", Unit.BYTE, Aggregate.KNOWN, "bwd written", "bytes it wrote"),
    Field(
        "backward_latency",
        "float | None",
        Unit.SECOND,
        Aggregate.KNOWN,
        "bwd latency",
        "median seconds of its backward",
    ),
    Field(
        "backward_predicted_latency",
        "float | None",
        Unit.SECOND,
        Aggregate.KNOWN,
        "bwd predicted",
        "the time model's seconds for its backward's aten ops",
    ),
    # the memory pass: storage bytes (a view or in-place result shares its base's, counted once)
    Field("output_bytes", "int | None", Unit.BYTE, Aggregate.KNOWN, "out mem", "new storage bytes of its outputs"),
    Field(
        "saved_bytes",
        "int | None",
        Unit.BYTE,
        Aggregate.KNOWN,
        "saved",
        "bytes it allocated that autograd kept for the backward",
    ),
    Field(
        "measured_growth",
        "int | None",
        Unit.BYTE,
        Aggregate.KNOWN,
        "alloc growth",
        "allocator bytes held after the node minus before (measured)",
    ),
    # a parallel step's collectives (fxinspect.parallel): what this rank sent
    Field(
        "comm_bytes",
        "int | None",
        Unit.BYTE,
        Aggregate.KNOWN,
        "sent",
        "bytes this rank sent in collectives issued as the node or its backward ran (parallel= only)",
    ),
)

FIELD: dict[str, Field] = {f.name: f for f in FIELDS}
assert len(FIELD) == len(FIELDS), "a figure is declared twice"

SUMMED: tuple[Field, ...] = tuple(f for f in FIELDS if f.sums)
"""The figures that sum into modules and totals, in declaration order."""


class Derived:
    """Figures derived from the declared ones, the same on a node, a module and the totals
    (the records inherit it): each is written once, here."""

    @property
    def bytes_moved(self) -> int:
        """Bytes read plus bytes written: the traffic of the forward's aten ops."""
        return self.bytes_read + self.bytes_written

    @property
    def backward_bytes_moved(self) -> int | None:
        """The backward's traffic; ``None`` when no backward ran."""
        if self.backward_bytes_read is None or self.backward_bytes_written is None:
            return None
        return self.backward_bytes_read + self.backward_bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity: FLOPs per byte moved (NaN when nothing moved)."""
        moved = self.bytes_moved
        return self.flops / moved if moved else float("nan")


def add_up(field: Field, values: Iterable[Any]) -> Any:
    """The sum of one figure's ``values`` as its aggregate says.

    ``EXACT`` figures are integers summed exactly; a ``KNOWN`` sum is ``None`` as soon
    as one part is (an unmeasured part makes the whole unknown, never smaller).

    >>> add_up(FIELD["flops"], [3, 4]), add_up(FIELD["latency"], [0.5, None])
    (7, None)
    """
    if field.aggregate is Aggregate.EXACT:
        return sum(values)
    if field.aggregate is Aggregate.KNOWN:
        total = 0  # ints stay ints (backward FLOPs), floats become floats (latency)
        for v in values:
            if v is None:
                return None
            total += v
        return total
    raise ValueError(f"{field.name} is a node's own observation ({field.aggregate}): it does not sum")


def sums(records: Iterable[Any], measured: Container[str] | None = None) -> dict[str, Any]:
    """Every summed figure over ``records`` (nodes, modules or totals), by field name.

    With ``measured``, a figure that may be unknown and is not in it (no pass measured
    it) is ``None`` whatever the records hold. One C-level pass per figure: this runs
    over every node of graphs with thousands of them.
    """
    records = records if isinstance(records, (list, tuple)) else list(records)
    out = {}
    for f in SUMMED:
        if measured is not None and f.aggregate is not Aggregate.EXACT and f.name not in measured:
            out[f.name] = None
        else:
            out[f.name] = add_up(f, map(attrgetter(f.name), records))
    return out


def with_figures(after: str, summed_only: bool, defaults: bool) -> Callable[[type], type]:
    """Insert the declared figures into a record class's annotations, after ``after``.

    Applied below ``@dataclass``: the dataclass then has the figures as ordinary fields.
    ``summed_only`` keeps only figures that sum into modules; ``defaults`` gives each
    its declared default (records built field by field), otherwise every one is required.
    """

    def insert(cls: type) -> type:
        own = cls.__dict__.get("__annotations__", {})
        if after not in own:
            raise TypeError(f"{cls.__name__} has no field {after!r} to put the figures after")
        merged: dict[str, Any] = {}
        for name, annotation in own.items():
            merged[name] = annotation
            if name != after:
                continue
            for f in FIELDS:
                if summed_only and not f.sums:
                    continue
                if f.name in own:
                    raise TypeError(f"{cls.__name__}.{f.name} is a declared figure: declare it in fields.py only")
                merged[f.name] = f.type
                if defaults:
                    setattr(cls, f.name, f.default)
        cls.__annotations__ = merged
        return cls

    return insert
