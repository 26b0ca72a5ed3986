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


class _Writer:
    """The generated source's names and the objects it refers to (its namespace)."""

    def __init__(self, gm: fx.GraphModule, nodes: list[fx.Node], user_path: Callable[[str], str]) -> None:
        self.gm, self.user_path = gm, user_path
        self.names = _Names()
        self.var = {node: self.names.fresh(node.name) for node in nodes}  # values keep their node's name
        self.namespace: dict[str, Any] = {}
        self._by_id: dict[int, str] = {}

    def ref(self, obj: Any, hint: str) -> str:
        """A global name for ``obj`` (one per object), put in the namespace."""
        key = id(obj)
        if key not in self._by_id:
            self._by_id[key] = self.names.fresh(hint)
            self.namespace[self._by_id[key]] = obj
        return self._by_id[key]

    def arg(self, a: Any) -> str:
        """The source of one argument: a value's name, a literal, or a reference."""
        if isinstance(a, fx.Node):
            return self.var[a]
        if type(a) is tuple:
            return "(" + "".join(self.arg(x) + ", " for x in a) + ")"
        if isinstance(a, list):  # fx stores lists as immutable_list
            return "[" + ", ".join(self.arg(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{self.arg(k)}: {self.arg(v)}" for k, v in a.items()) + "}"
        if isinstance(a, tuple) and any(isinstance(x, fx.Node) for x in a):  # a namedtuple of values
            return f"{self.ref(type(a), type(a).__name__)}(" + ", ".join(self.arg(x) for x in a) + ")"
        if isinstance(a, slice):
            return f"slice({self.arg(a.start)}, {self.arg(a.stop)}, {self.arg(a.step)})"
        if (
            a is None
            or type(a) in (bool, int)
            or (type(a) is float and a == a and a not in (float("inf"), float("-inf")))
        ):
            return repr(a)
        if type(a) is str:
            return repr(a)
        return self.ref(a, "const")  # dtypes, devices, tuples of other types...: by reference

    def call(self, node: fx.Node) -> str:
        """``name = <what the node computes>`` for a call or an attribute read."""
        name = self.var[node]
        if node.op == "get_attr":
            value = resolve_attr(self.gm, str(node.target))
            return f"{name} = {self.ref(value, _hint(value, node, self.user_path))}"
        if node.op == "call_method":
            parts = [self.arg(a) for a in node.args[1:]] + [f"{k}={self.arg(v)}" for k, v in node.kwargs.items()]
            return f"{name} = {self.arg(node.args[0])}.{node.target}({', '.join(parts)})"
        fn = node_callable(self.gm, node)
        parts = [self.arg(a) for a in node.args] + [f"{k}={self.arg(v)}" for k, v in node.kwargs.items()]
        return f"{name} = {self.ref(fn, _hint(fn, node, self.user_path))}({', '.join(parts)})"


def compile_graph(
    gm: fx.GraphModule,
    before: Callable[[str], Any] | None = None,
    after: Callable[[str, Any], Any] | None = None,
    user_path: Callable[[str], str] = str,
) -> Program:
    """Compile ``gm.graph`` (read, never changed) into a :class:`Program` with probes.

    ``user_path`` turns a graph target into the model's own module path, for names.
    """
    nodes = list(gm.graph.nodes)
    writer = _Writer(gm, nodes, user_path)
    writer.namespace.update(before=before, after=after)
    last_use = last_uses(nodes)
    params, body = [], []
    for node in nodes:
        name = writer.var[node]
        if node.op == "placeholder":
            params.append(name)
            continue
        if node.op == "output":
            body.append(f"return {writer.arg(node.args[0])}")
            break
        probed = node.op in OP_KINDS  # (get_attr nodes are read, not probed)
        if probed and before is not None:
            body.append(f"before({node.name!r})")
        dead = [writer.var[u] for u in node.all_input_nodes if last_use.get(u) is node]
        body.append(writer.call(node) + (f";  {' = '.join(dead)} = None" if dead else ""))
        if probed and after is not None:
            body.append(f"after({node.name!r}, {name})")
        if node not in last_use and node.op != "get_attr":  # never read: drop it at once, as fx does
            body.append(f"{name} = None")
    source = f"def forward({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body)
    exec(compile(source, "<fxinspect program>", "exec"), writer.namespace)
    return Program(writer.namespace["forward"], source)
