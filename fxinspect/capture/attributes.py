"""Attributes a forward sets on its modules (``self.aux_loss = ...``), found while capturing.

Every tier runs the model's Python once; what that run binds to a module attribute
(``vars(module)``: not parameters, buffers or submodules, which torch keeps apart) is
not an op, so no graph holds it, and the guard removes it afterwards. A step answered
by the captured program (``inspect``) sets it again from the graph's values, so the
user's code after the forward reads it as after a plain call. :class:`AttributeWatch`
notes each module's attributes before the forward and reports what the forward bound
afresh; each tier says which graph node, if any, holds the value
(:class:`AttributeWrite`). A value that no node holds (a Python number, a flag, a
container) is listed with ``node=None``: the program does not compute it.

Example
-------
>>> import torch
>>> class Net(torch.nn.Module):
...     def forward(self, x):
...         self.last = x.sum()
...         return x
>>> net = Net()
>>> watch = AttributeWatch(net)
>>> _ = net(torch.ones(2))
>>> [(path, name, float(value)) for path, name, value in watch.written()]
[('', 'last', 2.0)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

__all__ = ["AttributeWatch", "AttributeWrite", "named_writes"]

_MISSING = object()


@dataclass(frozen=True)
class AttributeWrite:
    """``module.<name> = value`` made by the captured forward; ``node`` is the name of
    the graph node whose value it is (an op, an input or an attribute read), ``None``
    when no node holds it."""

    module: str  # dotted path in the user's model ("" for the model itself)
    name: str
    node: str | None


class AttributeWatch:
    """Each module's attributes before a forward; :meth:`written` lists those it bound."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._before = [(path, m, dict(vars(m))) for path, m in model.named_modules()]

    def written(self) -> list[tuple[str, str, Any]]:
        """``(module path, attribute, value)`` for each attribute added or rebound since
        (by identity: torch's own tables are mutated, never rebound, by a forward)."""
        return [
            (path, key, value)
            for path, m, saved in self._before
            for key, value in vars(m).items()
            if saved.get(key, _MISSING) is not value
        ]

    def resolved(self, node_of: Callable[[Any], fx.Node | None]) -> list[tuple[str, str, fx.Node | None]]:
        """:meth:`written` with each value's node (``node_of`` is the tier's lookup);
        nodes, not names: a tier renames its nodes after tracing."""
        return [(path, name, node_of(value)) for path, name, value in self.written()]


def named_writes(found: list[tuple[str, str, fx.Node | None]], graph: fx.Graph) -> tuple[AttributeWrite, ...]:
    """The writes with node names, as they are once the tier is done renaming; a node that
    is not in the final graph (removed as unused) holds nothing."""
    alive = set(graph.nodes)
    return tuple(
        AttributeWrite(path, name, node.name if node is not None and node in alive else None)
        for path, name, node in found
    )
