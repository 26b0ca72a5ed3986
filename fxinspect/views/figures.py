"""The summed figures of :mod:`fxinspect.fields`, added up over any records that carry them.

Tables (rows of modules, ops and nodes) and the module graph (its ``member_*``
attributes) both sum figures over groups of records; they do it here, driven by
each field's :class:`~fxinspect.fields.Aggregate`, so a figure declared in
:data:`~fxinspect.fields.FIELDS` is summed everywhere without naming it.

Example
-------
>>> [f.name for f in SUMMED]
['flops', 'macs', 'bytes_read', 'bytes_written', 'latency']
>>> from fxinspect.fields import FIELD
>>> add_up(FIELD["flops"], [3, 4]), add_up(FIELD["latency"], [0.5, None])
(7, None)
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..fields import FIELDS, Aggregate, Field

__all__ = ["SUMMED", "add_up", "sums"]

SUMMED: tuple[Field, ...] = tuple(f for f in FIELDS if f.sums)
"""The figures that sum into modules and totals, in declaration order."""


def add_up(field: Field, values: Iterable[Any]) -> Any:
    """The sum of one figure's ``values`` as its aggregate says.

    ``EXACT`` figures are integers summed exactly; a ``KNOWN`` sum is ``None`` as soon
    as one part is (an unmeasured part makes the whole unknown, never smaller).
    """
    if field.aggregate is Aggregate.EXACT:
        return sum(values)
    if field.aggregate is Aggregate.KNOWN:
        total = 0.0  # a plain left-to-right sum: the same float the assembly computes
        for v in values:
            if v is None:
                return None
            total += v
        return total
    raise ValueError(f"{field.name} is a node's own observation ({field.aggregate}): it does not sum")


def sums(records: Sequence[Any]) -> dict[str, Any]:
    """Every summed figure over ``records`` (nodes, modules or totals), by field name."""
    return {f.name: add_up(f, (getattr(r, f.name) for r in records)) for f in SUMMED}
