"""Storages resized in place, told to the memory model.

FSDP frees a block's gathered parameters by resizing their storage to nothing and
gathers them again into the same storage (``UntypedStorage.resize_``), which is not an
op: no dispatch mode sees it. While :func:`follow_resizes` is on, every resize is told
to each storage tracker made in the block (``StorageTracker.resized``), so the memory
model sees those bytes die and be born again where the step really frees and gathers.

Example
-------
>>> import torch
>>> from fxinspect.run.memory.storages import StorageTracker
>>> with follow_resizes():
...     tracker = StorageTracker()
...     with tracker:
...         t = torch.empty(256)                  # 1 KiB
...     _ = t.untyped_storage().resize_(0)        # freed in place
...     _ = t.untyped_storage().resize_(2048)     # 2 KiB again, in the same storage
>>> [live for _, live in tracker.timeline], tracker.peak
([0, 1024, 0, 2048], 2048)
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["follow_resizes", "register"]

_FOLLOWERS: list[weakref.ref] | None = None  # the trackers told, while follow_resizes is on


def register(tracker: Any) -> None:
    """Called by every new storage tracker: it is told of resizes while they are followed."""
    if _FOLLOWERS is not None:
        _FOLLOWERS.append(weakref.ref(tracker))


@contextlib.contextmanager
def follow_resizes() -> Iterator[None]:
    """Tell the trackers made in the block of every storage resized in place."""
    global _FOLLOWERS
    original = torch.UntypedStorage.resize_
    followers: list[weakref.ref] = []

    def resize_(self: torch.UntypedStorage, size: int) -> Any:
        out = original(self, size)
        for ref in followers:
            tracker = ref()
            if tracker is not None:
                tracker.resized(self, int(size))
        return out

    _FOLLOWERS, torch.UntypedStorage.resize_ = followers, resize_
    try:
        yield
    finally:
        _FOLLOWERS, torch.UntypedStorage.resize_ = None, original
