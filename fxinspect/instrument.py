"""Probe insertion (a graph transformation) and the runs that record.

:func:`insert_probes` copies a captured ``GraphModule``'s graph, inserts a call before
and/or after every op node, and recompiles: generated code calls a probe in well
under a microsecond, where an ``fx.Interpreter`` loop costs tens. The captured module
and the user's model are never modified; the copy shares their submodules.

Two programs are built from one capture:

* counting: ``enter(i)`` names the running node for :class:`CountingMode`; ``leave(i,
  out)`` records the output's metadata and queues its value statistics;
* timing: one clock probe between consecutive op nodes, nothing else.

Example
-------
>>> import torch, torch.fx as fx
>>> gm = fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh()))
>>> seen = []
>>> probed = insert_probes(gm, before=lambda i: seen.append(i))
>>> _ = probed(torch.randn(2)); seen
[0, 1]
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch
import torch.fx as fx

from .counting import UNATTRIBUTED, CountingMode
from .report import TensorMeta
from .values import ValueReader, tensor_meta

OP_KINDS = ("call_function", "call_method", "call_module")


def op_nodes(graph: fx.Graph) -> list[fx.Node]:
    """The nodes that run something, in graph order; probe index i is position i here."""
    return [n for n in graph.nodes if n.op in OP_KINDS]


def insert_probes(
    gm: fx.GraphModule,
    before: Callable[[int], Any] | None = None,
    after: Callable[[int, Any], Any] | None = None,
    first: Callable[[], Any] | None = None,
) -> fx.GraphModule:
    """A recompiled copy of ``gm`` calling ``before(i)`` / ``after(i, out)`` around op
    node ``i`` and ``first()`` before the first op node."""
    graph = fx.Graph()
    mapping: dict[fx.Node, fx.Node] = {}
    graph.output(graph.graph_copy(gm.graph, mapping))
    ops = [mapping[n] for n in op_nodes(gm.graph)]
    if first is not None and ops:
        with graph.inserting_before(ops[0]):
            graph.call_function(first, ())
    for i, node in enumerate(ops):
        if before is not None:
            with graph.inserting_before(node):
                graph.call_function(before, (i,))
        if after is not None:
            with graph.inserting_after(node):
                graph.call_function(after, (i, node))
    return fx.GraphModule(gm, graph, class_name=f"Probed{type(gm).__name__}")


def _tensors(value: Any) -> list[torch.Tensor]:
    """Tensors in a node's output: a tensor, nested tuples/lists, or any pytree."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    if value is None or isinstance(value, (int, float, bool, str)):
        return []
    return [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


class CountingRun:
    """The probes of the counting run and their records."""

    def __init__(self, reader: ValueReader | None):
        self.mode = CountingMode()
        self.reader = reader
        self.outputs: dict[int, list[tuple[TensorMeta, int | None]]] = {}

    def enter(self, i: int) -> None:
        self.mode.node = i

    def leave(self, i: int, out: Any) -> None:
        self.mode.node = UNATTRIBUTED
        reader = self.reader
        self.outputs[i] = [(tensor_meta(t), reader.read(t) if reader else None) for t in _tensors(out)]

    def run(self, gm: fx.GraphModule, tensors: list[torch.Tensor]) -> Any:
        probed = insert_probes(gm, before=self.enter, after=self.leave)
        with self.mode:
            return probed(*tensors)


class TimingRun:
    """Clock probes between op nodes; per-node medians over repeats."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.stamps: list[Any] = []
        self._clock = time.perf_counter

    def after(self, i: int, out: Any) -> None:
        self.stamp()

    def stamp(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.stamps.append(event)
        else:
            self.stamps.append(self._clock())

    def _elapsed(self) -> list[float]:
        """Seconds between consecutive stamps of the last run."""
        s = self.stamps
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in zip(s, s[1:])]
        return [b - a for a, b in zip(s, s[1:])]

    def measure(
        self, gm: fx.GraphModule, tensors: list[torch.Tensor], warmup: int, repeats: int
    ) -> tuple[list[float], float, float]:
        """``(per-node medians, instrumented forward median, plain forward median)``.

        Plain and instrumented runs alternate so that drift (thermal, other load) hits
        both alike.
        """
        probed = insert_probes(gm, after=self.after, first=self.stamp)
        n_ops = len(op_nodes(gm.graph))
        for _ in range(warmup):
            gm(*tensors)
            probed(*tensors)
        per_node: list[list[float]] = [[] for _ in range(n_ops)]
        whole, plain = [], []
        for _ in range(repeats):
            plain.append(self._time_plain(gm, tensors))
            self.stamps = []
            probed(*tensors)
            gaps = self._elapsed()
            for i, gap in enumerate(gaps):
                per_node[i].append(gap)
            whole.append(sum(gaps))
        return [statistics.median(x) for x in per_node], statistics.median(whole), statistics.median(plain)

    def _time_plain(self, gm: fx.GraphModule, tensors: list[torch.Tensor]) -> float:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            gm(*tensors)
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3
        t0 = self._clock()
        gm(*tensors)
        return self._clock() - t0
