"""Backward latency per node: medians over repeats of the compiled program's backward.

Each repeat runs the compiled program forward (the only probes record autograd's
sequence numbers, to know which fx node made each autograd node), computes the loss,
puts a clock mark on every autograd node a graph node made (a pre-hook: the mark is
taken as that autograd node starts) and runs the backward. The time from one mark to
the next is charged to the node whose backward started at the first, so the per-node
times add up to the backward: the engine's work between two nodes, and the gradient
accumulation into parameters' ``.grad`` that follows a node, are charged to it. Plain
backwards (no hooks) alternate with the timed ones. On CUDA the marks are events. The
timing pass (:mod:`.timing`) runs this after the forward's timing when asked.

Example
-------
>>> import torch, fxinspect
>>> from fxinspect.run.recorders import default_loss
>>> program = fxinspect.instrument(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()), torch.randn(4, 3))
>>> timed = time_backward(program, default_loss, warmup=1, repeats=3)
>>> sorted(timed.latencies), timed.plain > 0
(['_0', '_1'], True)
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...capture.autocast_cache import empty_autocast_cache
from ...progress import SKIP_TIMING, tracked
from ..clock import Clock
from ..owners import AutogradOwners
from ..program import InstrumentedProgram, Probe
from ..recorders import fresh_grads

__all__ = ["BackwardTimes", "time_backward"]


def _mark_nodes(root: Any, owners: AutogradOwners, mark: Callable[[str], None]) -> list[Any]:
    """Put ``mark(owner)`` as a pre-hook on every autograd node an fx node made; the handles."""
    handles, seen, stack = [], set(), [root]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        owner = owners.owner(fn._sequence_nr())
        if owner is not None:
            handles.append(fn.register_prehook(lambda grads, owner=owner: mark(owner)))
        stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return handles


@dataclass
class BackwardTimes:
    """Per-node backward medians, and medians of the whole timed and plain backwards."""

    latencies: dict[str, float]
    timed: float
    plain: float
    steps: list[float]  # each plain training step: forward, loss and backward


def time_backward(
    program: InstrumentedProgram,
    loss_fn: Callable[[Any], torch.Tensor],
    warmup: int = 2,
    repeats: int = 10,
    copy_inputs: Sequence[str] = (),
) -> BackwardTimes:
    """Warm-up, then ``repeats`` alternating plain and timed backwards of ``loss_fn(output)``."""
    tensors = program.inputs
    clock = Clock(tensors[0].device if tensors else torch.device("cpu"))
    owners = AutogradOwners()
    probed = program.compile(Probe(owners.before, lambda name, _out: owners.after(name)))
    plain = program.compile()
    trainable = [p for p in program.parameters() if p.requires_grad]

    steps: list[float] = []

    def backward(compiled, timed: bool) -> float:
        for p in trainable:  # every backward allocates its gradients, as after zero_grad()
            p.grad = None
        owners.reset()
        run_inputs = [t.clone() for t in tensors] if copy_inputs else tensors
        empty_autocast_cache()  # (each step casts the weights, as in its own autocast region)
        clock.start()  # the step begins ...
        with torch.enable_grad():
            loss = loss_fn(program.output_structure(compiled(*run_inputs)))
        handles = _mark_nodes(loss.grad_fn, owners, clock.mark) if timed else []
        clock.mark(None)  # ... its forward and loss end, its backward begins
        loss.backward()
        clock.mark(None)
        for h in handles:
            h.remove()
        spans = clock.intervals(later=False)
        if not timed:
            steps.append(sum(seconds for _, seconds in spans))
        return sum(seconds for _, seconds in spans[1:])  # (the first span is the forward)

    per_node: dict[str, list[float]] = {name: [] for name in program.probe_points}
    plain_times, timed_times = [], []
    with fresh_grads(trainable):
        for _ in tracked("backward warm-up", range(warmup), detail=SKIP_TIMING):
            backward(plain, False)
            backward(probed, True)
        for _ in tracked("backward timing", range(repeats), detail=SKIP_TIMING):
            plain_times.append(backward(plain, False))
            timed_times.append(backward(probed, True))
            run = dict.fromkeys(per_node, 0.0)
            for name, seconds in clock.intervals(later=False):
                if name is not None:
                    run[name] += seconds
            for name, seconds in run.items():
                per_node[name].append(seconds)
    return BackwardTimes(
        {name: statistics.median(times) for name, times in per_node.items()},
        statistics.median(timed_times),
        statistics.median(plain_times),
        steps[warmup:],  # (the warm-up's steps left out)
    )
