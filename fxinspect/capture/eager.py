"""Tier ``eager``: record the aten ops one real run executes, as an FX graph.

The model runs once for real under a ``TorchDispatchMode`` that appends one
``call_function`` node per aten op (target: the ``OpOverload`` itself) and global
module hooks that keep a stack of running modules, so each op is attributed to the
innermost module of the user's model that was running. The graph is one *executed*
path: Python control flow, data-dependent branches and values read back with
``.item()`` (``aten._local_scalar_dense``) are fixed to this input; random ops stay
random ops (the global RNG is rewound after the run, so the graph's first run draws
the same numbers the captured run drew).

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

Also reproduced: grad-mode switches inside the forward (``torch.no_grad()`` regions,
with the export tier's ``set_grad_enabled`` nodes). Left out: ``detach`` calls nothing
used (autograd's own, when it saves an output for backward) and ``prim`` ops (fake
tensors asking for their device). Module hooks see only ``module(...)`` calls; an op
in a method of a submodule (``self.transform.postprocess(...)``) or in a direct
``.forward()`` call is placed by the ``self`` of the frames on the call stack between
the op and the running module (``calls`` counts hooked calls only). On meta/fake tensors the tier works
until the model needs a value (``.item()``, a data-dependent shape), and says so.

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
import sys
import threading
import weakref
from typing import Any, Callable, Iterable

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from .base import MODULE_KEY, Capture, type_name
from .regions import restore_grad_enabled, set_grad_enabled
from .inputs import FlatInputs, flatten_outputs

CONST_PREFIX = "_fxinspect_const"

_LITERALS = (type(None), bool, int, float, complex, str, torch.dtype, torch.device, torch.layout, torch.memory_format)
_LITERALS += (torch.qscheme,) if hasattr(torch, "qscheme") else ()
_RANDOM_TAG = getattr(torch.Tag, "nondeterministic_seeded", None)


def _storage_key(t: torch.Tensor) -> tuple | None:
    """A key naming ``t``'s data and view geometry, or ``None`` (sparse and other
    storage-less tensors)."""
    try:
        storage = t.untyped_storage()
        return (storage._cdata, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype, t.device)
    except Exception:  # sparse, nested, functional wrappers: identity lookup only
        return None


_DETACH = torch.ops.aten.detach.default


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
        self.locate: Callable[[], tuple[str, str]] | None = None  # set by _ModuleStack
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
        if func.namespace != "prim":  # prim.device & co: fake tensors asking about themselves
            self.builder.record(func, args, kwargs, out)
        return out


_MAX_FRAMES = 48  # how far up the call stack an op looks for the method's module


def _within(path: str, ancestor: str) -> bool:
    return not ancestor or path == ancestor or path.startswith(ancestor + ".")


class _ModuleStack:
    """Global forward hooks: which module of the user's model is running, and how often
    each ran (counted before the forward)."""

    def __init__(self, model: torch.nn.Module, builder: _Builder):
        self.paths = {id(m): (p, type_name(m)) for p, m in model.named_modules()}
        self.thread = threading.get_ident()  # the hooks are global: ignore other threads
        self.builder = builder
        self.stack: list[tuple[int, tuple[str, str]]] = []
        self.root = ("", type_name(model))
        self.calls: dict[str, int] = {}
        builder.locate = self.innermost

    def innermost(self) -> tuple[str, str]:
        """The running module, refined by the call stack: hooks see ``module(...)`` calls
        only, so an op in a method such as ``self.transform.postprocess(...)`` (called
        from the parent's forward) is found by the ``self`` of the frames between the op
        and the hooked module's own frame."""
        top_id = self.stack[-1][0] if self.stack else None
        frame = sys._getframe(3)  # innermost() <- record() <- __torch_dispatch__ <- caller
        for _ in range(_MAX_FRAMES):
            if frame is None:
                break
            if frame.f_code.co_argcount and frame.f_code.co_varnames[0] == "self":
                owner = frame.f_locals.get("self")
                key = id(owner)
                if key == top_id:
                    break
                found = self.paths.get(key)
                if found is not None and _within(found[0], self.builder.module[0]):
                    return found
            frame = frame.f_back
        return self.builder.module

    def pre(self, module: torch.nn.Module, args: Any) -> None:
        found = self.paths.get(id(module))
        if found is None or threading.get_ident() != self.thread:  # outside the model: ops go to the caller
            return
        self.calls[found[0]] = self.calls.get(found[0], 0) + 1
        self.builder.sync_grad_mode()
        self.stack.append((id(module), found))
        self.builder.module = found

    def post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        key = id(module)
        if key not in self.paths or threading.get_ident() != self.thread or all(k != key for k, _ in self.stack):
            return
        self.builder.sync_grad_mode()
        while self.stack:  # also drops frames a caught exception left behind
            if self.stack.pop()[0] == key:
                break
        self.builder.module = self.stack[-1][1] if self.stack else self.root


def _rng_state() -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple[torch.Tensor, list[torch.Tensor] | None]) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


def trace_eager(model: torch.nn.Module, inputs: FlatInputs, leaf_modules: Iterable[Any] = ()) -> Capture:
    """Run ``model`` once and capture the aten ops it executed (``leaf_modules`` need no
    special handling here: every op inside them is a node of its own)."""
    builder = _Builder(model, inputs)
    modules = _ModuleStack(model, builder)
    hooks = []
    rng = _rng_state()
    try:
        hooks.append(torch.nn.modules.module.register_module_forward_pre_hook(modules.pre))
        hooks.append(torch.nn.modules.module.register_module_forward_hook(modules.post, always_call=True))
        with _Recorder(builder):
            out = model(*inputs.args, **inputs.kwargs)
    except (DataDependentOutputException, DynamicOutputShapeException) as exc:
        path, cls = builder.module
        where = f"module {path!r} ({cls})" if path else f"the root module ({cls})"
        raise RuntimeError(
            f"{exc.args[0] if exc.args else type(exc).__name__} in {where} needs tensor values, which meta/fake "
            "tensors do not have (a value-dependent branch, .item() or output shape); analyse with real tensors"
        ) from exc
    finally:
        for handle in hooks:
            handle.remove()
        _set_rng_state(rng)  # the graph's random ops draw what the captured run drew
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
