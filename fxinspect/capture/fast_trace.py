"""Speed-ups for ``torch.fx`` symbolic tracing that leave the traced graph unchanged.

On a graph of thousands of tiny ops, fx spends most of a trace on checks that cannot
fire in symbolic tracing and on copies nothing needs. Each piece here removes one of
them, and ``tests/test_capture_symbolic.py`` checks that a trace with them gives the
same graph, code and module tags as one without:

* :func:`lower_arg`: a node's arguments lowered without fx's dozen ``isinstance``
  checks for the common cases (proxies, scalars, plain containers of them);
* :class:`UncheckedGraph`: node creation without the per-node scan for raw ``SymInt``s;
* :class:`ModuleStack`: one shared ``nn_module_stack`` snapshot per module scope;
* :func:`make_node`: the tracer's node creation without the branches symbolic tracing
  never takes (preserved metadata, mutation checks, stack traces), which fall back to fx;
* :func:`make_proxy`: ``create_proxy`` lowering proxies and scalars in place, and
  empty keyword arguments not at all.

Example
-------
>>> import torch.fx as fx
>>> tracer = fx.Tracer()
>>> lower_arg(tracer, (1, [2.0, None], {"k": "v"}))
(1, [2.0, None], {'k': 'v'})
"""

from __future__ import annotations

import collections
import copy
from typing import Any

import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback
from torch.fx.immutable_collections import immutable_dict
from torch.fx.proxy import TracerBase

_PLAIN_ARGS = frozenset({int, float, bool, str, complex, torch.dtype, torch.device, torch.memory_format, torch.layout})


def lower_arg(tracer: fx.Tracer, a: Any) -> Any:
    """``tracer.create_arg(a)``, with the common cases first.

    fx's ``Tracer.create_arg`` runs a dozen ``isinstance`` checks (Parameter, Tensor,
    Module, namedtuple, opaque types) before its own fast path; on a graph of tiny ops
    that was a third of the trace. Proxies, scalars and plain containers of them lower
    to the same values without those checks; anything else goes to fx.
    """
    kind = type(a)
    if kind is fx.Proxy:
        return a.node
    if kind in _PLAIN_ARGS or a is None:
        return a
    if kind is tuple:
        return tuple([tracer.create_arg(x) for x in a])
    if kind is list:
        return [tracer.create_arg(x) for x in a]
    if kind is dict and all(type(k) is str for k in a):
        return {k: tracer.create_arg(v) for k, v in a.items()}
    return fx.Tracer.create_arg(tracer, a)


class ModuleStack(collections.OrderedDict):
    """The tracer's module stack, which fx copies into every node's meta.

    ``copy.copy`` of an OrderedDict goes through the slow ``__reduce_ex__`` path, and
    thousands of copies are thousands of objects to allocate and free. The nodes made
    while the stack is unchanged share one snapshot instead (nothing writes them);
    pushing or popping a module starts a new one.
    """

    _snapshot: collections.OrderedDict | None = None
    tag: Any = None
    """Free for the tracer: what it derived from the current stack (reset on change)."""

    def __setitem__(self, key, value) -> None:
        self._snapshot = self.tag = None
        super().__setitem__(key, value)

    def __delitem__(self, key) -> None:
        self._snapshot = self.tag = None
        super().__delitem__(key)

    def popitem(self, last: bool = True):
        self._snapshot = self.tag = None
        return super().popitem(last)

    def __copy__(self) -> collections.OrderedDict:
        if self._snapshot is None:
            self._snapshot = collections.OrderedDict(self)
        return self._snapshot


class UncheckedGraph(fx.Graph):
    """``fx.Graph`` whose ``create_node`` skips torch's scan of every node's arguments
    for raw ``SymInt``s (a pytree walk per node, a quarter of a trace of tiny ops).

    Symbolic tracing makes no ``SymInt``s, so the scan can find nothing here. Used only
    while tracing, and only where ``fx.Graph`` has the internals this relies on
    (:data:`GRAPH_INTERNALS_KNOWN`); a test compares graphs traced with and without it.
    """

    _base_names: dict[Any, str]
    """``_target_to_str`` per target (a regex substitution per node, otherwise)."""

    def create_node(self, op, target, args=None, kwargs=None, name=None, type_expr=None):
        args = args if args else ()
        kwargs = kwargs if kwargs else immutable_dict()
        if name is None:
            try:
                name = self._base_names[target]
            except KeyError:
                name = self._base_names[target] = self._target_to_str(target)
            except TypeError:  # an unhashable target
                name = self._target_to_str(target)
        name = self._graph_namespace.create_name(name, None)
        node = fx.Node(self, name, op, target, args, kwargs, type_expr)
        hooks = getattr(self.owning_module, "_create_node_hooks", None) if self.owning_module is not None else None
        for hook in hooks or ():
            hook(node)
        self._graph_namespace.associate_name_with_obj(name, node)
        self._insert(node)
        self._find_nodes_lookup_table.insert(node)
        self._len += 1
        return node


def _graph_internals_known() -> bool:
    graph = fx.Graph()
    return all(
        hasattr(graph, a) for a in ("_graph_namespace", "_target_to_str", "_insert", "_find_nodes_lookup_table", "_len")
    )


GRAPH_INTERNALS_KNOWN = _graph_internals_known()


def make_node(
    tracer: fx.Tracer, kind: str, target: Any, args: tuple, kwargs: dict, name=None, type_expr=None
) -> fx.Node:
    """``TracerBase.create_node`` for symbolic tracing's common case.

    fx's version also handles metadata preserved by ``torch.export`` and dynamo, the
    mutation check and stack-trace recording; when any of them is on, it runs instead.
    Otherwise the node gets what fx gives it: the graph's node and its
    ``nn_module_stack``. The tracer's ``node_name_to_scope`` table is not filled: only
    FX quantization reads it, from its own tracer, and this tracer is discarded.
    """
    if (
        getattr(tracer, "check_mutable_operations", True)
        or getattr(tracer, "record_stack_traces", True)
        or fx_traceback.has_preserved_node_meta()
    ):
        return TracerBase.create_node(tracer, kind, target, args, kwargs, name, type_expr)
    node = tracer.graph.create_node(kind, target, args, kwargs, name, type_expr)
    stack = tracer.module_stack
    if stack:
        node.meta["nn_module_stack"] = stack.__copy__() if type(stack) is ModuleStack else copy.copy(stack)
    return node


def make_proxy(
    tracer: fx.Tracer,
    kind: str,
    target: Any,
    args: tuple,
    kwargs: dict,
    name=None,
    type_expr=None,
    proxy_factory_fn=None,
) -> fx.Proxy:
    """``TracerBase.create_proxy``: lower the arguments, make the node, wrap it in a proxy.

    A positional argument that is a proxy or a scalar (nearly all of them) is lowered
    here, without the two calls per argument of ``tracer.create_arg``."""
    if type(args) is tuple:
        lowered = tuple(
            [
                a.node if type(a) is fx.Proxy else a if type(a) in _PLAIN_ARGS or a is None else tracer.create_arg(a)
                for a in args
            ]
        )
    else:
        lowered = tracer.create_arg(args)
    node = tracer.create_node(kind, target, lowered, tracer.create_arg(kwargs) if kwargs else {}, name, type_expr)
    return proxy_factory_fn(node) if proxy_factory_fn else tracer.proxy(node)
