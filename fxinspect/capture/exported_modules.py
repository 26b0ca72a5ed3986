"""Module attribution for the export tier: which module of the user's model ran each node.

The export tier exports the user's model as the child :data:`ROOT_ATTR` of a thin
root, so every path in the exported program starts with it; :func:`model_path` takes
it off. Module paths come from each node's ``nn_module_stack`` (its last entry is the
innermost module); the stack keys tell repeated calls of one module apart (``"...a"``,
``"...a@1"``), which gives ``Capture.calls``. A module that runs no op at all
(``nn.Identity``) leaves no trace in the graph and has no call counted.

Example
-------
>>> model_path("model.layer1.0"), model_path("model"), model_path("_guards_fn")
('layer1.0', '', None)
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ..paths import parent
from ..records import OP_KINDS
from .base import MODULE_KEY, type_name
from .calls import number_calls

__all__ = ["ROOT_ATTR", "model_path", "tag_modules"]

ROOT_ATTR = "model"
"""The attribute of the export root that holds the user's model."""


def model_path(path: str) -> str | None:
    """A path of the export root as a path of the user's model; ``None`` for the root."""
    if path == ROOT_ATTR:
        return ""
    prefix = ROOT_ATTR + "."
    return path[len(prefix) :] if path.startswith(prefix) else None


class _Paths:
    """Module paths of the user's model: aliases resolved to the canonical path (the
    one ``named_modules()`` reports), class names looked up once."""

    def __init__(self, model: torch.nn.Module):
        canonical = {id(m): p for p, m in model.named_modules()}
        self.modules = {p: (canonical[id(m)], type_name(m)) for p, m in model.named_modules(remove_duplicate=False)}

    def get(self, raw: str) -> tuple[str, str] | None:
        """``(canonical path, class name)`` of a path of the export root, if a module."""
        path = model_path(raw)
        return None if path is None else self.modules.get(path)


def tag_modules(gm: fx.GraphModule, model: torch.nn.Module) -> tuple[dict[str, int], int]:
    """Set ``node.meta[MODULE_KEY]``; count module calls from the stacks' keys.

    Returns ``(calls, number of nodes whose stack named a path the model lacks)``.
    """
    paths = _Paths(model)
    root = ("", type_name(model))
    keys: dict[str, set[str]] = {}
    unknown = 0
    for node in gm.graph.nodes:
        if node.op not in OP_KINDS:
            continue
        stack = node.meta.get("nn_module_stack") or {}
        owner = None
        missing = False
        for key, value in stack.items():
            raw = value[0] if isinstance(value, tuple) else str(value)
            found = paths.get(raw)
            if found is None:
                missing = missing or model_path(raw) is not None
                continue
            keys.setdefault(found[0], set()).add(key)
            owner = found
        unknown += missing
        if owner is None:
            owner = _mutated_owner(node, paths) or root
        node.meta[MODULE_KEY] = owner
    number_calls(
        gm.graph, lambda entry: (paths.get(entry[0] if isinstance(entry, tuple) else str(entry)) or (None,))[0]
    )
    calls = {path: len(k) for path, k in keys.items()}
    calls[""] = 1  # the model itself ran once (a forward with no op leaves no key)
    return calls, unknown


def _mutated_owner(node: fx.Node, paths: _Paths) -> tuple[str, str] | None:
    """The module of a parameter/buffer a stackless node writes in place (``copy_``)."""
    target = node.args[0] if node.args else None
    if isinstance(target, fx.Node) and target.op == "get_attr" and "." in str(target.target):
        return paths.modules.get(parent(str(target.target)))  # targets are user paths by now
    return None
