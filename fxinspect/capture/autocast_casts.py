"""Autocast's cached casts in the eager tier's graph, held as the region holds them.

The eager tier records the ops a real run executes, autocast's casts among them: a
parameter cast to the region's precision becomes an ``aten._to_copy`` node. Replayed,
that node is a plain cast, dropped at its last use; in the model's own call autocast
caches the copy (a float32 leaf that requires grad, cast to the region's dtype) until
the region exits, through the backward too. :func:`hold_cached_casts` marks such nodes
to be held until the program's output (``node.meta[HELD_KEY]``, which the memory model
follows: a value held until the output is let go when the run ends), as the symbolic
and export tiers' programs leave those casts to autocast itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx

from .autocast_cache import autocast_on
from .held import HELD_KEY

__all__ = ["hold_cached_casts"]

_TO_COPY = torch.ops.aten._to_copy.default


def hold_cached_casts(graph: fx.Graph, attribute: Callable[[str], Any]) -> int:
    """Mark the recorded casts autocast, enabled now, caches (a float32 leaf that requires
    grad, cast to the region's dtype for its device) to be held until the run ends;
    ``attribute(target)`` is a ``get_attr`` node's tensor. Returns how many."""
    if not autocast_on() or not torch.is_autocast_cache_enabled():
        return 0
    output = next((n for n in reversed(graph.nodes) if n.op == "output"), None)
    marked = 0
    for node in graph.nodes if output is not None else ():
        source = node.args[0] if node.target is _TO_COPY and node.args else None
        if not isinstance(source, fx.Node) or source.op != "get_attr":
            continue
        t = attribute(str(source.target))
        cached = (
            isinstance(t, torch.Tensor)
            and t.dtype == torch.float32
            and t.is_leaf
            and t.requires_grad
            and not t._is_view()
            and torch.is_autocast_enabled(t.device.type)
            and node.kwargs.get("dtype") == torch.get_autocast_dtype(t.device.type)
        )
        if cached:
            node.meta[HELD_KEY] = output.name
            marked += 1
    return marked
