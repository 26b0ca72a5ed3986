"""Tier ``eager``: record the aten ops one real run executes, as an FX graph.

The model runs once for real under a ``TorchDispatchMode`` that appends one
``call_function`` node per aten op (target: the ``OpOverload`` itself) and global
module hooks that keep a stack of running modules, so each op is attributed to the
innermost module of the user's model that was running. The graph is one *executed*
path: Python control flow, data-dependent branches and values read back with
``.item()`` (``aten._local_scalar_dense``) are fixed to this input; random ops stay
random ops.

Tensors are mapped to the node that produced them:

* placeholders for the flat input tensors, ``get_attr`` nodes (created at first use)
  for the model's parameters and buffers under their dotted names — the graph module
  is a fresh container holding references to the user's tensors, never its modules;
* an op's tensor outputs (``getitem`` nodes are added for tuple/list outputs when an
  element is first used); an in-place or ``out=`` op returns the very object it wrote,
  which is then mapped to the writing node;
* a tensor object is recognised by its ``id`` (checked through a weak reference, so a
  reused ``id`` is never mistaken) and, failing that, by its storage and view geometry
  (autograd or ``.data`` can hand out a new Python object for the same data);
* any other tensor (``torch.tensor`` literals, unregistered tensor attributes) becomes
  a ``get_attr`` constant referencing that tensor.

Example
-------
>>> import torch
>>> from fxinspect.capture.inputs import FlatInputs
>>> m = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU())
>>> cap = trace_eager(m, FlatInputs.build((torch.randn(3, 4),), {}))
>>> [(str(n.target), n.meta["fxinspect_module"][0]) for n in cap.graph_module.graph.nodes if n.op == "call_function"]
[('aten.t.default', '0'), ('aten.addmm.default', '0'), ('aten.relu.default', '1')]
"""

from __future__ import annotations

import operator
import weakref
from typing import Any, Iterable

import torch
import torch.fx as fx
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from .base import MODULE_KEY, Capture, type_name
from .export import restore_grad_enabled, set_grad_enabled
from .inputs import FlatInputs, flatten_outputs

CONST_PREFIX = "_fxinspect_const"

_LITERALS = (type(None), bool, int, float, complex, str, torch.dtype, torch.device, torch.layout, torch.memory_format)
_LITERALS += (torch.qscheme,) if hasattr(torch, "qscheme") else ()
_RANDOM_TAG = getattr(torch.Tag, "nondeterministic_seeded", None)


def _storage_key(t: torch.Tensor) -> tuple[tuple, Any] | None:
    """``(key, weak storage ref)`` naming ``t``'s data and view geometry, or ``None``
    (sparse and other storage-less tensors). The weak reference keeps the storage's
    address from being reused while the key is held."""
    try:
        storage = t.untyped_storage()
        ref = StorageWeakRef(storage)
        key = (ref.cdata, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype, t.device)
    except Exception:  # sparse, nested, functional wrappers: identity lookup only
        return None
    return key, ref


_DETACH = torch.ops.aten.detach.default


def _view_returns(func: torch._ops.OpOverload) -> list[bool]:
    """For each return of ``func``: is it a view of an input (aliased, not written)?"""
    return [r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns]


class _Ref:
    """Where a tensor comes from: a node (and a getitem path into its output), or a
    get_attr target still to be added at first use."""

    __slots__ = ("node", "path", "target", "value")

    def __init__(self, node: fx.Node | None = None, path: tuple[int, ...] = (), target: str = "", value: Any = None):
        self.node, self.path, self.target, self.value = node, path, target, value


class _Builder:
    """The graph under construction and the tensor -> node maps."""

    def __init__(self, model: torch.nn.Module, inputs: FlatInputs):
        self.graph = fx.Graph()
        self.attrs: dict[str, Any] = {}
        self._by_id: dict[int, tuple[weakref.ref, _Ref]] = {}
        self._by_storage: dict[tuple, tuple[Any, _Ref]] = {}
        self._items: dict[tuple[fx.Node, tuple[int, ...]], fx.Node] = {}
        self._last_item: dict[fx.Node, fx.Node] = {}
        self._views: dict[torch._ops.OpOverload, list[bool]] = {}
        self.constants = 0
        self.scalars = 0
        self.random_ops: dict[str, int] = {}
        self.module = ("", type_name(model))
        self._grad = self._grad_entry = torch.is_grad_enabled()
        self._grad_restore: fx.Node | None = None
        # parameters and buffers first, so that an input that is also a parameter stays an input
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            self._remember(t, _Ref(target=name, value=t))
        for name, t in zip(inputs.names, inputs.tensors):
            self._remember(t, _Ref(self.graph.placeholder(name)))

    # ------------------------------------------------------------------ tensor maps

    def _remember(self, t: torch.Tensor, ref: _Ref, view: bool = False) -> None:
        """Map ``t`` to ``ref``. A view keeps an older owner of the same data and
        geometry (same values, and the older node is the one the program computed)."""
        try:
            self._by_id[id(t)] = (weakref.ref(t), ref)
        except TypeError:  # objects without weak references: storage key only
            pass
        found = _storage_key(t)
        if found is not None:
            key, storage_ref = found
            if not (view and key in self._by_storage):
                self._by_storage[key] = (storage_ref, ref)

    def _find(self, t: torch.Tensor) -> _Ref | None:
        hit = self._by_id.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        found = _storage_key(t)
        if found is not None:
            hit = self._by_storage.get(found[0])
            if hit is not None:
                return hit[1]
        return None

    def node_of(self, t: torch.Tensor) -> fx.Node:
        """The node whose value is ``t`` (a new get_attr constant if none is)."""
        ref = self._find(t)
        if ref is None:
            ref = _Ref(target=self._constant_name(), value=t)
            self._remember(t, ref)
        if ref.node is None:  # a parameter, buffer or constant used for the first time
            self.attrs[ref.target] = ref.value
            ref.node = self.graph.get_attr(ref.target)
        return self._item(ref.node, ref.path) if ref.path else ref.node

    def _item(self, node: fx.Node, path: tuple[int, ...]) -> fx.Node:
        """``node[path[0]][path[1]]...``, added right after the producer once."""
        key = (node, path)
        got = self._items.get(key)
        if got is not None:
            return got
        parent = self._item(node, path[:-1]) if len(path) > 1 else node
        anchor = self._last_item.get(node, node)
        with self.graph.inserting_after(anchor):
            got = self.graph.call_function(operator.getitem, (parent, path[-1]))
        got.meta[MODULE_KEY] = node.meta.get(MODULE_KEY, self.module)
        self._last_item[node] = got
        self._items[key] = got
        return got

    # ------------------------------------------------------------------ recording

    def value(self, value: Any) -> Any:
        """An op argument or output leaf in graph terms: nodes for tensors, literals as is."""
        if isinstance(value, torch.Tensor):
            return self.node_of(value)
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            items = [self.value(v) for v in value]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, _LITERALS):
            return value
        # generators, script objects, ...: referenced through the root, not printed as code
        target = self._constant_name()
        self.attrs[target] = value
        return self.graph.get_attr(target)

    def _constant_name(self) -> str:
        self.constants += 1
        return f"{CONST_PREFIX}{self.constants - 1}"

    def _grad_mode(self, enabled: bool) -> None:
        """Reproduce a grad-mode switch inside the forward (``torch.no_grad()`` regions),
        with the same helper nodes the export tier uses."""
        node = self.graph.call_function(set_grad_enabled, (enabled,))
        node.meta[MODULE_KEY] = self.module
        if self._grad_restore is None:
            self._grad_restore = node  # returns the mode the graph was entered with
        self._grad = enabled

    def finish_grad_mode(self) -> None:
        if self._grad_restore is not None and self._grad != self._grad_entry:
            node = self.graph.call_function(restore_grad_enabled, (self._grad_restore,))
            node.meta[MODULE_KEY] = self.module

    def record(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict, out: Any) -> None:
        if torch.is_grad_enabled() != self._grad:
            self._grad_mode(not self._grad)
        node = self.graph.create_node(
            "call_function",
            func,
            self.value(tuple(args)),
            {k: self.value(v) for k, v in kwargs.items()},
            name=func._opname,  # "convolution", "add_": the op, as symbolic graphs name nodes
        )
        node.meta[MODULE_KEY] = self.module
        if func is torch.ops.aten._local_scalar_dense.default:
            self.scalars += 1
        if _RANDOM_TAG is not None and _RANDOM_TAG in func.tags:
            self.random_ops[str(func)] = self.random_ops.get(str(func), 0) + 1
        views = self._views.get(func)
        if views is None:
            views = self._views[func] = _view_returns(func)
        if isinstance(out, (list, tuple)) and len(views) > 1:
            for i, item in enumerate(out):
                self._outputs(item, node, (i,), i < len(views) and views[i])
        else:
            self._outputs(out, node, (), bool(views) and views[0])

    def _outputs(self, out: Any, node: fx.Node, path: tuple[int, ...], view: bool) -> None:
        if isinstance(out, torch.Tensor):
            self._remember(out, _Ref(node, path), view)
        elif isinstance(out, (list, tuple)):
            for i, item in enumerate(out):
                self._outputs(item, node, path + (i,), view)

    def prune(self) -> None:
        """Drop ``detach`` nodes nothing used: autograd issues them itself when it saves
        an op's output for backward, and does so again whenever the graph runs."""
        for node in reversed(list(self.graph.nodes)):
            if node.op == "call_function" and node.target is _DETACH and not node.users:
                self.graph.erase_node(node)


class _Recorder(TorchDispatchMode):
    """Runs every aten op and records it with the builder."""

    def __init__(self, builder: _Builder):
        super().__init__()
        self.builder = builder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.builder.record(func, args, kwargs, out)
        return out


class _ModuleStack:
    """Global forward hooks: which module of the user's model is running, and how often
    each ran (counted before the forward)."""

    def __init__(self, model: torch.nn.Module, builder: _Builder):
        self.paths = {id(m): (p, type_name(m)) for p, m in model.named_modules()}
        self.builder = builder
        self.stack: list[tuple[int, tuple[str, str]]] = []
        self.root = ("", type_name(model))
        self.calls: dict[str, int] = {}

    def pre(self, module: torch.nn.Module, args: Any) -> None:
        found = self.paths.get(id(module))
        if found is None:  # a module outside the user's model: ops go to the caller
            return
        self.calls[found[0]] = self.calls.get(found[0], 0) + 1
        self.stack.append((id(module), found))
        self.builder.module = found

    def post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        key = id(module)
        if key not in self.paths or all(k != key for k, _ in self.stack):
            return
        while self.stack:  # also drops frames a caught exception left behind
            if self.stack.pop()[0] == key:
                break
        self.builder.module = self.stack[-1][1] if self.stack else self.root


def trace_eager(model: torch.nn.Module, inputs: FlatInputs, leaf_modules: Iterable[Any] = ()) -> Capture:
    """Run ``model`` once and capture the aten ops it executed (``leaf_modules`` need no
    special handling here: every op inside them is a node of its own)."""
    builder = _Builder(model, inputs)
    modules = _ModuleStack(model, builder)
    hooks = []
    try:
        hooks.append(torch.nn.modules.module.register_module_forward_pre_hook(modules.pre))
        hooks.append(torch.nn.modules.module.register_module_forward_hook(modules.post, always_call=True))
        with _Recorder(builder):
            out = model(*inputs.args, **inputs.kwargs)
    finally:
        for handle in hooks:
            handle.remove()
    leaves, spec = flatten_outputs(out)
    builder.finish_grad_mode()
    builder.graph.output(tuple(builder.value(leaf) for leaf in leaves))
    builder.prune()
    gm = fx.GraphModule(builder.attrs, builder.graph, class_name=type_name(model))
    notes = ["eager: one executed path; data-dependent branches are fixed to this input"]
    if builder.scalars:
        notes.append(f"eager: {builder.scalars} value(s) read back from tensors (.item(), bool) are baked into later ops")
    if builder.random_ops:
        ops = ", ".join(f"{op} x{n}" for op, n in sorted(builder.random_ops.items()))
        notes.append(f"eager: random ops draw new values on every run ({ops})")
    constants = [k for k, v in builder.attrs.items() if k.startswith(CONST_PREFIX) and isinstance(v, torch.Tensor)]
    if constants:
        notes.append(f"eager: {len(constants)} tensor(s) made outside any recorded op are constants")
    return Capture(
        graph_module=gm,
        method="eager",
        inputs=inputs,
        calls=modules.calls,
        notes=notes,
        out_spec=spec,
    )
