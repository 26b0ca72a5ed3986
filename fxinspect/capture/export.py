"""Tier ``export``: ``torch.export.export(..., strict=False)`` with module attribution.

Export traces the model's Python with fake tensors, so it handles what symbolic
tracing cannot: loops over tensor dimensions, item assignment, ``isinstance`` checks
on inputs, dataclass outputs (every Hugging Face transformer). Its graph is at aten
level (the default, non-decomposed training IR: ``aten.linear``, ``aten.conv2d``,
``aten.scaled_dot_product_attention``), specialised to the example inputs' shapes.

The model is exported through a thin root whose ``forward`` takes the flat tensor
inputs, rebuilds the user's ``(args, kwargs)`` (non-tensor leaves are constants) and
returns the output's leaves, so the calling convention matches every other tier. The
unlifted program (``ExportedProgram.module()``) is then cleaned into a plain
``GraphModule``:

* export's input guard call and ``aten._assert_tensor_metadata`` checks are dropped;
* grad-mode and autocast regions (``torch.no_grad()`` inside a forward becomes a
  ``wrap_with_set_grad_enabled`` call of a sub-graph) are inlined between two nodes
  that set and restore the mode, so their ops are nodes of their own;
* placeholders get the readable input names, the pytree code generation is replaced
  by a plain one, unused attribute reads are removed;
* attribute reads use the model's own names (``fc.weight``, not ``model.fc.weight``)
  and its own tensors, so ``Capture.attr_prefix`` is empty.

Module paths come from each node's ``nn_module_stack`` (its last entry is the
innermost module); the stack keys tell repeated calls of one module apart
(``"...a"``, ``"...a@1"``), which gives ``Capture.calls``. A module that runs no op at
all (``nn.Identity``) leaves no trace in the graph and has no call counted.

Example
-------
>>> import torch
>>> from fxinspect.capture.inputs import FlatInputs
>>> m = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU())
>>> cap = trace_export(m, FlatInputs.build((torch.randn(1, 4),), {}))
>>> [(n.name, n.meta[MODULE_KEY][0]) for n in cap.graph_module.graph.nodes if n.op == "call_function"]
[('linear', '0'), ('relu', '1')]
"""

from __future__ import annotations

import operator
from typing import Any, Iterable

import torch
import torch.fx as fx
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.utils import _pytree as pytree

from .base import MODULE_KEY, Capture, resolve_attr, type_name
from .inputs import FlatInputs

__all__ = ["trace_export"]

ROOT_ATTR = "model"
"""The attribute of the export root that holds the user's model."""

_DROPPED = tuple(
    getattr(torch.ops.aten, name).default for name in ("_assert_tensor_metadata",) if hasattr(torch.ops.aten, name)
)
"""Checks export inserts around ``.to()`` calls: not part of the model's computation."""


class _Root(torch.nn.Module):
    """Calls the user's model on rebuilt inputs and returns the output's leaves."""

    def __init__(self, model: torch.nn.Module, inputs: FlatInputs):
        super().__init__()
        self.model = model
        self._inputs = inputs
        # export restores the module's own attributes (lists too) after tracing: the
        # output's tree spec is kept on a plain object the root refers to
        self._seen = _Seen()

    def forward(self, *tensors: torch.Tensor) -> tuple:
        args, kwargs = self._inputs.rebuild(list(tensors))
        leaves, spec = pytree.tree_flatten(self.model(*args, **kwargs))
        self._seen.spec = spec
        return tuple(leaves)

    @property
    def out_spec(self) -> pytree.TreeSpec | None:
        return self._seen.spec


class _Seen:
    spec: pytree.TreeSpec | None = None


def _strip(path: str) -> str | None:
    """A path of the export root as a path of the user's model; ``None`` for the root."""
    if path == ROOT_ATTR:
        return ""
    prefix = ROOT_ATTR + "."
    return path[len(prefix) :] if path.startswith(prefix) else None


# -- grad-mode and autocast regions -------------------------------------------------


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


def _inline_regions(gm: fx.GraphModule) -> int:
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


# -- cleaning the unlifted program ---------------------------------------------------


def _drop_checks(graph: fx.Graph) -> None:
    """Remove export's guard call and metadata assertions (nodes nothing uses)."""
    for node in list(graph.nodes):
        guard = node.op == "call_module" and str(node.target).startswith("_guards_fn")
        if (guard or (node.op == "call_function" and node.target in _DROPPED)) and not node.users:
            graph.erase_node(node)


def _rename(graph: fx.Graph, inputs: FlatInputs) -> None:
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(inputs.names):
        raise RuntimeError(
            f"export produced {len(placeholders)} inputs for {len(inputs.names)} tensor inputs"
        )
    for node, name in zip(placeholders, inputs.names):
        node._rename(name)
        node.target = node.name
    for node in graph.nodes:
        if node.op == "get_attr":
            if not node.users:
                graph.erase_node(node)
            elif node.name.startswith(ROOT_ATTR + "_"):  # "model_layer1_0_conv1_weight"
                node._rename(node.name[len(ROOT_ATTR) + 1 :])


def _user_targets(unlifted: fx.GraphModule, graph: fx.Graph) -> dict[str, Any]:
    """Retarget attribute reads to the user's names (``"model.fc.weight"`` ->
    ``"fc.weight"``); returns ``{target: value}``, the new module's attributes (the
    model's own tensors, not copies; lifted constants and sub-graphs keep their names)."""
    attributes: dict[str, Any] = {}
    for node in graph.nodes:
        if node.op not in ("get_attr", "call_module"):
            continue
        target = str(node.target)
        value = resolve_attr(unlifted, target)
        new = _strip(target) or target
        if attributes.get(new, value) is not value:  # a name taken by another attribute
            new = target
        attributes[new] = value
        node.target = new
    return attributes


class _Paths:
    """Module paths of the user's model: aliases resolved to the canonical path (the
    one ``named_modules()`` reports), class names looked up once."""

    def __init__(self, model: torch.nn.Module):
        canonical = {id(m): p for p, m in model.named_modules()}
        self.modules = {p: (canonical[id(m)], type_name(m)) for p, m in model.named_modules(remove_duplicate=False)}

    def get(self, raw: str) -> tuple[str, str] | None:
        """``(canonical path, class name)`` of a path of the export root, if a module."""
        path = _strip(raw)
        return None if path is None else self.modules.get(path)


def _tag_modules(gm: fx.GraphModule, model: torch.nn.Module) -> tuple[dict[str, int], int]:
    """Set ``node.meta[MODULE_KEY]``; count module calls from the stacks' keys.

    Returns ``(calls, number of nodes whose stack named a path the model lacks)``.
    """
    paths = _Paths(model)
    root = ("", type_name(model))
    keys: dict[str, set[str]] = {}
    unknown = 0
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        stack = node.meta.get("nn_module_stack") or {}
        owner = None
        missing = False
        for key, value in stack.items():
            raw = value[0] if isinstance(value, tuple) else str(value)
            found = paths.get(raw)
            if found is None:
                missing = missing or _strip(raw) is not None
                continue
            keys.setdefault(found[0], set()).add(key)
            owner = found
        unknown += missing
        if owner is None:
            owner = _mutated_owner(node, paths) or root
        node.meta[MODULE_KEY] = owner
    calls = {path: len(k) for path, k in keys.items()}
    calls[""] = 1  # the model itself ran once (a forward with no op leaves no key)
    return calls, unknown


def _mutated_owner(node: fx.Node, paths: _Paths) -> tuple[str, str] | None:
    """The module of a parameter/buffer a stackless node writes in place (``copy_``)."""
    target = node.args[0] if node.args else None
    if isinstance(target, fx.Node) and target.op == "get_attr" and "." in str(target.target):
        return paths.modules.get(str(target.target).rsplit(".", 1)[0])  # targets are user paths by now
    return None


def trace_export(model: torch.nn.Module, inputs: FlatInputs, leaf_modules: Iterable[Any] = ()) -> Capture:
    """Export ``model`` (non-strict) and turn the program into a tagged flat GraphModule."""
    notes: list[str] = []
    if tuple(leaf_modules):
        notes.append("export: leaf_modules not applied (the export graph is aten-level; every module is traced through)")
    root = _Root(model, inputs)
    program = torch.export.export(root, tuple(inputs.tensors), strict=False)
    unlifted = program.module()
    graph = unlifted.graph
    _drop_checks(graph)
    inlined = _inline_regions(unlifted)
    if inlined:
        notes.append(f"export: inlined {inlined} grad-mode/autocast region(s) of the forward")
    graph._codegen = fx.graph.CodeGen()  # flat inputs in, flat tuple of output leaves out
    _rename(graph, inputs)
    attributes = _user_targets(unlifted, graph)
    # compiled on first call only: the analysis runs probed copies of it
    gm = _LazyGraphModule(attributes, graph, class_name=type_name(model))
    gm.graph.lint()
    calls, unknown = _tag_modules(gm, model)
    if unknown:
        notes.append(f"export: {unknown} node(s) ran in modules the model does not register; attributed to the nearest registered parent")
    return Capture(
        graph_module=gm,
        method="export",
        inputs=inputs,
        calls=calls,
        notes=notes,
        out_spec=root.out_spec,
    )
