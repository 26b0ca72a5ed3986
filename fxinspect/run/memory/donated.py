"""A state object's tensors given to a step (a KV cache): alive from the start, freed when replaced.

A decode step takes the cache the model built and returns it grown. transformers'
``DynamicCache`` grows a layer with ``torch.cat([old, new])`` and rebinds the layer to the
result: the old tensor is dropped right there, so a real ``generate()`` holds about one
cache, not the old and the new one side by side. The analysed program cannot see that
drop: the inputs it was given stay referenced by the analysis. So the tensors of the state
objects among the inputs (:func:`~fxinspect.capture.states.held_tensors`) are not resident
memory; they are the run's from before its first op, and each is freed after the last node
that uses it, or uses a view of it: unless the step returns it (a ``StaticCache`` is
written in place and returned), when it lives on.

:class:`Donated` keeps that schedule for the memory recorder: which storages, which nodes
hold them (the placeholder, then every node whose output shares its storage), and after
which node each holder is no longer used.

Example
-------
>>> import torch.fx as fx
>>> g = fx.Graph()
>>> old, new = g.placeholder("old"), g.placeholder("new")
>>> cat = g.call_function(torch.cat, ([old, new],))
>>> _ = g.output(cat)
>>> [n.name for n in last_users(g)["cat"]]          # after cat, nothing reads old (or new)
['old', 'new']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.fx as fx

from ...tensors import storage_of, tensors_in

__all__ = ["Donated", "last_users"]


def last_users(graph: fx.Graph) -> dict[str, list[fx.Node]]:
    """Per node name, the values whose last reader it is (a value the output reads has none)."""
    last: dict[fx.Node, fx.Node] = {}
    for node in graph.nodes:
        for value in node.all_input_nodes:
            last[value] = node
    found: dict[str, list[fx.Node]] = {}
    for value, reader in last.items():
        if reader.op != "output":
            found.setdefault(reader.name, []).append(value)
    return found


class Donated:
    """The storages of ``tensors`` (named by their placeholders) as the run's, each freed
    by ``release(storage)`` once no node that holds it is read again."""

    def __init__(self, graph: fx.Graph, named: Iterable[tuple[str, torch.Tensor]]) -> None:
        self.tensors: list[tuple[str, torch.Tensor]] = []
        self._holders: dict[int, set[str]] = {}  # id(storage) -> the nodes holding it
        self._storage: dict[int, Any] = {}
        self._of: dict[str, int] = {}  # node -> the donated storage it holds
        for name, t in named:
            st = storage_of(t)
            if st is None:
                continue
            self.tensors.append((name, t))
            self._storage[id(st)] = st
            self._holders.setdefault(id(st), set()).add(name)
            self._of[name] = id(st)
        self._last = last_users(graph) if self.tensors else {}
        self._read = {n.name for n in graph.nodes if n.users} if self.tensors else set()

    def __bool__(self) -> bool:
        return bool(self.tensors)

    def after(self, name: str, out: Any) -> list[Any]:
        """Take note of node ``name``'s output; the storages free once it has run."""
        for t in (out,) if type(out) is torch.Tensor else tensors_in(out):
            st = storage_of(t)
            if st is not None and id(st) in self._holders and name not in self._of and name in self._read:
                self._holders[id(st)].add(name)
                self._of[name] = id(st)
        freed = []
        for value in self._last.get(name, ()):
            key = self._of.get(value.name)
            if key is None:
                continue
            holders = self._holders[key]
            holders.discard(value.name)
            if not holders:
                freed.append(self._storage.pop(key))
                del self._holders[key]
        return freed
