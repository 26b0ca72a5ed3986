"""What the model's own Python frames hold while ``torch.export`` traces each op.

Non-strict export runs the forward's Python for real, with fake tensors where the
model's tensors would be, and makes a node for each aten op they meet. As during the
symbolic trace (:mod:`.held`), the model's frames are read each time an op node is
made: a fake tensor a frame holds (in a name, or in a list, tuple or dict up to two
levels down, ``ModelOutput`` too) is mapped to the node that made it through the
tracer's own table (``tensor_tracker``), and the last op at which some frame held it is
recorded. :func:`apply_holds` then writes it on the exported graph's nodes as
``node.meta[HELD_KEY]``, so the memory model keeps each value as long as the eager
model's frames keep it (:mod:`fxinspect.run.memory.lifetimes`).

The model's frames are those that run in its eager call too: its own code and the
Python of ``torch.nn``, ``torch.functional`` and the tensor's methods. Frames of the
tracing machinery (the rest of torch: dispatch, fake tensors, export, decompositions)
and of fxinspect are skipped. Export's graph is cleaned and copied after the trace, so
the node made at each step is marked (``node.meta[ORDER_KEY]``, which copies keep) and
found again by that mark.

Example
-------
>>> import torch
>>> from fxinspect.capture.exported import trace_export
>>> from fxinspect.capture.inputs import FlatInputs
>>> class Net(torch.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.a, self.b, self.c = (torch.nn.Linear(4, 4) for _ in range(3))
...     def forward(self, x):
...         h = self.a(x)            # h: bound until forward returns
...         y = self.b(h)
...         return self.c(y)
>>> cap = trace_export(Net(), FlatInputs.build((torch.randn(1, 4),), {}))
>>> {n.name: n.meta[HELD_KEY] for n in cap.graph_module.graph.nodes if HELD_KEY in n.meta}
{'linear': 'linear_2', 'linear_1': 'linear_2'}
"""

from __future__ import annotations

import bisect
import contextlib
import os
import types
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx as fx
from torch.fx.experimental import proxy_tensor

from ..records import OP_KINDS
from .held import HELD_KEY, FrameHolds

__all__ = ["HELD_KEY", "ORDER_KEY", "ExportFrames"]

ORDER_KEY = "fxinspect_export_order"
"""``node.meta[ORDER_KEY]``: the place of the op among those the export trace made."""

_FXINSPECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_TORCH = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
# torch's Python that the eager call runs too (its frames hold what the model's hold)
_EAGER_TORCH = tuple(
    _TORCH + p
    for p in (
        "nn" + os.sep,
        "functional.py",
        "_tensor.py",
        os.path.join("autograd", "function.py"),
        os.path.join("utils", "checkpoint.py"),
        "amp" + os.sep,
    )
)
_CONTAINERS = (list, tuple, dict)  # and their subclasses: ModelOutput, named tuples
_MAX_ITEMS = 256  # a container longer than this is not scanned (a list of ints, a table)


def _not_the_model(filename: str) -> bool:
    if filename.startswith(_FXINSPECT):
        return True
    return filename.startswith(_TORCH) and not filename.startswith(_EAGER_TORCH)


class ExportFrames:
    """Reads the model's frames during each export (:meth:`during`); the last one's
    holds go onto the cleaned graph (:meth:`apply`).

    ``stop``: the code of the frame that calls the model (the export root's forward):
    frames from it outwards are not read.
    """

    def __init__(self, stop: types.CodeType) -> None:
        self.stop = stop
        self.holds: FrameHolds | None = None

    @contextlib.contextmanager
    def during(self) -> Iterator[None]:
        """While one ``torch.export.export`` call runs: read frames as its tracer makes nodes."""
        tracer_class = proxy_tensor.PythonKeyTracer
        original = tracer_class.__dict__.get("create_node")
        self.holds = None
        if original is None:  # (a torch whose tracer makes nodes elsewhere: no frames read)
            yield
            return
        # the tracer of the forward, the first to make an op node (nested traces, of
        # sub-graphs, are not read), and its holds
        main: list[tuple[Any, FrameHolds]] = []

        def create_node(tracer, kind, target, args, kwargs, name=None, type_expr=None):
            node = original(tracer, kind, target, args, kwargs, name, type_expr)
            if kind in OP_KINDS:
                if not main:
                    main.append((tracer, FrameHolds(self.stop, _not_the_model, _reader(tracer.tensor_tracker))))
                if tracer is main[0][0]:
                    holds = main[0][1]
                    node.meta[ORDER_KEY] = len(holds.nodes)
                    holds.observe(node)
            return node

        tracer_class.create_node = create_node
        try:
            yield
        finally:
            tracer_class.create_node = original
        self.holds = main[0][1] if main else None

    def apply(self, graph: fx.Graph) -> bool:
        """Write ``HELD_KEY`` on ``graph``'s nodes from the last export's trace; whether
        frames were read (False: no export ran, or none of its ops was seen)."""
        if self.holds is None:
            return False
        until = {value.meta[ORDER_KEY]: last.meta[ORDER_KEY] for value, last in self.holds.finish().items()}
        marked: list[tuple[int, fx.Node]] = []
        for node in graph.nodes:
            order = node.meta.pop(ORDER_KEY, None)
            if order is not None and node.op in OP_KINDS:
                marked.append((order, node))
        marked.sort(key=lambda item: item[0])
        orders = [order for order, _ in marked]
        for order, node in marked:
            last = until.get(order)
            if last is None:
                continue
            at = bisect.bisect_right(orders, last) - 1  # the op held at, or the last kept before it
            if at >= 0 and marked[at][1] is not node:
                node.meta[HELD_KEY] = marked[at][1].name
        return True


def _reader(tracker: Any) -> Any:
    """The op nodes a frame's locals hold, through ``tracker`` (fake tensor -> proxy)."""

    def node_of(value: torch.Tensor) -> fx.Node | None:
        slot = tracker.get(value)
        proxy = getattr(slot, "proxy", None)
        node = getattr(proxy, "node", None)
        return node if node is not None and node.op in OP_KINDS else None

    def collect(value: Any, held: list[fx.Node], depth: int) -> None:
        if isinstance(value, torch.Tensor):
            node = node_of(value)
            if node is not None:
                held.append(node)
        elif depth and isinstance(value, _CONTAINERS) and len(value) <= _MAX_ITEMS:
            for item in value.values() if isinstance(value, dict) else value:
                collect(item, held, depth - 1)

    def held_nodes(names: dict[str, Any]) -> list[fx.Node]:
        held: list[fx.Node] = []
        for value in names.values():
            collect(value, held, 2)
        return held

    return held_nodes
