"""Run an fx graph once, node by node, with probes: no code is generated or compiled.

A pass that runs the program once (counting) gains nothing from compiling it:
compiling Python source costs about 15 µs per node here, as much as tracing it, and
even lowering the graph into a list of prepared calls costs more than it saves when
that list runs once. So the graph's own nodes are walked, each argument looked up as
the node runs. Compiled programs (:mod:`~fxinspect.run.codegen`) and this walk run the
same callables, call the same probes at the same points (``before(name)`` and
``after(name, output)`` around each op node) and free each value after its last use.

Example
-------
>>> import torch, torch.fx as fx
>>> gm = fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh()))
>>> seen = []
>>> program = Interpreted(gm)
>>> out = program([torch.ones(2)], before=seen.append, after=lambda name, out: seen.append(out.shape))
>>> torch.equal(out, gm(torch.ones(2))), seen
(True, ['_0', torch.Size([2]), '_1', torch.Size([2])])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx as fx

from ..capture.base import resolve_attr
from .graphs import last_uses, node_callable

__all__ = ["Interpreted", "NodeFailed"]

_Node = fx.Node
_ATOMS = frozenset({int, float, bool, str, type(None)})
_NO_KWARGS: dict = {}  # shared: ``fn(**kwargs)`` copies, nothing writes it


class NodeFailed(Exception):
    """An op node raised: the node, and the values of the nodes it read.

    The op's own exception is the ``__cause__``; the caller turns this into an error
    for the user.
    """

    def __init__(self, node: fx.Node, inputs: dict[str, Any]):
        super().__init__(node.name)
        self.node, self.inputs = node, inputs


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


def _nothing(*_: Any) -> None:
    return None


class Interpreted:
    """``gm``'s graph, run node by node; call it with the placeholder values."""

    def __init__(self, gm: fx.GraphModule):
        self.gm = gm
        self._nodes = list(gm.graph.nodes)
        self._last = last_uses(self._nodes)
        # nodes whose value can be dropped once the key node has run
        self._dead: dict[fx.Node, list[fx.Node]] = {}
        for node, user in self._last.items():
            self._dead.setdefault(user, []).append(node)

    def __call__(
        self,
        inputs: list[Any],
        before: Callable[[str], Any] | None = None,
        after: Callable[[str, Any], Any] | None = None,
    ) -> Any:
        gm, dead, last = self.gm, self._dead, self._last
        before = before or _nothing
        after = after or _nothing
        env: dict[fx.Node, Any] = {}
        inputs_left = iter(inputs)
        callables: dict[tuple[str, Any], Callable] = {}  # (op, target) -> what it calls
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
            name = node.name
            before(name)
            try:
                out = fn(*args, **kwargs)
            except Exception as exc:
                raise NodeFailed(node, {a.name: env[a] for a in node.all_input_nodes}) from exc
            after(name, out)
            if node in last:
                env[node] = out
            del out  # a value nobody reads is dropped at once
            for used in dead.get(node, ()):
                del env[used]
        return None
