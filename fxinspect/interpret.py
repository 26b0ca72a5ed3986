"""Run an fx graph once, node by node, with probes: no code is generated or compiled.

The counting run executes its program exactly once, and compiling Python source costs
about 15 µs per node here (as much as tracing it), where stepping through a prepared
list of calls costs about 1 µs. Timed programs, which run many times and must add
nothing between clock stamps, are compiled by :mod:`fxinspect.codegen` instead; both
call the same callables and free each value after its last use, as the original
program does.

The probe is one function, ``run_node(i, fn, args, kwargs)``, that runs op node ``i``
(its position among the op nodes): cheaper per node than wrapping every callable in a
closure that repacks its arguments.

Example
-------
>>> import torch, torch.fx as fx
>>> gm = fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh()))
>>> order = []
>>> def run_node(index, fn, args, kwargs):
...     order.append(index)
...     return fn(*args, **kwargs)
>>> program = Interpreted(gm, run_node)
>>> torch.equal(program(torch.ones(2)), gm(torch.ones(2))), order
(True, [0, 1])
"""

from __future__ import annotations

from typing import Any, Callable

import torch.fx as fx

from .capture.base import resolve_attr
from .codegen import OP_KINDS, last_uses, node_callable


class _Dynamic:
    """An argument that holds values of other nodes: built anew when the node runs."""

    __slots__ = ()

    def get(self, env: list[Any]) -> Any:
        raise NotImplementedError


class _Ref(_Dynamic):
    __slots__ = ("slot",)

    def __init__(self, slot: int):
        self.slot = slot

    def get(self, env: list[Any]) -> Any:
        return env[self.slot]


class _Build(_Dynamic):
    """A container (tuple, list, namedtuple, dict, slice) with node values inside."""

    __slots__ = ("make", "items")

    def __init__(self, make: Callable[[list[Any]], Any], items: list[Any]):
        self.make, self.items = make, items

    def get(self, env: list[Any]) -> Any:
        return self.make([x.get(env) if isinstance(x, _Dynamic) else x for x in self.items])


def _lower(a: Any, slots: dict[fx.Node, int]) -> Any:
    """A node argument as a constant, or as a :class:`_Dynamic` that reads ``env``.

    fx's immutable containers come out as plain lists and dicts, as in generated code.
    """
    kind = type(a)
    if kind is fx.Node:
        return _Ref(slots[a])
    if kind in _ATOMS or a is None:
        return a
    if isinstance(a, (tuple, list)):
        items = [_lower(x, slots) for x in a]
        if type(a) is not tuple and isinstance(a, tuple):  # a namedtuple
            make: Callable[[list[Any]], Any] = lambda values, cls=type(a): cls(*values)  # noqa: E731
        else:
            make = tuple if isinstance(a, tuple) else list
    elif isinstance(a, dict):
        keys = list(a)
        items = [_lower(a[k], slots) for k in keys]
        make = lambda values, keys=keys: dict(zip(keys, values))  # noqa: E731
    elif isinstance(a, slice):
        items = [_lower(x, slots) for x in (a.start, a.stop, a.step)]
        make = lambda values: slice(*values)  # noqa: E731
    else:
        return a
    if any(isinstance(x, _Dynamic) for x in items):
        return _Build(make, items)
    return make(items)


RunNode = Callable[[int, Callable, list, dict], Any]
"""``run_node(op index, fn, args, kwargs) -> output``: runs one op node."""


def _call(index: int, fn: Callable, args: list[Any], kwargs: dict[str, Any]) -> Any:
    return fn(*args, **kwargs)


_ATOMS = frozenset({int, float, bool, str})
_NO_KWARGS: dict = {}  # shared: ``fn(**kwargs)`` copies, nothing writes it


class Interpreted:
    """``gm``'s graph as a list of calls; call it once with the placeholder values."""

    def __init__(self, gm: fx.GraphModule, run_node: RunNode | None = None):
        self.run_node: RunNode = run_node or _call
        nodes = list(gm.graph.nodes)
        slots = {node: i for i, node in enumerate(nodes)}
        last = last_uses(nodes)
        self._size = len(nodes)
        self._placeholders: list[int] = []
        self._constants: list[tuple[int, Any]] = []
        # (op index, function, args, kwargs, output slot, slots freed after it, args hold only _Ref)
        self._steps: list[tuple[int, Callable, list[Any], Any, int, tuple[int, ...], bool]] = []
        self._output: Any = None
        dead: dict[fx.Node, list[int]] = {}
        for node, user in last.items():
            dead.setdefault(user, []).append(slots[node])
        op_index = 0
        for node in nodes:
            slot = slots[node]
            if node.op == "placeholder":
                self._placeholders.append(slot)
            elif node.op == "get_attr":
                self._constants.append((slot, resolve_attr(gm, str(node.target))))
            elif node.op == "output":
                self._output = _lower(node.args[0], slots)
                break
            elif node.op in OP_KINDS:
                fn = node_callable(gm, node)
                args = [_lower(a, slots) for a in node.args]
                kwargs = _lower(dict(node.kwargs), slots) if node.kwargs else _NO_KWARGS
                flat = _Build not in map(type, args)
                freed = tuple(dead.get(node, ())) + (() if node in last else (slot,))
                self._steps.append((op_index, fn, args, kwargs, slot, freed, flat))
                op_index += 1

    def __call__(self, *inputs: Any) -> Any:
        env: list[Any] = [None] * self._size
        for slot, value in zip(self._placeholders, inputs):
            env[slot] = value
        for slot, value in self._constants:
            env[slot] = value
        run_node = self.run_node
        for index, fn, args, kwargs, slot, freed, flat in self._steps:
            if flat:
                values = [env[a.slot] if type(a) is _Ref else a for a in args]
            else:
                values = [a.get(env) if isinstance(a, _Dynamic) else a for a in args]
            if isinstance(kwargs, _Dynamic):
                kwargs = kwargs.get(env)
            env[slot] = run_node(index, fn, values, kwargs)
            for dead_slot in freed:
                env[dead_slot] = None
        out = self._output
        return out.get(env) if isinstance(out, _Dynamic) else out
