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

__all__ = ["forked_rng", "has_data", "tensors_in", "version"]


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


def has_data(t: torch.Tensor) -> bool:
    """False for meta and fake tensors, whose values cannot be read."""
    return t.device.type != "meta" and not isinstance(t, torch._subclasses.FakeTensor)


def version(t: torch.Tensor) -> int | None:
    """``t``'s version counter (every in-place write bumps it); ``None`` for inference
    tensors, which have none."""
    return None if t.is_inference() else t._version
