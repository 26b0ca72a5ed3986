"""Grad-mode and autocast regions of a captured forward, as plain calls in its graph.

A ``torch.no_grad()`` or ``torch.autocast(...)`` block inside a forward becomes two
nodes: one that enters the mode (and returns what leaving needs) and one that leaves
it, with the region's ops as nodes of their own in between. The eager tier records
grad-mode switches as such pairs; :func:`inline_regions` turns the export tier's
region sub-graphs (``wrap_with_set_grad_enabled``, ``wrap_with_autocast`` calls) into
them.

Example
-------
>>> import torch
>>> previous = set_grad_enabled(False)
>>> torch.is_grad_enabled(), previous
(False, True)
>>> restore_grad_enabled(previous)
>>> torch.is_grad_enabled()
True
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx as fx

from .base import resolve_attr

__all__ = ["enter_autocast", "exit_autocast", "inline_regions", "restore_grad_enabled", "set_grad_enabled"]


def set_grad_enabled(enabled: bool) -> bool:
    """Enter a grad-mode region of the captured forward; returns the previous mode."""
    previous = torch.is_grad_enabled()
    torch._C._set_grad_enabled(enabled)
    return previous


def restore_grad_enabled(previous: bool) -> None:
    """Leave a grad-mode region entered by :func:`set_grad_enabled`."""
    torch._C._set_grad_enabled(previous)


def enter_autocast(device_type: str, dtype: Any, enabled: bool, cache_enabled: bool) -> Any:
    """Enter an autocast region of the captured forward; returns its context."""
    ctx = torch.amp.autocast(device_type=device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
    ctx.__enter__()
    return ctx


def exit_autocast(ctx: Any) -> None:
    """Leave an autocast region entered by :func:`enter_autocast`."""
    ctx.__exit__(None, None, None)


# -- inlining export's region sub-graphs ----------------------------------------------


def _region_hops() -> dict[Any, tuple[int, Any, Any]]:
    """Higher-order ops wrapping a sub-graph in a mode: ``op -> (number of mode
    arguments before the sub-graph, enter, exit)``."""
    hops = {}
    higher = torch.ops.higher_order
    if hasattr(higher, "wrap_with_set_grad_enabled"):
        hops[higher.wrap_with_set_grad_enabled] = (1, set_grad_enabled, restore_grad_enabled)
    if hasattr(higher, "wrap_with_autocast"):
        hops[higher.wrap_with_autocast] = (4, enter_autocast, exit_autocast)
    return hops


def _fresh_attr(root: torch.nn.Module, base: str, value: Any) -> str:
    name, i = base, 0
    while hasattr(root, name):
        i += 1
        name = f"{base}_{i}"
    if isinstance(value, torch.nn.Module):
        root.add_module(name, value)
    else:
        setattr(root, name, value)
    return name


def _inline_region(gm: fx.GraphModule, node: fx.Node, n_modes: int, enter: Any, exit_: Any) -> bool:
    """Replace one region call by ``enter(*modes)``, the sub-graph's nodes, ``exit``."""
    modes, sub_node, operands = node.args[:n_modes], node.args[n_modes], node.args[n_modes + 1 :]
    if not (isinstance(sub_node, fx.Node) and sub_node.op == "get_attr") or node.kwargs:
        return False
    if any(u.op != "call_function" or u.target is not operator.getitem for u in node.users):
        return False
    sub = resolve_attr(gm, str(sub_node.target))
    if not isinstance(sub, fx.GraphModule):
        return False
    graph = gm.graph
    stack = node.meta.get("nn_module_stack")
    env: dict[fx.Node, Any] = {}
    outputs: Any = ()
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(operands):
        return False
    with graph.inserting_before(node):
        start = graph.call_function(enter, tuple(modes))
        start.meta["nn_module_stack"] = stack
        for ph, value in zip(placeholders, operands):
            env[ph] = value
        for inner in sub.graph.nodes:
            if inner.op == "placeholder":
                continue
            if inner.op == "output":
                outputs = fx.node.map_arg(inner.args[0], lambda a: env[a])
                break
            if inner.op == "get_attr":
                name = _fresh_attr(gm, str(inner.target).replace(".", "_"), resolve_attr(sub, str(inner.target)))
                env[inner] = graph.get_attr(name)
            else:
                copied = graph.node_copy(inner, lambda a: env[a])
                if "nn_module_stack" not in copied.meta and stack is not None:
                    copied.meta["nn_module_stack"] = stack
                env[inner] = copied
        end = graph.call_function(exit_, (start,))
        end.meta["nn_module_stack"] = stack
    if not isinstance(outputs, (tuple, list)):
        outputs = (outputs,)
    for user in list(node.users):
        user.replace_all_uses_with(outputs[user.args[1]])
        graph.erase_node(user)
    graph.erase_node(node)
    if not sub_node.users:
        graph.erase_node(sub_node)
    return True


def inline_regions(gm: fx.GraphModule) -> int:
    """Inline every grad-mode/autocast region (nested ones too); returns how many."""
    hops = _region_hops()
    count = 0
    changed = True
    while changed:
        changed = False
        for node in list(gm.graph.nodes):
            if node.op == "call_function" and node.target in hops:
                if _inline_region(gm, node, *hops[node.target]):
                    count += 1
                    changed = True
    return count
