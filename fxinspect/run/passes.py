"""The runs that record: counting (costs, metadata, values) and timing (clocks).

Both run the captured graph with probes in it, the counting run once, stepped through
by :mod:`fxinspect.interpret`, the timing runs many times, compiled by
:mod:`fxinspect.codegen`; the captured module and the user's model are never modified.

* counting: op node ``i`` runs through the probe :meth:`CountingRun.run_node`, which
  names the node for :class:`CountingMode`, runs the op and records the output's
  metadata and value statistics. The probe sees the op's inputs and outputs, which is
  where gradient hooks attach.
* timing: one clock probe before the first op node and after every op node, nothing
  else, so the timed program stays as close to the plain one as possible; plain and
  timed runs alternate.

Example
-------
>>> import torch, torch.fx as fx
>>> gm = fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()))
>>> run = CountingRun(reader=None)
>>> _ = run.run(gm, [torch.randn(4, 3)])
>>> [shape for (shape, *_), _ in run.outputs[0]], sum(c.macs for c in run.mode.costs[0].values())   # 4*3*2
([(4, 2)], 24)
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch
import torch.fx as fx

from .codegen import compile_graph
from .dispatch import UNATTRIBUTED, CountingMode
from .graphs import OP_KINDS, op_nodes
from .interpret import Interpreted
from .values import Description, ValueReader, describe

__all__ = ["OP_KINDS", "CountingRun", "TimingRun", "op_nodes"]


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
    """Runs the graph once under :class:`CountingMode`; records every op node's outputs."""

    def __init__(self, reader: ValueReader | None):
        self.mode = CountingMode(before_write=reader.flush if reader else None)
        self.read = reader.read if reader else None
        # per op index: (description, statistics slot) of every output tensor
        self.outputs: dict[int, list[tuple[Description, int | None]]] = {}

    def run_node(self, index: int, fn: Callable, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The probe: run op node ``index`` with its aten ops charged to it, then record
        its outputs. It sees the op's inputs and outputs, which is where gradient hooks
        attach."""
        mode = self.mode
        mode.node = index
        out = fn(*args, **kwargs)  # raising leaves mode.node naming the failed node
        mode.node = UNATTRIBUTED
        read = self.read
        if type(out) is torch.Tensor:  # the common case, spelled out: it runs per node
            self.outputs[index] = [(describe(out), read(out) if read else None)]
        else:
            self.outputs[index] = [(describe(t), read(t) if read else None) for t in _tensors(out)]
        return out

    def run(self, gm: fx.GraphModule, tensors: list[torch.Tensor]) -> Any:
        program = Interpreted(gm, self.run_node)  # runs once: not worth compiling
        with self.mode:
            return program(*tensors)


class TimingRun:
    """Clock probes between op nodes; per-node medians over repeats."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.stamps: list[Any] = []
        self._clock = time.perf_counter

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
        self, gm: fx.GraphModule, tensors: list[torch.Tensor], warmup: int, repeats: int, copy_inputs: bool = False
    ) -> tuple[list[float], float, float]:
        """``(per-node medians, instrumented forward median, plain forward median)``.

        Plain and instrumented runs alternate so that drift (thermal, other load) hits
        both alike. ``copy_inputs`` (for a forward that writes its inputs in place)
        gives every run fresh copies, made before its clock starts.
        """
        probed = compile_graph(gm, stamp=self.stamp)
        plain_program = compile_graph(gm)
        n_ops = len(op_nodes(gm.graph))

        def inputs() -> list[torch.Tensor]:
            return [t.clone() for t in tensors] if copy_inputs else tensors

        for _ in range(warmup):
            plain_program(*inputs())
            probed(*inputs())
        per_node: list[list[float]] = [[] for _ in range(n_ops)]
        whole, plain = [], []
        for _ in range(repeats):
            plain.append(self._time_plain(plain_program, inputs()))
            self.stamps = []
            probed(*inputs())
            gaps = self._elapsed()
            for i, gap in enumerate(gaps):
                per_node[i].append(gap)
            whole.append(sum(gaps))
        return [statistics.median(x) for x in per_node], statistics.median(whole), statistics.median(plain)

    def _time_plain(self, program: Callable, tensors: list[torch.Tensor]) -> float:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            program(*tensors)
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3
        t0 = self._clock()
        program(*tensors)
        return self._clock() - t0
