"""Which call of each enclosing module ran a node, read from the module stacks.

A module called three times runs its ops in three calls; a diagram draws a box per call
and a report keeps them apart. Every tier records, per op node, the stack of module
calls it ran in (``node.meta["nn_module_stack"]``: torch.fx and ``torch.export`` key
a repeated call ``"path@1"``, ``"path@2"``; the eager tier keys its own the same way).
:func:`number_calls` turns those stacks into ``node.meta[CALL_KEY]``: for each module
on the node's path, from the root's child down, which of its calls ran the node,
counted from 0. A module on the path that was never called itself (its parent called
its child directly) counts as call 0.

Example
-------
>>> import torch
>>> from fxinspect.capture import capture
>>> class Loop(torch.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.small = torch.nn.Linear(4, 4)
...     def forward(self, x):
...         for _ in range(3):
...             x = x + self.small(x)
...         return x
>>> cap = capture(Loop(), (torch.randn(1, 4),), {})
>>> [(n.name, n.meta[CALL_KEY]) for n in cap.graph_module.graph.nodes if n.op == "call_module"]
[('small', (0,)), ('small_1', (1,)), ('small_2', (2,))]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx as fx

from .base import MODULE_KEY

__all__ = ["CALLED_KEY", "CALL_KEY", "STACK_KEY", "number_calls"]

CALL_KEY = "fxinspect_call"
"""``node.meta[CALL_KEY]``: per module on the node's path (root's child first), which call ran it."""

CALLED_KEY = "fxinspect_called"
"""``node.meta[CALLED_KEY]``: per module on the node's path, whether it was called itself
(a ``ModuleList`` or a module whose parent called its child directly was not)."""

STACK_KEY = "nn_module_stack"
"""The stack of module calls a node ran in: ``{call key: (module path, class)}``, outermost first."""


def number_calls(graph: fx.Graph, resolve: Callable[[Any], str | None]) -> None:
    """Set ``node.meta[CALL_KEY]`` on every node tagged with a module.

    ``resolve`` maps a stack entry's value to the module's path in the user's model
    (``None`` for an entry outside it). Calls are numbered per module in order of
    their first node, so the numbers do not depend on how a tier spells its keys.
    """
    number: dict[str, dict[str, int]] = {}  # module path -> {call key: call number}
    cache: dict[tuple[int, str], tuple[tuple[int, ...], tuple[bool, ...]]] = {}  # (id of a stack, path) -> ...
    stacks = []  # the stacks cached above, kept alive so that their ids stay theirs
    for node in graph.nodes:
        tag = node.meta.get(MODULE_KEY)
        if tag is None:
            continue
        path = tag[0]
        stack = node.meta.get(STACK_KEY) or {}
        key = (id(stack), path)
        found = cache.get(key)
        if found is None:
            on_stack: dict[str, int] = {}
            for call, value in stack.items():
                module = resolve(value)
                if module is not None:
                    seen = number.setdefault(module, {})
                    on_stack[module] = seen.setdefault(call, len(seen))
            prefixes = path.split(".") if path else []
            paths = [".".join(prefixes[: i + 1]) for i in range(len(prefixes))]
            found = tuple(on_stack.get(p, 0) for p in paths), tuple(p in on_stack for p in paths)
            cache[key] = found
            stacks.append(stack)
        node.meta[CALL_KEY], node.meta[CALLED_KEY] = found
