"""Small facts about tensors that every layer asks: which tensors a value holds, and
whether their data can be read.

Example
-------
>>> import torch
>>> tensors_in((torch.ones(1), [torch.zeros(2), 3], {"a": torch.ones(3)}))[2].shape
torch.Size([3])
>>> has_data(torch.ones(1)), has_data(torch.ones(1, device="meta"))
(True, False)
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

__all__ = ["NOT_WORK", "forked_rng", "has_data", "holds_dtensors", "local_tensor", "tensors_in", "version"]


def forked_rng():
    """``torch.random.fork_rng`` over the CPU stream and, once CUDA is in use, the current
    device's: the random streams are as they were when the block ends."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    return torch.random.fork_rng(devices=devices)


_ATOMS = (int, float, bool, str, type(None))


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value``: a tensor, nested tuples/lists, or any pytree, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors_in(v)]
    if isinstance(value, _ATOMS):
        return []
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """The tensor this process holds: a ``DTensor``'s local shard, any other tensor itself."""
    return getattr(t, "_local_tensor", t) if type(t) is not torch.Tensor else t


NOT_WORK = frozenset({"prim", "profiler"})
"""Namespaces of ops that are no work the model asked for: ``prim`` (fake tensors asking
for their own device or layout) and ``profiler`` (``record_function``'s range markers,
which FSDP opens around its work). No capture records them and no run lists them."""


def holds_dtensors(types: tuple) -> bool:
    """Whether an op's argument types (as a dispatch mode gets them) include a DTensor.

    A dispatch mode sees an op before any tensor subclass does; a mode that returns
    ``NotImplemented`` for DTensor arguments lets DTensor run it as the local ops and
    collectives it stands for, which then reach the mode one by one (``CommDebugMode``
    does the same): the ops, shapes and bytes of what this rank really computes.
    """
    for t in types:  # (per op of every run: a loop over one or two types, no generator)
        if t.__name__ == "DTensor":
            return True
    return False


def has_data(t: torch.Tensor) -> bool:
    """False for meta and fake tensors (and DTensors holding one), whose values cannot be read."""
    t = local_tensor(t)
    return t.device.type != "meta" and not isinstance(t, torch._subclasses.FakeTensor)


def version(t: torch.Tensor) -> int | None:
    """``t``'s version counter (every in-place write bumps it); ``None`` for inference
    tensors, which have none."""
    return None if t.is_inference() else t._version
