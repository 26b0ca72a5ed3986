"""Ops that return their argument itself, and the edges that must go around them.

``x.to(torch.float32)`` on a float32 tensor, ``x.contiguous()`` on a contiguous one,
``x.type_as(x)``: eager PyTorch returns ``x`` itself, the same tensor object. A tracer
that follows tensor objects (``torch.export`` does) then gives that object the new
node as its producer, so every later reader of ``x`` reads the no-op node, also those
that never saw it: a Llama block's residual ``add`` reads ``to`` inside
``input_layernorm``, and diagrams draw ``input_layernorm -> add`` where the skip
connection runs around the norm. :func:`follow_values` gives each such node's readers
its argument back, so every edge comes from the node that produced the value. The
program computes exactly what it did (the op returned that very tensor); the no-op
node stays, with its figures, where it ran.

Example
-------
>>> import torch
>>> class Block(torch.nn.Module):
...     def forward(self, x):
...         return x + x.to(torch.float32).relu()
>>> gm = torch.export.export(Block(), (torch.randn(2),), strict=False).module()
>>> follow_values(gm.graph)
1
>>> [n.name for n in gm.graph.find_nodes(op="call_function", target=torch.ops.aten.add.Tensor)[0].all_input_nodes]
['x', 'relu']
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

__all__ = ["follow_values", "returned_argument"]


def _may_return_an_argument(node: fx.Node) -> bool:
    """Whether ``node``'s op may return one of its arguments itself (see :func:`_op_may`)."""
    return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and _op_may(node.target)


@functools.cache
def _op_may(op: torch._ops.OpOverload) -> bool:
    """It writes none of its arguments and its schema lets its one output alias one
    (``Tensor(a) self -> Tensor(a)``), or it is a composite of other ops (``type_as``
    calls ``to``: its schema says nothing)."""
    schema = op._schema
    if schema.is_mutable or len(schema.returns) != 1:
        return False
    return schema.returns[0].alias_info is not None or torch._C._dispatch_has_kernel_for_dispatch_key(
        op.name(), "CompositeImplicitAutograd"
    )


def _same_layout(a: Any, b: Any) -> bool:
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    same = (a.dtype, a.device, a.layout) == (b.dtype, b.device, b.layout) and a.shape == b.shape
    return same and a.stride() == b.stride() and a.storage_offset() == b.storage_offset()


def returned_argument(node: fx.Node) -> fx.Node | None:
    """The argument ``node``'s op returns itself (the same tensor object), or ``None``.

    Decided by running the op on the graph's own fake values (``node.meta["val"]``),
    which takes the same path as the real call: ``to`` returns ``self`` when nothing
    changes, but a new tensor when asked to copy; ``alias`` and ``detach`` always make
    a new one. Only ops that may (see :func:`_may_return_an_argument`) and whose output
    looks like an argument are run.
    """
    if not _may_return_an_argument(node):
        return None
    out = node.meta.get("val")
    sources = [a for a in node.all_input_nodes if _same_layout(a.meta.get("val"), out)]
    if not sources:
        return None
    args, kwargs = pytree.tree_map_only(fx.Node, lambda a: a.meta.get("val"), (node.args, node.kwargs))
    modes = {id(v.fake_mode): v.fake_mode for v in pytree.tree_leaves((args, kwargs)) if hasattr(v, "fake_mode")}
    if len(modes) != 1:
        return None
    try:  # (under the graph's own fake mode, also where another one is active: device="meta")
        with next(iter(modes.values())):
            returned = node.target(*args, **kwargs)
    except Exception:  # a value the fake tensors cannot replay: the edge stays as traced
        return None
    return next((a for a in sources if returned is a.meta.get("val")), None)


def follow_values(graph: fx.Graph) -> int:
    """Give the readers of every node that returns its argument itself that argument;
    returns how many such nodes there were."""
    found = 0
    for node in graph.nodes:
        source = returned_argument(node)
        if source is not None and node.users:
            node.replace_all_uses_with(source)
            found += 1
    return found
