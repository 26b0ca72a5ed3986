"""What the run layer asks of an fx graph: which nodes run ops, what they call, and
where each value is read for the last time.

Example
-------
>>> import torch, torch.fx as fx
>>> gm = fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh()))
>>> [n.name for n in op_nodes(gm.graph)]
['_0', '_1']
>>> {n.name: u.name for n, u in last_uses(list(gm.graph.nodes)).items()}
{'input_1': '_0', '_0': '_1', '_1': 'output'}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx as fx

from ..records import OP_KINDS

__all__ = ["OP_KINDS", "MethodCall", "last_uses", "node_callable", "op_nodes"]


def op_nodes(graph: fx.Graph) -> list[fx.Node]:
    """The nodes that run something, in graph order."""
    return [n for n in graph.nodes if n.op in OP_KINDS]


class MethodCall:
    """``call_method`` as a plain callable: ``MethodCall("view")(x, 2, 3) == x.view(2, 3)``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __call__(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(obj, self.name)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"MethodCall({self.name!r})"


def last_uses(nodes: list[fx.Node]) -> dict[fx.Node, fx.Node]:
    """For every node that is read, the last node (in ``nodes`` order) that reads it."""
    last: dict[fx.Node, fx.Node] = {}
    for node in nodes:
        for used in node.all_input_nodes:
            last[used] = node
    return last


def node_callable(gm: fx.GraphModule, node: fx.Node) -> Callable:
    """What an op node calls: the function, a method caller, or the submodule."""
    if node.op == "call_module":
        return gm.get_submodule(str(node.target))
    if node.op == "call_method":
        return MethodCall(str(node.target))
    return node.target
