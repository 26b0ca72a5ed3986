"""Records shaped by the figures' declaration: the figures as fields, derived and registered ones.

:func:`with_figures` inserts the figures of :mod:`.fields` into a record class's fields;
:class:`Derived` gives node, module and total records the figures computed from them
(written once, here) and reads a registered figure (:mod:`.registry`) from the record's
``registered`` mapping like any declared one: ``node.energy``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any

from .fields import FIELDS, REGISTERED

__all__ = ["Derived", "with_figures"]


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

    def __getattr__(self, name: str) -> Any:
        """A registered figure by its name (its declared default where the record has none)."""
        field = REGISTERED.get(name)
        if field is None or name == "registered":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        values = self.registered
        return field.default if values is None else values.get(name, field.default)


def with_figures(after: str, summed_only: bool, defaults: bool) -> Callable[[type], type]:
    """Insert the declared figures into a record class's annotations, after ``after``,
    and ``registered`` (the registered figures' values, ``None`` without any) last.

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
        merged["registered"] = "dict[str, Any] | None"
        # (left out of a report's JSON while None: reports without them read as before)
        cls.registered = field(default=None, metadata={"omit_none": True})
        cls.__annotations__ = merged
        return cls

    return insert
