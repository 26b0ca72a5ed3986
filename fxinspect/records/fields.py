"""The one declaration of per-node figures: what each is, how it sums and how views show it.

A figure is a number every op node may carry (FLOPs, bytes, latency, ...). Declaring it
here gives :class:`~fxinspect.records.NodeRecord` the field (and, when it sums,
:class:`~fxinspect.records.ModuleRecord` and :class:`~fxinspect.records.Totals` too);
assembly sums it into modules and totals as its ``aggregate`` says, and every view reads
the rest here: a table's header and format (by ``unit``), whether it is a default column
(``column``), what a diagram coloured by it says (``label``, ``word``, ``measured_by``),
whether the explorer and ``color_by=`` offer it (``color_by``) and how ``diff`` compares
it (``diff``). A new figure is one entry below and the pass that measures it, or, from
outside the package, :func:`fxinspect.register_figure` (:mod:`.registry`).

Example
-------
>>> [f.name for f in FIELDS if f.aggregate is Aggregate.EXACT]
['flops', 'macs', 'bytes_read', 'bytes_written']
>>> FIELD["latency"].unit, FIELD["output_bytes"].colour_key, FIELD["latency_iqr"].colour_key
(<Unit.SECOND: 'second'>, 'memory', None)
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from ..choices import Choice

__all__ = [
    "DERIVED",
    "FIELD",
    "FIELDS",
    "REGISTERED",
    "SUMMED",
    "Aggregate",
    "Diff",
    "Field",
    "Unit",
    "When",
    "add_up",
    "shown",
    "sums",
]


class Unit(Choice):
    """What one unit of a figure is (values are stored in base units, never scaled)."""

    FLOP = "flop"
    MAC = "mac"
    BYTE = "byte"
    SECOND = "second"
    COUNT = "count"
    JOULE = "joule"

    @property
    def symbol(self) -> str:
        """How a value's text names the unit (``J``); the views scale it with SI prefixes."""
        return {"joule": "J"}.get(self.value, self.value)


class Aggregate(Choice):
    """How a node figure sums into its modules and the totals."""

    EXACT = "exact"  # integers, summed exactly; every node has one (0 when it did nothing)
    KNOWN = "known"  # summed when every part is known; None when any part is None
    NONE = "none"  # a node's own observation; modules and totals do not carry it


class When(Choice):
    """A condition on a report under which a figure is a default table column."""

    ALWAYS = "always"
    TIMED = "timed"  # latency was measured (the total latency is known)
    BACKWARD = "backward"  # a backward ran (the total backward FLOPs are known)
    PRICED = "priced"  # the time model priced the ops (analyze(device_spec=...))
    KNOWN = "known"  # the figure's own total is known
    NONZERO = "nonzero"  # the figure's own total is known and not 0
    NOT_BY_OP = "not by op"  # the table is by module or by node (an op type's share of it says little)


class Diff(Choice):
    """How ``report.diff`` compares a figure of two reports' modules."""

    NONE = "none"  # not compared
    CHANGE = "change"  # compared: a difference is a change of the model
    NOISY = "noisy"  # compared and shown, but it differs run to run: never a change


@dataclass(frozen=True)
class Field:
    """One per-node figure and what the views need of it."""

    name: str
    type: str  # the annotation the records get, as text (records resolve it)
    unit: Unit  # the views format a value by it (count, bytes, seconds, SI prefixes)
    aggregate: Aggregate
    header: str  # column title in tables
    doc: str
    default: Any = None  # a node's value when no pass produced one
    label: str = ""  # what a colour bar, the explorer and a breakdown call it ("": the header)
    word: str | None = None  # written after a value on a diagram box (None: the header)
    measured_by: str = "every report has them"  # what makes a report carry it
    color_by: str | None = ""  # the name color_by= and the explorer take ("": its own; None: none)
    column: tuple[When, ...] | None = None  # a default table column when all hold (None: asked for only)
    diff: Diff = Diff.NONE
    read: str = ""  # the record attribute it is read from ("": its name; set for DERIVED figures)
    compute: Callable[[Any], Any] | None = None  # a registered figure: a node record's value

    @property
    def sums(self) -> bool:
        return self.aggregate is not Aggregate.NONE

    @property
    def colour_key(self) -> str | None:
        """The name ``color_by=`` takes for it, ``None`` when it colours nothing."""
        return None if self.color_by is None or not self.sums else self.color_by or self.name

    @property
    def title(self) -> str:
        return self.label or self.header

    @property
    def attribute(self) -> str:
        return self.read or self.name


_TIMED = "analyze(..., timing=True) measures it (not on the meta device)"
_BACKWARD = "analyze(..., backward=True) counts them"
_PRICED = "analyze(..., device_spec=...) prices it"

FIELDS: tuple[Field, ...] = (
    Field("flops", "int", Unit.FLOP, Aggregate.EXACT, "FLOPs", "floating-point operations (2 per MAC)", 0,
          column=(When.ALWAYS,), diff=Diff.CHANGE),
    Field("macs", "int", Unit.MAC, Aggregate.EXACT, "MACs", "multiply-accumulates of matmul-like ops", 0,
          column=(When.ALWAYS,), diff=Diff.CHANGE),
    Field("bytes_read", "int", Unit.BYTE, Aggregate.EXACT, "read", "tensor bytes the node's aten ops read", 0,
          label="bytes read"),
    Field("bytes_written", "int", Unit.BYTE, Aggregate.EXACT, "written", "tensor bytes they wrote", 0,
          label="bytes written"),
    Field("latency", "float | None", Unit.SECOND, Aggregate.KNOWN, "latency", "median seconds; None when not timed",
          word="", measured_by=_TIMED, column=(When.TIMED,), diff=Diff.NOISY),
    Field("latency_iqr", "float | None", Unit.SECOND, Aggregate.NONE, "IQR", "interquartile range of its times"),
    # the time model (analyze(device_spec=...)): None without one
    Field("predicted_latency", "float | None", Unit.SECOND, Aggregate.KNOWN, "predicted",
          "seconds the roofline gives: per aten op max(FLOPs / peak, bytes / bandwidth) + launch",
          label="predicted latency", measured_by=_PRICED, column=(When.PRICED,)),
    Field("nan_count", "int | None", Unit.COUNT, Aggregate.NONE, "NaN", "NaN values in the outputs; None when unread"),
    Field("inf_count", "int | None", Unit.COUNT, Aggregate.NONE, "Inf", "Inf values in the outputs; None when unread"),
    # the backward of the autograd ops a node created; None when no backward ran
    Field("backward_flops", "int | None", Unit.FLOP, Aggregate.KNOWN, "bwd FLOPs", "FLOPs of the node's backward",
          label="backward FLOPs", measured_by=_BACKWARD, column=(When.BACKWARD,)),
    Field("backward_macs", "int | None", Unit.MAC, Aggregate.KNOWN, "bwd MACs", "MACs of the node's backward",
          label="backward MACs", measured_by=_BACKWARD),
    Field("backward_bytes_read", "int | None", Unit.BYTE, Aggregate.KNOWN, "bwd read", "bytes its backward read",
          label="bytes the backward read", measured_by=_BACKWARD),
    Field("backward_bytes_written", "int | None", Unit.BYTE, Aggregate.KNOWN, "bwd written", "bytes it wrote",
          label="bytes the backward wrote", measured_by=_BACKWARD),
    Field("backward_latency", "float | None", Unit.SECOND, Aggregate.KNOWN, "bwd latency",
          "median seconds of its backward", label="backward latency",
          measured_by="analyze(..., backward=True, timing=True) measures it", column=(When.TIMED, When.BACKWARD)),
    Field("backward_predicted_latency", "float | None", Unit.SECOND, Aggregate.KNOWN, "bwd predicted",
          "the time model's seconds for its backward's aten ops", label="backward predicted latency",
          measured_by="analyze(..., backward=True, device_spec=...) prices it"),
    # the memory pass: storage bytes (a view or in-place result shares its base's, counted once)
    Field("output_bytes", "int | None", Unit.BYTE, Aggregate.KNOWN, "out mem", "new storage bytes of its outputs",
          label="bytes of new outputs", word="out", measured_by="analyze(..., memory=True) measures it",
          color_by="memory"),
    Field("saved_bytes", "int | None", Unit.BYTE, Aggregate.KNOWN, "saved",
          "bytes it allocated that autograd kept for the backward", label="bytes saved for the backward",
          measured_by="analyze(..., memory=True) measures it (with gradients on)", color_by="saved",
          column=(When.BACKWARD, When.NONZERO, When.NOT_BY_OP)),
    Field("measured_growth", "int | None", Unit.BYTE, Aggregate.KNOWN, "alloc growth",
          "allocator bytes held after the node minus before (measured)", label="allocator growth",
          word="growth", measured_by="analyze(..., measure_memory=True) measures it (not on the meta device)"),
    # a parallel step's collectives (fxinspect.parallel): what this rank sent
    Field("comm_bytes", "int | None", Unit.BYTE, Aggregate.KNOWN, "sent",
          "bytes this rank sent in collectives issued as the node or its backward ran (parallel= only)",
          label="bytes sent in collectives", measured_by="analyze(..., parallel=...) logs every collective",
          color_by="communication"),
)  # fmt: skip

DERIVED: tuple[Field, ...] = (
    # figures computed from the declared ones (records.declared.Derived): no record field of
    # their own; views show them like the others. ``bytes`` follows the bytes it adds up.
    Field("bytes", "int", Unit.BYTE, Aggregate.EXACT, "bytes r+w", "bytes read + written", 0,
          label="bytes read + written", word="moved", color_by="", column=(When.ALWAYS,), diff=Diff.CHANGE,
          read="bytes_moved"),
    Field("nonfinite", "int", Unit.COUNT, Aggregate.EXACT, "NaN/Inf", "NaN and Inf values in the outputs", 0,
          label="NaN/Inf values", measured_by="analyze(..., check_finite=True) reads them (not on the meta device)",
          read="nonfinite_values"),
)  # fmt: skip

FIELD: dict[str, Field] = {f.name: f for f in FIELDS}
assert len(FIELD) == len(FIELDS), "a figure is declared twice"

SUMMED: tuple[Field, ...] = tuple(f for f in FIELDS if f.sums)
"""The figures that sum into modules and totals, in declaration order."""

REGISTERED: dict[str, Field] = {}
"""Figures added from outside the package (:func:`fxinspect.register_figure`), by name:
records carry them in ``registered``; :mod:`.registry` adds and removes them."""


def shown() -> tuple[Field, ...]:
    """Every figure the views show, in the order they show them: the declared ones that
    sum, ``bytes`` after the bytes it adds up, ``nonfinite`` last of the built-in ones,
    then the registered ones in the order they were registered."""
    out: list[Field] = []
    for f in SUMMED:
        out.append(f)
        if f.name == "bytes_written":
            out.append(DERIVED[0])
    return (*out, DERIVED[1], *REGISTERED.values())


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
    over every node of graphs with thousands of them. Registered figures that sum come
    under ``registered`` (the records' field for them), only when there are any.
    """
    records = records if isinstance(records, (list, tuple)) else list(records)
    out = {}
    for f in SUMMED:
        if measured is not None and f.aggregate is not Aggregate.EXACT and f.name not in measured:
            out[f.name] = None
        else:
            out[f.name] = add_up(f, map(attrgetter(f.name), records))
    added = [f for f in REGISTERED.values() if f.sums]
    if added:  # (computed for every node it is, so always "measured")
        out["registered"] = {f.name: add_up(f, map(attrgetter(f.name), records)) for f in added}
    return out
