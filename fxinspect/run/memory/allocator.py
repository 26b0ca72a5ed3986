"""Measured memory: what the allocator handed out during a run, beside the estimate.

:class:`AllocatorWatch` brackets one run and every node in it. On CUDA it reads
``torch.cuda.memory_allocated`` before and after each node and the peak statistic; on
CPU it records the run with ``torch.profiler`` (``profile_memory=True``), whose
allocation events carry the CPU allocator's every allocation and free, and marks each
node with a profiler range, so allocations nest under the node that made them. Kernel
scratch memory (freed before the op returns) shows here and not in the tensor model.

Figures are growth on top of what was allocated when the watch started: the peak of the
run, the forward's peak (before :meth:`begin_backward`), and per node the bytes still
allocated when it ended minus those when it began (torch_inspector's "effective
additional memory"), and on CPU the highest it went above where it began (``rise``: its
``rise`` less its ``growth`` is what it took and gave back, :mod:`~fxinspect.run.memory.scratch`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["AllocatorWatch"]

_RANGE = "fxinspect::"
_BACKWARD_OF = "autograd::engine::evaluate_function"


@contextlib.contextmanager
def _no_profiler_chatter() -> Iterator[None]:
    """Kineto writes start/stop lines to file descriptor 2 as the profiler starts and
    stops (not while the model runs): keep them out of the user's terminal."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _range(name: str) -> Any:
    # the fast record function does not go through the dispatcher: a range opened by an
    # aten op would nest under the dispatch mode's frame, not around the node's ops
    opened = torch._C._profiler._RecordFunctionFast(name)
    opened.__enter__()
    return opened


class AllocatorWatch:
    """The allocator's view of one run on ``device`` (``cpu`` or ``cuda``)."""

    def __init__(self, device: torch.device, owners: Any = None) -> None:
        self.device = device
        self.owners = owners  # AutogradOwners: names the node whose backward allocated
        self.peak_node: str | None = None
        self.cuda = device.type == "cuda"
        self.by = "torch.cuda" if self.cuda else "torch.profiler"
        self.peak: int | None = None
        self.forward_peak: int | None = None
        self.growth: dict[str, int] = {}
        self.rise: dict[str, int] = {}  # (CPU) per node, the most allocated above its start
        self._open: dict[str, object] = {}
        self._profiler = None
        self._backward: Any = None  # the open profiler range of the backward
        self._start = 0

    def __enter__(self) -> AllocatorWatch:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
        else:
            # (autograd's profiler, which torch.profiler.profile drives: the latter's
            # start asks hasattr(torch, "_inductor"), which imports inductor and dynamo)
            self._profiler = torch.autograd.profiler.profile(use_cpu=True, profile_memory=True, use_kineto=True)
            with _no_profiler_chatter():
                self._profiler.__enter__()
        return self

    def enter(self, name: str) -> None:
        """Called as node ``name`` starts."""
        if self.cuda:
            self._open[name] = torch.cuda.memory_allocated(self.device)
        else:
            self._open[name] = _range(_RANGE + name)

    def exit(self, name: str) -> None:
        """Called as node ``name`` ends."""
        opened = self._open.pop(name)
        if self.cuda:
            self.growth[name] = torch.cuda.memory_allocated(self.device) - opened
        else:
            opened.__exit__(None, None, None)

    def begin_backward(self) -> None:
        """Called as the backward starts: what came before is the forward."""
        if self.cuda:
            torch.cuda.synchronize(self.device)
            self.forward_peak = torch.cuda.max_memory_allocated(self.device) - self._start
        else:
            self._backward = _range(_RANGE + "<backward>")

    def __exit__(self, *exc) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device) - self._start
            if self.forward_peak is None:
                self.forward_peak = self.peak
            return
        if self._backward is not None:
            self._backward.__exit__(None, None, None)
        with _no_profiler_chatter():
            self._profiler.__exit__(*exc)
        if exc[0] is None:
            self._read_profile()

    def _read_profile(self) -> None:
        from torch._C._profiler import _EventType

        allocations: list[tuple[int, int, str | None]] = []  # (time, bytes or -bytes freed, node)
        backward_start = None
        stack = [(e, None) for e in self._profiler.kineto_results.experimental_event_tree()]
        while stack:
            event, node = stack.pop()
            if event.tag == _EventType.Allocation:
                fields = event.extra_fields
                if fields.device.type == "cpu":
                    allocations.append((event.start_time_ns, fields.alloc_size, node))
                continue
            name = event.name
            if name.startswith(_RANGE):
                name = name[len(_RANGE) :]
                if name == "<backward>":
                    backward_start = event.start_time_ns
                else:
                    node = name
            elif name.startswith(_BACKWARD_OF) and self.owners is not None:
                node = self.owners.owner(event.extra_fields.sequence_number)
            stack.extend((child, node) for child in event.children)
        allocations.sort(key=lambda a: a[0])
        forward_end = backward_start if backward_start is not None else float("inf")
        for t, size, node in allocations:  # growth is the forward's: what each node leaves held
            if node is not None and t < forward_end:
                self.growth[node] = self.growth.get(node, 0) + size
        running = list(itertools.accumulate(size for _, size, _ in allocations))
        starts: dict[str, int] = {}
        for (_, size, node), total in zip(allocations, running):
            if node is not None:
                start = starts.setdefault(node, total - size)
                self.rise[node] = max(self.rise.get(node, 0), total - start)
        self.peak = max([0, *running])
        if running and self.peak > 0:
            self.peak_node = allocations[running.index(self.peak)][2]
        forward = [r for (t, _, _), r in zip(allocations, running) if t < forward_end]
        self.forward_peak = max([0, *forward])
