"""Compile an fx graph into a plain Python function, with probe calls between its ops.

``torch.fx``'s own code generation (copy the graph, insert probe nodes, ``recompile``)
costs about 40 µs per node here, as much as tracing; on a graph of thousands of tiny
ops that alone doubled the cost of an analysis. This generator reads the captured graph
as it is and writes one line per node, named as the graph names it: node names for
values, readable global names for what the nodes call (``self_conv1`` for the module
at ``conv1``, ``aten_addmm_default``), and ``name = None`` after a value's last use so
that activations are freed as in the original program. A probe's ``before(name)`` and
``after(name, output)`` are called around each op node when the probe has them; the
source is what runs, so printing it shows exactly where the probes sit.

Example
-------
>>> import torch, torch.fx as fx
>>> gm = fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh()))
>>> program = compile_graph(gm, after=lambda name, out: None)
>>> torch.equal(program(torch.ones(2)), gm(torch.ones(2)))
True
>>> print(program.source, end="")
def forward(input_1):
    _0 = self_0(input_1);  input_1 = None
    after('_0', _0)
    _1 = self_1(_0);  _0 = None
    after('_1', _1)
    return _1
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx

from ..capture.base import resolve_attr
from .graphs import OP_KINDS, last_uses, node_callable

__all__ = ["Program", "compile_graph"]

_RESERVED = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {"before", "after"}
_NOT_IDENTIFIER = re.compile(r"\W|^(?=\d)")


class Program:
    """A compiled graph: call it with the graph's placeholder values."""

    def __init__(self, fn: Callable, source: str):
        self._fn = fn
        self.source = source

    def __call__(self, *args: Any) -> Any:
        return self._fn(*args)


class _Names:
    """Unique identifiers for the generated source: node names first, then globals."""

    def __init__(self) -> None:
        self.taken: set[str] = set(_RESERVED)

    def fresh(self, hint: str) -> str:
        base = _NOT_IDENTIFIER.sub("_", hint) or "_"
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name


def _hint(obj: Any, node: fx.Node, user_path: Callable[[str], str]) -> str:
    """A readable global name for what ``node`` calls or reads: ``self_layer1_0_conv1``,
    ``torch_relu``, ``operator_add``, ``aten_addmm_default``."""
    if node.op in ("call_module", "get_attr"):
        return "self_" + (user_path(str(node.target)) or "model")
    if isinstance(obj, torch._ops.OpOverload):
        return str(obj)
    name = getattr(obj, "__name__", None) or type(obj).__name__.lower()
    module = (getattr(obj, "__module__", None) or "").strip("_").rpartition(".")[2]
    return f"{module}_{name}" if module and module != "builtins" else name


def compile_graph(
    gm: fx.GraphModule,
    before: Callable[[str], Any] | None = None,
    after: Callable[[str, Any], Any] | None = None,
    user_path: Callable[[str], str] = str,
) -> Program:
    """Compile ``gm.graph`` (read, never changed) into a :class:`Program` with probes.

    ``user_path`` turns a graph target into the model's own module path, for names.
    """
    names = _Names()
    nodes = list(gm.graph.nodes)
    var = {node: names.fresh(node.name) for node in nodes}  # values keep their node's name
    namespace: dict[str, Any] = {"before": before, "after": after}
    by_id: dict[int, str] = {}

    def ref(obj: Any, hint: str) -> str:
        key = id(obj)
        if key not in by_id:
            by_id[key] = names.fresh(hint)
            namespace[by_id[key]] = obj
        return by_id[key]

    def arg(a: Any) -> str:
        if isinstance(a, fx.Node):
            return var[a]
        if type(a) is tuple:
            return "(" + "".join(arg(x) + ", " for x in a) + ")"
        if isinstance(a, list):  # fx stores lists as immutable_list
            return "[" + ", ".join(arg(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{arg(k)}: {arg(v)}" for k, v in a.items()) + "}"
        if isinstance(a, tuple) and any(isinstance(x, fx.Node) for x in a):  # a namedtuple of values
            return f"{ref(type(a), type(a).__name__)}(" + ", ".join(arg(x) for x in a) + ")"
        if isinstance(a, slice):
            return f"slice({arg(a.start)}, {arg(a.stop)}, {arg(a.step)})"
        if (
            a is None
            or type(a) in (bool, int)
            or (type(a) is float and a == a and a not in (float("inf"), float("-inf")))
        ):
            return repr(a)
        if type(a) is str:
            return repr(a)
        return ref(a, "const")  # dtypes, devices, tuples of other types...: by reference

    last_use = last_uses(nodes)
    params, body = [], []
    for node in nodes:
        name = var[node]
        if node.op == "placeholder":
            params.append(name)
            continue
        if node.op == "output":
            body.append(f"return {arg(node.args[0])}")
            break
        dead = [var[u] for u in node.all_input_nodes if last_use.get(u) is node]
        if node.op == "get_attr":
            value = resolve_attr(gm, str(node.target))
            body.append(
                f"{name} = {ref(value, _hint(value, node, user_path))}"
                + (f";  {' = '.join(dead)} = None" if dead else "")
            )
            continue
        is_op = node.op in OP_KINDS
        if is_op and before is not None:
            body.append(f"before({node.name!r})")
        if node.op == "call_method":
            parts = [arg(a) for a in node.args[1:]] + [f"{k}={arg(v)}" for k, v in node.kwargs.items()]
            line = f"{name} = {arg(node.args[0])}.{node.target}({', '.join(parts)})"
        else:
            fn = node_callable(gm, node)
            parts = [arg(a) for a in node.args] + [f"{k}={arg(v)}" for k, v in node.kwargs.items()]
            line = f"{name} = {ref(fn, _hint(fn, node, user_path))}({', '.join(parts)})"
        body.append(line + (f";  {' = '.join(dead)} = None" if dead else ""))
        if is_op and after is not None:
            body.append(f"after({node.name!r}, {name})")
        if node not in last_use:  # never read: drop it at once, as fx does
            body.append(f"{name} = None")
    source = f"def forward({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body)
    exec(compile(source, "<fxinspect program>", "exec"), namespace)
    return Program(namespace["forward"], source)
