"""The memory model: every storage a run allocates, who made it, and how long it lived.

:class:`StorageTracker` is a dispatch mode. After each aten op it looks at the op's
output tensors: a storage it has not seen, that is not one of the op's inputs (a view or
an in-place result shares its input's storage) and not resident (parameters, buffers,
the example inputs), was allocated by this op, and is charged to the running fx node.
A weak reference to the storage says when it is freed. So the model follows the
program's own liveness: a value dies after its last use because the program drops it
there, and what autograd saves for the backward lives until the backward releases it.

Nothing here reads a tensor's data: the same run on fake tensors (the meta device)
gives the same timeline, byte for byte. What it cannot see is scratch memory a kernel
allocates and frees inside one op without returning it; the allocator's measurement
(:mod:`~fxinspect.run.memory.allocator`) does. Given a :class:`~fxinspect.run.memory.scratch.Scratch`,
the tracker marks each op that may take some with a ``scratch`` allocation, born and
freed at the op, right after its outputs; :meth:`StorageTracker.settle` gives them
their bytes, learnt after the run, and moves the peak where they raise it. The
allocations and the timeline of the bytes alive are :mod:`~fxinspect.run.memory.timeline`'s;
the ``saved_tensors_hooks`` that mark what autograd keeps, :mod:`~fxinspect.run.memory.saved`'s.

Example
-------
>>> import torch
>>> tracker = StorageTracker()
>>> x = torch.ones(256)                      # resident: made before the run
>>> with tracker:
...     tracker.node = "double"; y = x * 2   # 1 KiB allocated
...     tracker.node = "view"; v = y.view(16, 16)   # shares y's storage: nothing new
...     tracker.node = "sum"; s = (v + 1).sum()     # v + 1 dies inside the node, after the sum
>>> tracker.peak, tracker.peak_node, [(e.node, e.nbytes) for e in tracker.alive_at_peak()]
(2052, 'sum', [('double', 1024), ('sum', 1024), ('sum', 4)])
>>> tracker.live                             # y and s
1028
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ...records.memory import Phase
from ...tensors import NOT_WORK, DispatchMode, holds_wrappers, inner_tensors, storage_ids, storage_of, tensors_in
from .. import lazy_dynamo
from . import resizes
from .refs import StorageRef, free_callback
from .saved import SavesMarker
from .scratch import Scratch
from .timeline import Allocation, add_scratch, alive_at, highest

__all__ = ["Allocation", "StorageTracker"]


class StorageTracker(SavesMarker, DispatchMode):
    """Storages allocated while the mode is on, charged to ``self.node``.

    ``node`` is set by the probes; in the backward, ``running`` (when given) names the fx
    node whose backward is running instead. Every allocation and free is an *event*; the
    timeline has the bytes alive after each. Reading ``peak``/``alive_at_peak`` is free.
    ``import_dynamo``: import ``torch._dynamo`` now, before the run
    (:mod:`~fxinspect.run.lazy_dynamo`; a caller that knows the run does not need it says
    ``False``).
    """

    def __init__(
        self, resident: Iterable[torch.Tensor] = (), scratch: Scratch | None = None, import_dynamo: bool = True
    ) -> None:
        super().__init__()
        self.scratch = scratch
        # each op's scratch (and on meta its outputs), their bytes learnt in settle()
        self._transients: list[tuple[Allocation, list | None]] = []
        if import_dynamo:
            lazy_dynamo.import_dynamo()
        self.node: str | None = None
        self.phase = Phase.FORWARD
        self.running: Callable[[], str | None] | None = None
        self.allocations: list[Allocation] = []
        self.timeline: list[tuple[int, int]] = [(0, 0)]  # (op index, bytes alive)
        self.ops = 0
        self.live = 0
        self.peak = 0
        self.peak_node = ""
        self.peak_phase = Phase.FORWARD
        self._peak_event = 0
        self._events = 0
        # id(storage) -> a weak reference to it that knows its allocation, while it lives
        # (the reference's callback removes it as the storage is freed, so an id found
        # here is that storage's, never an earlier one's)
        self._alive: dict[int, StorageRef] = {}
        self._resident: dict[int, Any] = {}
        self._on_free = free_callback(self)
        self._aliasing: dict[Any, bool] = {}  # per aten overload: may an output share an input's storage?
        self._stopped = False
        self.add_resident(resident)
        resizes.register(self)

    def add_resident(self, tensors: Iterable[torch.Tensor]) -> None:
        """Storages that exist before the run (never charged to a node); a wrapper
        subclass's are its inner tensors' (a quantized weight's values and scales)."""
        for t in tensors:
            for inner in inner_tensors(t):
                st = storage_of(inner)
                if st is not None:
                    self._resident[id(st)] = weakref.ref(st)

    def current_node(self) -> str | None:
        """The fx node running now: its forward, or in the backward the one whose backward runs."""
        if self.phase is Phase.BACKWARD and self.running is not None:
            return self.running()
        return self.node

    def allocation(self, t: torch.Tensor) -> Allocation | None:
        """The run's allocation holding ``t``'s data, while it is alive (``None`` if resident)."""
        st = storage_of(t)
        ref = self._alive.get(id(st)) if st is not None else None
        return ref.entry if ref is not None else None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if holds_wrappers(types):
            return NotImplemented  # (DTensor runs it as local ops, a quantized weight as ops on its inner tensors: they come back here)
        out = func(*args, **kwargs) if kwargs else func(*args)
        self.observe(func, args, kwargs, out)
        return out

    def observe(self, func: Any, args: tuple, kwargs: dict | None, out: Any) -> None:
        """Take note of one aten op that ran: the storages it allocated. The tracker's
        own dispatch calls it; another dispatch mode may call it instead (the counting
        run models memory in the same dispatch that prices each op)."""
        # (runs for every aten op of the model: lookups hoisted, calls inlined for the
        # common case of one output tensor)
        if func.namespace in NOT_WORK:
            return
        self.ops += 1
        before = self._events
        alive, resident, aliasing = self._alive, self._resident, self._aliasing
        inputs: set[int] | None = None
        may_alias: bool | None = None
        for t in (out,) if type(out) is torch.Tensor else tensors_in(out):
            try:
                st = t.untyped_storage()
            except (RuntimeError, NotImplementedError):  # sparse, nested or other layouts without one
                continue
            key = id(st)
            if key in alive:
                continue
            known = resident.get(key)
            if known is not None and known() is st:
                continue
            if may_alias is None:
                may_alias = aliasing.get(func)
                if may_alias is None:
                    may_alias = aliasing[func] = _may_return_an_input(func)
            if may_alias:  # a view or an in-place result of an input made before the run
                if inputs is None:
                    inputs = storage_ids(args, kwargs)
                if key in inputs:
                    continue
            self._allocate(st, key, t.shape if not t.is_nested else (), t.dtype, st.nbytes())
        if self.scratch is not None:
            found = self.scratch.key(func, args, kwargs, out)
            if found is not None:
                made = None
                if self.scratch.meta:  # (its outputs, whose bytes a meta kernel may leave out)
                    made = [
                        (i, e) for i, t in enumerate(tensors_in(out)) if (e := self.allocation(t)) and e.born > before
                    ]
                self._transient(found, made)
        if self.live > self.peak:
            self._new_peak()

    def _new_peak(self) -> None:
        self.peak, self._peak_event = self.live, self._events
        self.peak_node, self.peak_phase = self.current_node() or "", self.phase

    def stop(self) -> None:
        """End the run: frees from now on are not part of its timeline."""
        self._stopped = True

    def resized(self, st: torch.UntypedStorage, nbytes: int) -> None:
        """Take note of a storage resized in place (:mod:`~fxinspect.run.memory.resizes`): its
        old bytes die, its new bytes are born in the running node. A storage made before
        the run becomes the run's to follow."""
        if self._stopped:
            return
        key = id(st)
        self._resident.pop(key, None)
        self._drop(key)
        if nbytes:
            self._allocate(st, key, (nbytes,), torch.uint8, nbytes)
            if self.live > self.peak:
                self._new_peak()

    def donate(self, named: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Storages given to the run that it may drop (a cache's tensors,
        :mod:`~fxinspect.run.memory.donated`): the run's from before its first op, each
        charged to its input's name, and no longer resident."""
        for name, t in named:
            st = storage_of(t)
            key = id(st)
            self._resident.pop(key, None)
            if key not in self._alive:
                self.node = name
                self._allocate(st, key, tuple(t.shape), t.dtype, st.nbytes())
        self.node = None
        if self.live > self.peak:
            self._new_peak()

    def release(self, st: torch.UntypedStorage) -> None:
        """A storage the run drops though something outside it still refers to it (a
        donated input the step replaced): it dies now."""
        if not self._stopped:
            self._drop(id(st))

    def _drop(self, key: int) -> None:
        """The storage ``key`` dies now (its weak reference stays, with nothing left to free)."""
        ref = self._alive.pop(key, None)
        if ref is not None:
            entry, ref.entry = ref.entry, None
            self._events += 1
            entry.died = self._events
            self.live -= entry.nbytes
            self.timeline.append((self.ops, self.live))

    def _allocate(self, st: torch.UntypedStorage, key: int, shape: Any, dtype: torch.dtype, nbytes: int) -> None:
        """A new storage of the run, born in the running node."""
        self._events += 1
        node = self.node if self.running is None or self.phase is Phase.FORWARD else self.running()
        entry = Allocation(node, shape, dtype, nbytes, self.phase, self._events)
        ref = self._alive[key] = StorageRef(st, self._on_free)
        ref.entry, ref.key = entry, key
        self.allocations.append(entry)
        self.live += nbytes
        self.timeline.append((self.ops, self.live))

    def _transient(self, key: tuple, made: list | None) -> None:
        """An op's scratch: born and freed at once, 0 bytes until :meth:`settle`
        (``made``: on meta, ``(output index, allocation)`` of the op's new outputs)."""
        node = self.node if self.running is None or self.phase is Phase.FORWARD else self.running()
        entry = Allocation(node, (0,), torch.uint8, 0, self.phase, self._events + 1)
        entry.scratch, entry.died = key, self._events + 2
        self._events += 2
        self.timeline += [(self.ops, self.live), (self.ops, self.live)]
        self.allocations.append(entry)
        self._transients.append((entry, made))

    @property
    def events(self) -> int:
        """Allocations and frees so far (``timeline[k]`` is the bytes alive after event ``k``)."""
        return self._events

    def settle(self) -> None:
        """Give each op's scratch its bytes (learnt now, outside every mode) and move the
        peak where they raise it. Called once, after the run."""
        if not self._transients:
            return
        sizes = self.scratch.learn(e.scratch for e, _ in self._transients)
        timeline = self.timeline
        self.live += add_scratch(timeline, self._transients, sizes, self.scratch.output_bytes, self._events)
        self._transients = []
        peak, at, born = highest(timeline, self.allocations, len(timeline) - 1)
        if peak > self.peak:
            self.peak, self._peak_event = peak, at
            if born is not None:  # (always: the bytes alive rise only where something is born)
                self.peak_node, self.peak_phase = born.node or "", born.phase

    def peak_until(self, event: int) -> tuple[int, str]:
        """The highest point of the timeline up to ``event`` and the node that made it."""
        peak, _, born = highest(self.timeline, self.allocations, event)
        return peak, (born.node or "") if born is not None else ""

    def alive_at_peak(self) -> list[Allocation]:
        """The allocations alive at the peak; their ``nbytes`` sum to ``peak``."""
        return alive_at(self.allocations, self._peak_event)


def _may_return_an_input(func: Any) -> bool:
    """Whether an op's schema lets an output alias an argument (views, in-place and
    ``out=`` variants); without a schema, assume it may."""
    schema = getattr(func, "_schema", None)
    return schema is None or any(r.alias_info is not None for r in schema.returns)
