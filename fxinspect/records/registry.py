"""Figures added from outside the package: one declaration and one function per node.

:func:`register_figure` takes a :class:`~fxinspect.records.fields.Field` and a function
from a node's record to its value; every later analysis computes it for each op node
once the passes have run, sums it into modules and totals as its ``aggregate`` says, and
every view shows it as it shows a declared figure: a table column, a diagram's
``color_by=``, the explorer, ``diff``. :func:`unregister_figure` takes it back.

Example
-------
>>> import torch, fxinspect
>>> twice = Field("twice", "int", Unit.FLOP, Aggregate.EXACT, "2×FLOPs", "twice the FLOPs", 0)
>>> register_figure(twice, lambda node: 2 * node.flops)
>>> fxinspect.analyze(torch.nn.Linear(4, 3), torch.randn(2, 4), timing=False).totals.twice   # 2 * (2*2*4*3 + 6)
108
>>> unregister_figure("twice")
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .fields import DERIVED, FIELD, REGISTERED, Aggregate, Field, Unit  # noqa: F401 (Aggregate: the example)

__all__ = ["compute_registered", "register_figure", "unregister_figure"]


def register_figure(field: Field, compute: Callable[[Any], Any]) -> None:
    """Add ``field``: ``compute(node)`` gives each op node's value, from its record.

    The record passed in carries every figure the passes measured (``flops``,
    ``predicted_latency``, ...); the value is in ``field.unit``'s base unit. Refused when
    the name is taken by a figure (declared, derived or registered; a table refuses one
    named like its own columns, ``name`` or ``share``).
    """
    figures = (*FIELD.values(), *DERIVED, *REGISTERED.values())
    if field.name in {f.name for f in figures} or field.colour_key in {f.colour_key for f in figures} - {None}:
        raise ValueError(f"register_figure: a figure named {field.name!r} exists already")
    if not field.name.isidentifier() or field.read:
        raise ValueError(f"register_figure: the name {field.name!r} must be an identifier, read as itself (read='')")
    if not isinstance(field.unit, Unit):
        raise TypeError(f"register_figure: unit must be a fxinspect Unit, got {field.unit!r}")
    REGISTERED[field.name] = dataclasses.replace(field, compute=compute)


def unregister_figure(name: str) -> None:
    """Take back the figure ``name`` added by :func:`register_figure` (later analyses
    and views no longer have it)."""
    if name not in REGISTERED:
        raise KeyError(f"unregister_figure: no registered figure {name!r}; registered: {sorted(REGISTERED)}")
    del REGISTERED[name]


def compute_registered(records: list[Any]) -> list[Any]:
    """``records`` (a report's nodes, in order) with each registered figure computed on
    every op node; unchanged when none is registered."""
    if not REGISTERED:
        return records
    out = []
    for r in records:
        if r.is_op:
            r = dataclasses.replace(r, registered={name: f.compute(r) for name, f in REGISTERED.items()})
        out.append(r)
    return out
