"""Compile an fx graph into a plain Python function, with probes, without copying it.

``torch.fx``'s own code generation (copy the graph, insert probe nodes, ``recompile``)
costs about 40 µs per node here, as much as tracing; on a graph of thousands of tiny
ops that alone doubled the cost of an analysis. This generator reads the captured graph
as it is and writes one line per node: variables for nodes, a table for everything
else (functions, submodules, attributes, constants), and ``name = None`` after a
value's last use so that activations are freed as in the original program. The one
probe, ``stamp``, is an entry of the same table, called before the first op node and
after every op node (the clock of the timing runs). The counting run, which runs once,
is interpreted instead (:mod:`fxinspect.interpret`).

Example
-------
>>> import torch, torch.fx as fx
>>> gm = fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh()))
>>> program = compile_graph(gm)
>>> torch.equal(program(torch.ones(2)), gm(torch.ones(2)))
True
>>> print(program.source.splitlines()[2].strip())
_2 = T[1](_1);  _1 = None
"""

from __future__ import annotations

from typing import Any, Callable

import torch.fx as fx

from ..capture.base import resolve_attr
from .graphs import OP_KINDS, last_uses, node_callable


class Program:
    """A compiled graph: call it with the graph's placeholder values."""

    def __init__(self, fn: Callable, source: str):
        self._fn = fn
        self.source = source

    def __call__(self, *args: Any) -> Any:
        return self._fn(*args)


def compile_graph(
    gm: fx.GraphModule,
    stamp: Callable[[], Any] | None = None,
) -> Program:
    """Compile ``gm.graph`` (read, never changed) into a :class:`Program`."""
    table: list[Any] = []
    slots: dict[int, int] = {}

    def ref(obj: Any) -> str:
        key = id(obj)
        if key not in slots:
            slots[key] = len(table)
            table.append(obj)
        return f"T[{slots[key]}]"

    names: dict[fx.Node, str] = {}

    def arg(a: Any) -> str:
        if isinstance(a, fx.Node):
            return names[a]
        if type(a) is tuple:
            return "(" + "".join(arg(x) + ", " for x in a) + ")"
        if isinstance(a, list):  # fx stores lists as immutable_list
            return "[" + ", ".join(arg(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{arg(k)}: {arg(v)}" for k, v in a.items()) + "}"
        if isinstance(a, tuple) and any(isinstance(x, fx.Node) for x in a):  # a namedtuple of values
            return f"{ref(type(a))}(" + ", ".join(arg(x) for x in a) + ")"
        if isinstance(a, slice):
            return f"slice({arg(a.start)}, {arg(a.stop)}, {arg(a.step)})"
        if a is None or type(a) in (bool, int) or (type(a) is float and a == a and a not in (float("inf"), float("-inf"))):
            return repr(a)
        return ref(a)  # dtypes, devices, slices, strings, tuples of other types...: by reference

    def call_args(node: fx.Node) -> str:
        parts = [arg(a) for a in node.args] + [f"{k}={arg(v)}" for k, v in node.kwargs.items()]
        return ", ".join(parts)

    nodes = list(gm.graph.nodes)
    last_use = last_uses(nodes)
    params, body = [], []
    stamp_ref = ref(stamp) + "()" if stamp is not None else None
    first_op = True
    for i, node in enumerate(nodes):
        name = names[node] = f"_{i}"
        if node.op == "placeholder":
            params.append(name)
            continue
        if node.op == "output":
            body.append(f"return {arg(node.args[0])}")
            break
        if node.op == "get_attr":
            line = f"{name} = {ref(resolve_attr(gm, str(node.target)))}"
        else:
            if first_op and stamp_ref:
                body.append(stamp_ref)
            first_op = False
            if node.op == "call_method":
                self_arg, rest = node.args[0], node.args[1:]
                parts = [arg(a) for a in rest] + [f"{k}={arg(v)}" for k, v in node.kwargs.items()]
                line = f"{name} = {arg(self_arg)}.{node.target}({', '.join(parts)})"
            else:
                line = f"{name} = {ref(node_callable(gm, node))}({call_args(node)})"
        dead = [names[u] for u in node.all_input_nodes if last_use.get(u) is node]
        if node not in last_use:  # never read: drop it at once, as fx does
            dead.append(name)
        if dead:
            line += ";  " + " = ".join(dead) + " = None"
        body.append(line)
        if stamp_ref and node.op in OP_KINDS:
            body.append(stamp_ref)
    source = f"def forward({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body)
    namespace: dict[str, Any] = {"T": table}
    exec(compile(source, "<fxinspect program>", "exec"), namespace)
    return Program(namespace["forward"], source)
