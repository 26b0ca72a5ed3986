"""Tier ``symbolic``: ``torch.fx`` symbolic tracing with module attribution.

The model is traced through a thin root whose ``forward`` takes the flat tensor
inputs, rebuilds the user's ``(args, kwargs)`` and returns the output's leaves, so
every tier hands the instrumentation the same calling convention. The root holds the
model as its child ``model``; that prefix is removed from every module path.

Buffers are traced as parameters are (``get_attr`` nodes; torch.fx's default runs what
reads only buffers once, while tracing, and bakes its result in as a constant): a
buffer written in place (a KV cache, a step counter, an EMA) and what reads it
afterwards are ops of the graph, counted each call. Standard ``torch.nn`` layers
(``m.__module__`` under ``torch.nn``, as torch.fx decides) and the user's
``leaf_modules`` stay leaves. When tracing fails inside a
submodule, that submodule is made a leaf and tracing is tried again (a few times),
and the capture notes say so; ``method="auto"`` then still prefers a later tier that
captures the whole model (see ``fxinspect.capture.capture``).

Example
-------
>>> import torch
>>> from fxinspect.capture.inputs import FlatInputs
>>> m = torch.nn.Sequential(torch.nn.Linear(4, 2))
>>> cap = trace_symbolic(m, FlatInputs.build((torch.randn(1, 4),), {}), leaf_modules=())
>>> [n.op for n in cap.graph_module.graph.nodes]
['placeholder', 'call_module', 'output']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.fx as fx
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.proxy import TraceError
from torch.utils import _pytree as pytree

from ..records import OP_KINDS
from . import fast_trace
from .attributes import AttributeWatch, named_writes
from .base import MODULE_KEY, Capture, Method, one_line, strip_prefix, type_name
from .buffer_branches import UNKNOWN, value_of
from .calls import number_calls
from .fast_trace import GRAPH_INTERNALS_KNOWN, ModuleStack, UncheckedGraph, lower_arg, make_node, make_proxy
from .held import HELD_KEY, FrameHolds
from .inputs import FlatInputs
from .kept import kept_calls

ROOT_ATTR = "model"
MAX_AUTO_LEAVES = 8


def _strip(path: str) -> str:
    """``"model.layer1.0"`` -> ``"layer1.0"``; ``"model"`` -> ``""``."""
    return strip_prefix(path, ROOT_ATTR + ".")


class _Root(torch.nn.Module):
    """Calls the user's model on rebuilt inputs and returns the output's leaves."""

    def __init__(self, model: torch.nn.Module, inputs: FlatInputs):
        super().__init__()
        self.model = model
        self._inputs = inputs
        self.out_spec = None
        self.written: list = []  # the attributes the traced forward set, with their nodes

    def run(self, tensors: list[Any]) -> tuple:
        args, kwargs = self._inputs.rebuild(tensors)
        attributes = AttributeWatch(self.model)
        leaves, self.out_spec = pytree.tree_flatten(self.model(*args, **kwargs))
        self.written = attributes.resolved(_proxy_node)
        return tuple(leaves)


def _proxy_node(value: Any) -> fx.Node | None:
    """The node a traced value stands for (a value computed while tracing is no node's)."""
    return value.node if isinstance(value, fx.Proxy) else None


def _make_root(model: torch.nn.Module, inputs: FlatInputs) -> _Root:
    # fx reads the placeholder names from forward's code object, so the root's forward
    # is generated with one named parameter per tensor leaf.
    params = ", ".join(inputs.names)
    source = f"def forward(self, {params}):\n    return self.run([{params}])\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, "<fxinspect root>", "exec"), namespace)
    cls = type("FxInspectRoot", (_Root,), {"forward": namespace["forward"]})
    return cls(model, inputs)


class ModuleTracer(fx.Tracer):
    """Keeps torch.nn layers and chosen modules as leaves; counts module calls; tags every
    op node with the module running it (``node.meta[MODULE_KEY]``)."""

    def __init__(self, leaf_types: tuple[type, ...], leaf_paths: set[str], root_type: str = ""):
        super().__init__()
        self.proxy_buffer_attributes = True  # (a buffer is the model's state, read and written each call)
        self.root_type = root_type
        self.leaf_types = leaf_types
        self.leaf_paths = leaf_paths
        self.calls: dict[str, int] = {}
        self.leaves_used: set[str] = set()
        self.stack: list[str] = []
        self.failed_in: str | None = None
        self.module_stack = ModuleStack()
        self.fast_graph = GRAPH_INTERNALS_KNOWN
        self.holds = FrameHolds()

    def trace(self, root, concrete_args=None) -> fx.Graph:
        try:
            with kept_calls(self, getattr(root, ROOT_ATTR, root)):
                return super().trace(root, concrete_args)
        finally:
            if type(getattr(self, "graph", None)) is UncheckedGraph:
                self.graph.__class__ = fx.Graph  # an ordinary graph from here on
                del self.graph._base_names

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None) -> fx.Node:
        if self.fast_graph and type(self.graph) is fx.Graph:
            self.graph.__class__ = UncheckedGraph
            self.graph._base_names = {}
        node = make_node(self, kind, target, args, kwargs, name, type_expr)
        if kind in OP_KINDS:
            stack = self.module_stack
            caching = type(stack) is fast_trace.ModuleStack  # the tag is the same for a module call's nodes
            tag = stack.tag if caching else None
            if tag is None:
                tag = self._innermost_module()
                if caching:
                    stack.tag = tag
            node.meta[MODULE_KEY] = tag
            self.holds.observe(node)
        return node

    def _innermost_module(self) -> tuple[str, str]:
        """``(path, class name)`` of the module running now: for a leaf's call_module
        node, the leaf itself; the user's model outside every submodule."""
        if not self.module_stack:
            return ("", self.root_type)
        path, cls = next(reversed(self.module_stack.values()))
        return (_strip(path), cls.__name__ if isinstance(cls, type) else str(cls).rsplit(".", 1)[-1])

    def is_leaf_module(self, m: torch.nn.Module, qualname: str) -> bool:
        path = _strip(qualname)
        if qualname == ROOT_ATTR and not isinstance(m, self.leaf_types) and path not in self.leaf_paths:
            # the user's model itself is traced through unless it is a torch.nn layer
            return super().is_leaf_module(m, qualname)
        return isinstance(m, self.leaf_types) or path in self.leaf_paths or super().is_leaf_module(m, qualname)

    def create_arg(self, a: Any) -> Any:
        return lower_arg(self, a)

    def to_bool(self, obj: fx.Proxy) -> bool:
        """A branch on the model's state (``if self.steps < 10``) is taken as a plain call
        takes it now (:mod:`.buffer_branches`); a branch on an input cannot be traced."""
        value = value_of(obj.node, self.root)
        try:
            return super().to_bool(obj) if value is UNKNOWN else bool(value)
        except TraceError:
            raise
        except Exception:  # (a fake tensor's value: as for any input)
            return super().to_bool(obj)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
        return make_proxy(self, kind, target, args, kwargs, name, type_expr, proxy_factory_fn)

    def call_module(self, m, forward, args, kwargs):
        path = _strip(self.path_of_module(m))
        self.calls[path] = self.calls.get(path, 0) + 1
        if self.is_leaf_module(m, self.path_of_module(m)):
            self.leaves_used.add(path)
        self.stack.append(path)
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:
            if self.failed_in is None:
                self.failed_in = path
            raise
        finally:
            self.stack.pop()


def trace_symbolic(model: torch.nn.Module, inputs: FlatInputs, leaf_modules: Iterable[Any] = ()) -> Capture:
    """Trace ``model`` symbolically; raises the tracer's error when every retry fails."""
    leaf_types = tuple(x for x in leaf_modules if isinstance(x, type))
    leaf_paths = {x for x in leaf_modules if isinstance(x, str)}
    named = {id(m): p for p, m in model.named_modules()}
    leaf_paths |= {named[id(x)] for x in leaf_modules if isinstance(x, torch.nn.Module) and id(x) in named}
    notes: list[str] = []
    auto_leaves: list[str] = []
    root = _make_root(model, inputs)
    buffers = dict(model.named_buffers())
    for attempt in range(MAX_AUTO_LEAVES + 1):
        tracer = ModuleTracer(leaf_types, leaf_paths, root_type=type_name(model))
        versions = {path: b._version for path, b in buffers.items() if not b.is_inference()}
        try:
            graph = tracer.trace(root)
            break
        except Exception as exc:
            where = tracer.failed_in
            if not where or where in leaf_paths or attempt == MAX_AUTO_LEAVES:
                raise
            notes.append(f"symbolic: made {where!r} ({type_name(model.get_submodule(where))}) a leaf: {one_line(exc)}")
            leaf_paths.add(where)
            auto_leaves.append(where)
    for node in graph.nodes:  # "model_layer1_0_conv1" -> "layer1_0_conv1"
        if node.name.startswith(ROOT_ATTR + "_"):
            node._rename(node.name[len(ROOT_ATTR) + 1 :])
        elif node.name == ROOT_ATTR:  # the whole model is one leaf: name it by its class
            node._rename(type_name(model).lower())
    number_calls(graph, lambda entry: _strip(entry[0]))
    for value, until in tracer.holds.finish().items():  # (by name: the program is a copy)
        value.meta[HELD_KEY] = until.name
    written = _written_at_trace_time(buffers, versions, attempt, notes)
    # compiled on first call only: the analysis runs probed copies, so the captured
    # module itself is compiled only when the plain forward is timed
    gm = _LazyGraphModule(root, graph, class_name=type_name(model))
    return Capture(
        graph_module=gm,
        method=Method.SYMBOLIC,
        inputs=inputs,
        calls=tracer.calls,
        leaves=tracer.leaves_used,
        notes=notes,
        out_spec=root.out_spec,
        attr_prefix=ROOT_ATTR + ".",
        auto_leaves=auto_leaves,
        trace_writes=written,
        attribute_writes=named_writes(root.written, graph),
        frames_seen=True,
    )


def _written_at_trace_time(
    buffers: dict[str, torch.Tensor], versions: dict[str, int], attempt: int, notes: list[str]
) -> tuple[tuple[str, torch.Tensor], ...]:
    """Buffers the trace itself wrote in place, with the values the trace left: the values
    one call leaves. Buffers are traced, so only a write through a tensor torch.fx does
    not see as one (``self._buffers["steps"].add_(1)``) runs once, for real, while
    tracing, and is not in the graph. After retries the trace ran several times, and the
    values are not one call's."""
    written = [path for path, v in versions.items() if buffers[path]._version != v]
    if not written:
        return ()
    names = ", ".join(written[:3]) + (f", … (+{len(written) - 3})" if len(written) > 3 else "")
    if attempt:
        notes.append(f"symbolic: buffers written while tracing, not in the graph nor replayed: {names}")
        return ()
    notes.append(f"symbolic: buffers written while tracing (not in the graph, so not counted): {names}")
    with torch.no_grad():
        return tuple((path, buffers[path].detach().clone()) for path in written)
