"""Run an fx graph once, node by node, with probes: no code is generated or compiled.

The counting run executes its program exactly once. Compiling Python source costs
about 15 µs per node here (as much as tracing it), and even lowering the graph into a
list of prepared calls costs more than it saves when that list runs once; so the
graph's own nodes are walked, each argument looked up as the node runs. Timed
programs, which run many times and must add nothing between clock stamps, are
compiled by :mod:`fxinspect.codegen` instead; both call the same callables and free
each value after its last use, as the original program does.

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

from ..capture.base import resolve_attr
from .graphs import last_uses, node_callable

_Node = fx.Node
_ATOMS = frozenset({int, float, bool, str, type(None)})
_NO_KWARGS: dict = {}  # shared: ``fn(**kwargs)`` copies, nothing writes it


def _value(a: Any, env: dict[fx.Node, Any]) -> Any:
    """A node argument with every node replaced by its value.

    fx's immutable containers come out as plain lists and dicts, as in generated code.
    """
    kind = type(a)
    if kind is _Node:
        return env[a]
    if kind in _ATOMS:
        return a
    if isinstance(a, (tuple, list)):
        values = [_value(x, env) for x in a]
        if kind is tuple:
            return tuple(values)
        if isinstance(a, tuple):  # a namedtuple, or another tuple type (torch.Size)
            return kind(*values) if hasattr(a, "_fields") else kind(values)
        return values
    if isinstance(a, dict):
        return {k: _value(v, env) for k, v in a.items()}
    if kind is slice:
        return slice(_value(a.start, env), _value(a.stop, env), _value(a.step, env))
    return a


RunNode = Callable[[int, Callable, list, dict], Any]
"""``run_node(op index, fn, args, kwargs) -> output``: runs one op node."""


def _call(index: int, fn: Callable, args: list[Any], kwargs: dict[str, Any]) -> Any:
    return fn(*args, **kwargs)


class Interpreted:
    """``gm``'s graph, run node by node; call it once with the placeholder values."""

    def __init__(self, gm: fx.GraphModule, run_node: RunNode | None = None):
        self.gm = gm
        self.run_node: RunNode = run_node or _call
        self._nodes = list(gm.graph.nodes)
        self._last = last_uses(self._nodes)
        # nodes whose value can be dropped once the key node has run
        self._dead: dict[fx.Node, list[fx.Node]] = {}
        for node, user in self._last.items():
            self._dead.setdefault(user, []).append(node)

    def __call__(self, *inputs: Any) -> Any:
        gm, run_node, dead, last = self.gm, self.run_node, self._dead, self._last
        env: dict[fx.Node, Any] = {}
        inputs_left = iter(inputs)
        callables: dict[tuple[str, Any], Callable] = {}  # (op, target) -> what it calls
        index = 0
        for node in self._nodes:
            op = node.op
            if op == "call_function":
                fn = node.target
            elif op == "call_method" or op == "call_module":
                key = (op, node.target)
                fn = callables.get(key)
                if fn is None:
                    fn = callables[key] = node_callable(gm, node)
            elif op == "placeholder":
                env[node] = next(inputs_left)
                continue
            elif op == "get_attr":
                env[node] = resolve_attr(gm, str(node.target))
                continue
            elif op == "output":
                return _value(node.args[0], env)
            else:
                raise ValueError(f"node {node.name}: unknown fx op kind {op!r}")
            args = [env[a] if type(a) is _Node else _value(a, env) for a in node.args]
            kwargs = {k: _value(v, env) for k, v in node.kwargs.items()} if node.kwargs else _NO_KWARGS
            if node in last:
                env[node] = run_node(index, fn, args, kwargs)
            else:  # a value nobody reads is dropped at once
                run_node(index, fn, args, kwargs)
            index += 1
            for used in dead.get(node, ()):
                del env[used]
        return None
