"""Clock marks for the timing runs: ``perf_counter`` on CPU, CUDA events on a CUDA device.

Example
-------
>>> import torch
>>> clock = Clock(torch.device("cpu"))
>>> clock.start(); clock.mark("a"); clock.mark("b")
>>> [name for name, seconds in clock.intervals()], [name for name, _ in clock.intervals(later=False)]
(['a', 'b'], [None, 'a'])
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["Clock"]


class Clock:
    """Marks ``(node name, time)`` after each node; CUDA events on a CUDA device.

    ``mark`` is the probe the timed program calls after every op: on CPU a closure over
    the list and the clock, so that it adds as little as possible between two ops.
    """

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list[tuple[str | None, Any]] = []  # cleared, never rebound: mark holds it
        if self.cuda:
            self.mark = self._event_mark
        else:
            append, clock = self.marks.append, time.perf_counter

            def mark(name: str | None, _output: Any = None) -> None:
                append((name, clock()))

            self.mark = mark

    def _event_mark(self, name: str | None, _output: Any = None) -> None:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        self.marks.append((name, event))

    def start(self) -> None:
        """Begin a run: forget the last run's marks and mark its start."""
        self.marks.clear()
        self.mark(None)

    def intervals(self, later: bool = True) -> list[tuple[str | None, float]]:
        """``(name, seconds)`` between each two consecutive marks of the last run, charged to
        the later mark's name (a mark after each node) or, with ``later=False``, the earlier's
        (a mark as each node starts)."""
        m = self.marks
        if self.cuda:
            torch.cuda.synchronize()
        spans = zip(m, m[1:])
        seconds = (lambda a, b: a.elapsed_time(b) / 1e3) if self.cuda else (lambda a, b: b - a)
        return [(nb if later else na, seconds(a, b)) for (na, a), (nb, b) in spans]

    def time(self, program: Callable, inputs: list[torch.Tensor]) -> float:
        """Seconds one call of ``program`` takes."""
        self.start()
        program(*inputs)
        self.mark(None)
        return self.intervals()[0][1]
