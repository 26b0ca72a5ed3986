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

__all__ = ["RECORDERS", "compute_registered", "register_figure", "registered_values", "unregister_figure"]

RECORDERS: dict[str, Callable[..., Any]] = {}
"""The registered figures observed by a recorder: name -> ``recorder(program, options)``."""


def register_figure(
    field: Field, compute: Callable[[Any], Any] | None = None, *, recorder: Callable[..., Any] | None = None
) -> None:
    """Add ``field``, with one way to find each op node's value (in ``field.unit``'s base unit):

    * ``compute(node)``: from the node's record once the passes and the time model have
      run (every figure they measured: ``flops``, ``predicted_latency``, ...), for a
      figure derived from others;
    * ``recorder(program, options)``: a :class:`fxinspect.run.recorders.Recorder` made for
      each analysis' counting run, for a figure observed while the program runs (its ops,
      its values); its ``result`` gives ``PassResult(nodes={node: {field.name: value}})``.

    Refused when the name is taken by a figure (declared, derived or registered; a table
    refuses one named like its own columns, ``name`` or ``share``).
    """
    if (compute is None) == (recorder is None):
        raise TypeError("register_figure: give one of compute= (from the node's record) or recorder=")
    figures = (*FIELD.values(), *DERIVED, *REGISTERED.values())
    if field.name in {f.name for f in figures} or field.colour_key in {f.colour_key for f in figures} - {None}:
        raise ValueError(f"register_figure: a figure named {field.name!r} exists already")
    if not field.name.isidentifier() or field.read:
        raise ValueError(f"register_figure: the name {field.name!r} must be an identifier, read as itself (read='')")
    if not isinstance(field.unit, Unit):
        raise TypeError(f"register_figure: unit must be a fxinspect Unit, got {field.unit!r}")
    REGISTERED[field.name] = dataclasses.replace(field, compute=compute)
    if recorder is not None:
        RECORDERS[field.name] = recorder


def unregister_figure(name: str) -> None:
    """Take back the figure ``name`` added by :func:`register_figure` (later analyses
    and views no longer have it)."""
    if name not in REGISTERED:
        raise KeyError(f"unregister_figure: no registered figure {name!r}; registered: {sorted(REGISTERED)}")
    del REGISTERED[name]
    RECORDERS.pop(name, None)


def compute_registered(records: list[Any]) -> list[Any]:
    """``records`` (a report's nodes, in order) with each registered figure computed on
    every op node (a recorder's, already in ``registered``, kept); unchanged when none is
    registered."""
    computed = {name: f.compute for name, f in REGISTERED.items() if f.compute is not None}
    if not REGISTERED:
        return records
    out = []
    for r in records:
        if r.is_op:
            found = {name: (r.registered or {}).get(name) for name in REGISTERED}
            found.update({name: compute(r) for name, compute in computed.items()})
            r = dataclasses.replace(r, registered=found)
        out.append(r)
    return out


def registered_values(values: dict[str, Any]) -> dict[str, Any]:
    """A recorder's node values with the registered figures put under ``registered``
    (the record's field for them), the others as they are."""
    if not RECORDERS or not RECORDERS.keys() & values.keys():
        return values
    out = {k: v for k, v in values.items() if k not in RECORDERS}
    out["registered"] = {k: v for k, v in values.items() if k in RECORDERS}
    return out
