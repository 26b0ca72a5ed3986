"""What an optimizer adds to a training step's memory, found by running it on fake tensors.

No formula per optimizer: the optimizer's own ``step()`` runs twice on fake twins of
the trainable parameters (same shapes, dtypes and devices, nothing allocated) with fake
gradients. After the first step its state exists (Adam: ``exp_avg``, ``exp_avg_sq`` and
``step`` per parameter); the second step, watched by the storage tracker, gives the
scratch memory a step takes on top of that state (a step after the first).

Example
-------
>>> import torch
>>> params = [torch.nn.Parameter(torch.zeros(1000, 10))]
>>> name, state, step = optimizer_footprint(torch.optim.AdamW, params)
>>> name, state                     # two float32 moments of 10,000 elements + a step
('AdamW', 80004)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from ..errors import InputError
from ..tensors import tensors_in
from .storages import StorageTracker
from .virtual import fake_like

__all__ = ["optimizer_footprint"]


def _make(optimizer: Any, params: list[torch.Tensor]) -> torch.optim.Optimizer:
    if isinstance(optimizer, torch.optim.Optimizer):
        return type(optimizer)(params, **optimizer.defaults)
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        try:
            return optimizer(params)
        except TypeError as exc:
            raise InputError(
                f"optimizer={optimizer.__name__} cannot be made with its defaults ({exc}); "
                f"pass an instance, for example {optimizer.__name__}(model.parameters(), lr=...)"
            ) from None
    raise InputError(f"optimizer= expects a torch.optim.Optimizer class or instance, got {type(optimizer).__name__}")


def optimizer_footprint(optimizer: Any, params: Iterable[torch.Tensor]) -> tuple[str, int, int]:
    """``(class name, state bytes, bytes one step allocates on top of its state)``."""
    params = list(dict.fromkeys(params))  # tied parameters once
    # a virtual run's parameters are already fake: their mode is active, make the twins in it
    mode = next((p.fake_mode for p in params if isinstance(p, FakeTensor)), None) or FakeTensorMode()
    fakes = []
    for p in params:
        fake = fake_like(p, mode)
        with mode:
            fake.grad = torch.zeros_like(fake)
        fakes.append(fake)
    with mode:
        opt = _make(optimizer, fakes)
        opt.step()
        tracker = StorageTracker([*fakes, *(f.grad for f in fakes), *tensors_in(list(opt.state.values()))])
        with tracker:
            opt.step()
    state = {id(t.untyped_storage()): t.untyped_storage().nbytes() for t in tensors_in(list(opt.state.values()))}
    return type(opt).__name__, sum(state.values()), tracker.peak
