"""Branches on buffers' values under symbolic tracing, taken as a plain call takes them.

The symbolic tier traces buffers (their writes and reads are ops of every call), so
``if self.steps < 10`` or ``if not self.initialized`` asks a proxy for a bool, which
torch.fx refuses. When the value depends on no input, only on buffers, parameters and
constants, and nothing traced so far wrote in place to what it reads, it is what the
model's state holds now: :func:`value_of` computes it from the real tensors (the ops
that compute it stay in the graph, counted each call), and the branch is fixed to it,
as a tracer fixes any branch on state. Anything else stays unknown, and tracing fails
as before (the submodule becomes a leaf, or a later tier captures).

Example
-------
>>> import torch, torch.fx as fx
>>> class Warm(torch.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.register_buffer("steps", torch.tensor(3))
...     def forward(self, x):
...         return x * 0.5 if self.steps < 10 else x
>>> class Tracer(fx.Tracer):
...     proxy_buffer_attributes = True
...     def to_bool(self, obj):
...         value = value_of(obj.node, self.root)
...         return super().to_bool(obj) if value is UNKNOWN else bool(value)
>>> [n.op for n in Tracer().trace(Warm()).nodes]     # steps < 10 is counted; the branch taken
['placeholder', 'get_attr', 'call_function', 'call_function', 'output']
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx

__all__ = ["UNKNOWN", "value_of"]

UNKNOWN = object()
"""What :func:`value_of` returns for a value it cannot know while tracing."""


def value_of(node: fx.Node, root: torch.nn.Module) -> Any:
    """The value ``node`` has now, if only the model's state makes it, else :data:`UNKNOWN`."""
    ancestors = _ancestors(node)
    if ancestors is None:
        return UNKNOWN
    read = {n.target for n in ancestors if n.op == "get_attr"}
    for n in node.graph.nodes:  # a state the traced ops write in place is not its value now
        if _writes_in_place(n) and _attribute_under(n.args[0] if n.args else None) in read:
            return UNKNOWN
    values: dict[fx.Node, Any] = {}
    try:
        with torch.no_grad():
            for n in ancestors:
                args, kwargs = fx.node.map_arg((n.args, n.kwargs), values.__getitem__)
                if n.op == "get_attr":
                    values[n] = _attr(root, n.target)
                elif n.op == "call_function":
                    values[n] = n.target(*args, **kwargs)
                else:  # call_method
                    values[n] = getattr(args[0], n.target)(*args[1:], **kwargs)
    except Exception:  # (a fake tensor's value, a method that needs more: unknown)
        return UNKNOWN
    return values[node]


def _ancestors(node: fx.Node) -> list[fx.Node] | None:
    """``node`` and what it is computed from, in graph order; ``None`` when an input, a
    module call or an in-place op is among them (no value to compute without effects)."""
    seen: set[fx.Node] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        if n.op not in ("get_attr", "call_function", "call_method") or _writes_in_place(n):
            return None
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return [n for n in node.graph.nodes if n in seen]


def _writes_in_place(node: fx.Node) -> bool:
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return node.op in ("call_method", "call_function") and isinstance(name, str) and _in_place_name(name)


def _in_place_name(name: str) -> bool:
    return name.endswith("_") and not name.endswith("__") or name in ("setitem", "__setitem__")


def _attribute_under(arg: Any) -> str | None:
    """The ``get_attr`` target a value is a view of, following first arguments."""
    while isinstance(arg, fx.Node) and arg.op in ("call_function", "call_method") and arg.args:
        arg = arg.args[0]
    return arg.target if isinstance(arg, fx.Node) and arg.op == "get_attr" else None


def _attr(root: torch.nn.Module, target: str) -> Any:
    """The tensor at ``target``, read past the tracer (which answers modules' attributes
    with proxies while it traces)."""
    value: Any = root
    for part in target.split("."):
        if isinstance(value, torch.nn.Module):
            for table in (value._parameters, value._buffers, value._modules):
                if part in table:
                    value = table[part]
                    break
            else:
                value = vars(value)[part]
        else:
            value = getattr(value, part)
    return value
