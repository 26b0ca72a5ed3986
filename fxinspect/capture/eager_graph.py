"""The eager tier's graph builder: aten ops recorded during a real run, as an FX graph.

:class:`GraphBuilder` appends one ``call_function`` node per recorded aten op
(target: the ``OpOverload`` itself) and maps each tensor to the node that produced it:

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

Grad-mode switches are recorded as the calls of :mod:`fxinspect.capture.regions`;
``detach`` calls nothing used (autograd's own) are pruned at the end. Which module an
op ran in is asked of ``GraphBuilder.locate`` (see :mod:`fxinspect.capture.eager_hooks`).

Example
-------
>>> import torch
>>> from fxinspect.capture.inputs import FlatInputs
>>> x = torch.ones(2)
>>> builder = GraphBuilder(torch.nn.Module(), FlatInputs.build((x,), {}))
>>> builder.record(torch.ops.aten.relu.default, (x,), {}, torch.relu(x))
>>> [(n.op, str(n.target)) for n in builder.graph.nodes]
[('placeholder', 'input_0'), ('call_function', 'aten.relu.default')]
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
from torch.multiprocessing.reductions import StorageWeakRef

from .base import MODULE_KEY, type_name
from .calls import STACK_KEY
from .inputs import FlatInputs
from .regions import restore_grad_enabled, set_grad_enabled

__all__ = ["CONST_PREFIX", "GraphBuilder"]

CONST_PREFIX = "_fxinspect_const"
"""Attribute-name prefix of the constants (literal tensors, opaque objects) in the graph."""

_LITERALS = (type(None), bool, int, float, complex, str, torch.dtype, torch.device, torch.layout, torch.memory_format)
_LITERALS += (torch.qscheme,) if hasattr(torch, "qscheme") else ()
_RANDOM_TAG = getattr(torch.Tag, "nondeterministic_seeded", None)
_DETACH = torch.ops.aten.detach.default


def _storage_key(t: torch.Tensor) -> tuple | None:
    """A key naming ``t``'s data and view geometry, or ``None`` (sparse and other
    storage-less tensors)."""
    try:
        storage = t.untyped_storage()
        return (storage._cdata, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype, t.device)
    except Exception:  # sparse, nested, functional wrappers: identity lookup only
        return None


def _view_returns(func: torch._ops.OpOverload) -> list[bool]:
    """For each return of ``func``: is it a view of an input (aliased, not written)?"""
    return [r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns]


def _draws_random(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> bool:
    """A seeded random op that draws here (attention with ``dropout_p=0`` and dropout
    outside training are tagged random but draw nothing)."""
    if _RANDOM_TAG is None or _RANDOM_TAG not in func.tags:
        return False
    for i, arg in enumerate(func._schema.arguments):
        if arg.name in ("dropout_p", "p", "train"):
            value = args[i] if i < len(args) else kwargs.get(arg.name, arg.default_value)
            if isinstance(value, (bool, int, float)) and not value:
                return False
    return True


class _Ref:
    """Where a tensor comes from: a node (and a getitem path into its output), or a
    get_attr target still to be added at first use."""

    __slots__ = ("node", "path", "target", "value")

    def __init__(self, node: fx.Node | None = None, path: tuple[int, ...] = (), target: str = "", value: Any = None):
        self.node, self.path, self.target, self.value = node, path, target, value


class GraphBuilder:
    """The graph under construction and the tensor -> node maps."""

    def __init__(self, model: torch.nn.Module, inputs: FlatInputs):
        self.graph = fx.Graph()
        self.attrs: dict[str, Any] = {}
        self._by_id: dict[int, tuple[weakref.ref, _Ref]] = {}
        self._by_storage: dict[tuple, tuple[Any, _Ref]] = {}
        self._items: dict[tuple[fx.Node, tuple[int, ...]], fx.Node] = {}
        self._last_item: dict[fx.Node, fx.Node] = {}
        self._views: dict[torch._ops.OpOverload, list[bool]] = {}
        self.c_calls: Any = None  # an eager_calls.CCalls, told of every op node
        self.constants = 0
        self.scalars = 0
        self.random_ops: dict[str, int] = {}
        self.module = ("", type_name(model))
        self.calls: dict[str, tuple[str, str]] = {}  # the module calls running, as STACK_KEY (set by RunningModules)
        self.locate: Callable[[], tuple[str, str]] | None = None  # set by eager_hooks.RunningModules
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
        key = _storage_key(t)
        if key is not None and not (view and key in self._by_storage):
            # the weak reference keeps the storage's address from being reused while the key is held
            self._by_storage[key] = (StorageWeakRef(t.untyped_storage()), ref)

    def _find(self, t: torch.Tensor) -> _Ref | None:
        hit = self._by_id.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        key = _storage_key(t)
        hit = self._by_storage.get(key) if key is not None else None
        return hit[1] if hit is not None else None

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

    def known(self, value: Any) -> fx.Node | None:
        """The node whose value is ``value``, when it is a tensor the run made or was given."""
        if not isinstance(value, torch.Tensor) or self._find(value) is None:
            return None
        return self.node_of(value)

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
        got.meta[STACK_KEY] = node.meta.get(STACK_KEY, self.calls)
        self._last_item[node] = got
        self._items[key] = got
        return got

    # ------------------------------------------------------------------ recording

    def value(self, value: Any) -> Any:
        """An op argument or output leaf in graph terms: nodes for tensors, literals as is."""
        # not tensors.tensors_in: the container structure is kept, with nodes in it
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

    def sync_grad_mode(self) -> None:
        """Called before each op and at module boundaries, so that a switch is charged to
        the module whose code made it."""
        if torch.is_grad_enabled() != self._grad:
            self._grad_mode(not self._grad)

    def record(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict, out: Any) -> None:
        self.sync_grad_mode()
        node = self.graph.create_node(
            "call_function",
            func,
            self.value(tuple(args)),
            {k: self.value(v) for k, v in kwargs.items()},
            name=func._opname,  # "convolution", "add_": the op, as symbolic graphs name nodes
        )
        node.meta[MODULE_KEY] = self.locate() if self.locate is not None else self.module
        node.meta[STACK_KEY] = self.calls
        if self.c_calls is not None:
            self.c_calls.record(node)
        if func is torch.ops.aten._local_scalar_dense.default:
            self.scalars += 1
        if _draws_random(func, args, kwargs):
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
        # not tensors.tensors_in: each tensor's getitem path into the output is needed
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
