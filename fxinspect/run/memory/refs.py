"""Weak references to the storages a run allocated: each tells the tracker when its storage dies.

The storage tracker (:mod:`.storages`) keeps one :class:`StorageRef` per storage it saw
allocated; their callback (:func:`free_callback`) marks the allocation dead, lowers the
bytes alive and extends the timeline, keeping neither the storage nor the tracker alive.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["StorageRef", "free_callback"]


class StorageRef(weakref.ref):
    """A weak reference to a storage the run allocated, with its allocation and key."""

    __slots__ = ("entry", "key")


def free_callback(tracker: Any) -> Callable[[weakref.ref], None]:
    """The callback of every storage's weak reference: tells the tracker, if it still
    exists (it holds the tracker weakly: a dead tracker, or its allocations, keep
    nothing alive, and no reference cycle is made)."""
    tracker_ref = weakref.ref(tracker)

    def freed(ref: weakref.ref) -> None:  # (per storage freed: the tracker's part inlined)
        found = tracker_ref()
        entry = ref.entry
        if found is None or entry is None:  # (``None``: resized away already, see ``resized``)
            return
        del found._alive[ref.key]
        if found._stopped:
            return
        found._events += 1
        entry.died = found._events
        found.live -= entry.nbytes
        found.timeline.append((found.ops, found.live))

    return freed
