"""The memory model's timeline: the storages a run allocated and the bytes alive after each event.

Every allocation and every free of a run is an *event*, numbered from 1; the timeline
holds, after each event ``k``, ``timeline[k] = (op index, bytes alive)`` (``timeline[0]``
is the start: nothing alive). An :class:`Allocation` is one storage: the node that made
it, its first shape, its bytes, and the events of its birth and death. Here are the
questions asked of them once the run is over: the highest point up to an event
(:func:`highest`), what was alive at an event (:func:`alive_at`: their bytes sum to the
bytes alive there), and each op's kernel scratch, learnt after the run, put in
(:func:`add_scratch`). :class:`~fxinspect.run.memory.storages.StorageTracker` makes them.

Example
-------
>>> a = Allocation("conv", (4,), torch.float32, 16, Phase.FORWARD, 1)
>>> b = Allocation("relu", (4,), torch.float32, 16, Phase.FORWARD, 2)
>>> a.died = 3                                        # freed once relu's output exists
>>> timeline = [(0, 0), (1, 16), (2, 32), (2, 16)]
>>> peak, at, born = highest(timeline, [a, b], 3)     # 32 bytes, at event 2, where relu's was born
>>> peak, at, born.node
(32, 2, 'relu')
>>> [e.node for e in alive_at([a, b], 2)], [e.node for e in alive_at([a, b], 3)]
(['conv', 'relu'], ['relu'])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...records.memory import Phase

__all__ = ["Allocation", "add_scratch", "alive_at", "highest"]


_DTYPE_NAMES: dict[torch.dtype, str] = {}


class Allocation:
    """One storage the run allocated: its maker, first shape, bytes, birth and death."""

    __slots__ = ("node", "_shape", "_dtype", "nbytes", "phase", "born", "died", "saved", "scratch")

    def __init__(self, node: str | None, shape: Any, dtype: torch.dtype, nbytes: int, phase: Phase, born: int) -> None:
        self.node, self.nbytes, self.phase, self.born = node, nbytes, phase, born
        # (a torch.Size holds no tensor; made a tuple by ``shape`` for the few that are read;
        # nested tensors have no one shape: ())
        self._shape = shape
        self._dtype = dtype
        self.died: int | None = None
        self.saved = False
        self.scratch: tuple | None = None  # the op's key (run.scratch) when this is its scratch

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._shape)

    @property
    def dtype(self) -> str:
        name = _DTYPE_NAMES.get(self._dtype)
        if name is None:
            name = _DTYPE_NAMES[self._dtype] = str(self._dtype)
        return name


def highest(
    timeline: list[tuple[int, int]], allocations: list[Allocation], event: int
) -> tuple[int, int, Allocation | None]:
    """The highest point of ``timeline`` up to ``event``: its bytes, its event (the first,
    where it is reached more than once) and the allocation born there."""
    upto = timeline[: event + 1]
    peak = max(live for _, live in upto)
    at = next(k for k, (_, live) in enumerate(upto) if live == peak)
    return peak, at, next((a for a in allocations if a.born == at), None)


def alive_at(allocations: list[Allocation], event: int) -> list[Allocation]:
    """The allocations alive just after ``event``; their ``nbytes`` sum to ``timeline[event]``."""
    return [a for a in allocations if a.born <= event and (a.died is None or a.died > event)]


def add_scratch(
    timeline: list[tuple[int, int]],
    transients: list[tuple[Allocation, list | None]],
    sizes: dict[tuple, int],
    output_bytes: Callable[[tuple, int], int],
    events: int,
) -> int:
    """Give each op's scratch allocation its bytes (``sizes``, by the op's key), and each
    output a meta kernel left empty its real bytes (``output_bytes(key, index)``), and raise
    the timeline where they are alive; returns the bytes added that are still alive at the
    end (a workspace the run kept).

    ``transients``: per scratch allocation, ``(output index, allocation)`` of its op's new
    outputs on meta (``None`` elsewhere); ``events``: how many the run had.
    """
    delta = [0] * (events + 2)  # bytes added at each event, summed below
    for entry, made in transients:
        entry.nbytes = sizes[entry.scratch]
        entry._shape = (entry.nbytes,)
        delta[entry.born] += entry.nbytes
        delta[entry.died] -= entry.nbytes
        for i, output in made or ():  # an output the meta kernel left empty (a workspace)
            real = output_bytes(entry.scratch, i) if output.nbytes == 0 else 0
            if real:
                output.nbytes, output._shape, output._dtype = real, (real,), torch.uint8
                delta[output.born] += real
                if output.died is not None:
                    delta[output.died] -= real
    extra = 0
    for k, step in enumerate(delta[: len(timeline)]):
        extra += step
        if extra:
            op, live = timeline[k]
            timeline[k] = (op, live + extra)
    return extra
