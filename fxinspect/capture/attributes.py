"""Attributes a forward sets on its modules (``self.aux_loss = ...``), found while capturing.

Every tier runs the model's Python once; what that run binds to a module attribute
(``vars(module)``: not parameters, buffers or submodules, which torch keeps apart) is
not an op, so no graph holds it, and the guard removes it afterwards. A step answered
by the captured program (``inspect``) sets it again from the graph's values, so the
user's code after the forward reads it as after a plain call. :class:`AttributeWatch`
notes each module's attributes before the forward and reports what the forward bound
afresh, and the list and dict attributes it changed in place; each tier says which
graph node holds each tensor of a bound value (:class:`AttributeWrite`: a tensor, or a
tuple, list or dict of them). A value with a leaf that no node holds (a Python number,
a flag, an object) is not computed by the program, nor is a container changed in place.

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

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

__all__ = ["AttributeWatch", "AttributeWrite", "named_writes"]

_MISSING = object()


@dataclass(frozen=True)
class AttributeWrite:
    """``module.<name> = value`` made by the captured forward.

    ``nodes`` names, for each leaf of the value in pytree order, the graph node whose
    value it is (an op, an input or an attribute read); ``spec`` rebuilds the value from
    them. ``spec is None`` when the program does not compute the value (see the module).
    """

    module: str  # dotted path in the user's model ("" for the model itself)
    name: str
    nodes: tuple[str, ...] = ()
    spec: Any = None

    @property
    def computed(self) -> bool:
        """Whether the program computes the value (every leaf is a node's)."""
        return self.spec is not None


def _unchanged(saved: Any, value: Any) -> bool:
    """A list or dict with the same items (by identity) as its copy ``saved``."""
    if isinstance(value, dict):
        return saved.keys() == value.keys() and all(saved[k] is value[k] for k in value)
    return len(saved) == len(value) and all(a is b for a, b in zip(saved, value))


class AttributeWatch:
    """Each module's attributes before a forward; :meth:`written` lists those it bound."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._before = [(path, m, dict(vars(m))) for path, m in model.named_modules()]
        # list and dict attributes, copied: one the forward appends to is not rebound
        self._containers = [
            (path, key, value, copy.copy(value))
            for path, _, attributes in self._before
            for key, value in attributes.items()
            if type(value) in (list, dict)
        ]

    def written(self) -> list[tuple[str, str, Any]]:
        """``(module path, attribute, value)`` for each attribute added or rebound since
        (by identity: torch's own tables are mutated, never rebound, by a forward)."""
        return [
            (path, key, value)
            for path, m, saved in self._before
            for key, value in vars(m).items()
            if saved.get(key, _MISSING) is not value
        ]

    def changed_in_place(self) -> list[tuple[str, str]]:
        """``(module path, attribute)`` of the lists and dicts the forward changed in place."""
        return [(path, key) for path, key, value, saved in self._containers if not _unchanged(saved, value)]

    def resolved(self, node_of: Callable[[Any], Any]) -> list[tuple[str, str, tuple, Any]]:
        """Each write as ``(path, attribute, nodes, spec)``: what stands for each leaf of
        the value (``node_of`` is the tier's lookup, ``None`` for a leaf no node holds;
        nodes, not names: a tier renames its nodes after tracing) and its structure;
        ``((), None)`` when a leaf stands for nothing."""
        found = []
        for path, name, value in self.written():
            leaves, spec = pytree.tree_flatten(value)
            nodes = tuple(node_of(leaf) for leaf in leaves)
            found.append((path, name, nodes, spec) if None not in nodes else (path, name, (), None))
        return found + [(path, name, (), None) for path, name in self.changed_in_place()]


def named_writes(found: list[tuple[str, str, tuple, Any]], graph: fx.Graph) -> tuple[AttributeWrite, ...]:
    """The writes with node names, as they are once the tier is done renaming; a value
    with a node not in the final graph (removed as unused) is not computed."""
    alive = set(graph.nodes)
    writes = []
    for path, name, nodes, spec in found:
        if spec is not None and all(node in alive for node in nodes):
            writes.append(AttributeWrite(path, name, tuple(node.name for node in nodes), spec))
        else:
            writes.append(AttributeWrite(path, name))
    return tuple(writes)
