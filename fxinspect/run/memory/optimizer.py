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

import inspect
from collections.abc import Iterable
from typing import Any

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, FakeTensor, FakeTensorMode

from ...errors import InputError
from ...tensors import has_data, local_tensor, tensors_in
from ..virtual import fake_like
from .storages import StorageTracker

__all__ = ["optimizer_footprint"]


def _make(optimizer: Any, params: list[torch.Tensor]) -> torch.optim.Optimizer:
    """An optimizer like ``optimizer`` (a class, or an instance whose settings are
    kept) over ``params``. An instance is rebuilt from its constructor's own signature:
    ``defaults`` can hold settings the constructor does not take (AdamW's
    ``decoupled_weight_decay``)."""
    if isinstance(optimizer, torch.optim.Optimizer):
        cls = type(optimizer)
        accepted = inspect.signature(cls.__init__).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
            settings = dict(optimizer.defaults)
        else:
            settings = {k: v for k, v in optimizer.defaults.items() if k in accepted}
        return _built(cls, params, settings)
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        return _built(optimizer, params, {})
    raise InputError(f"optimizer= expects a torch.optim.Optimizer class or instance, got {type(optimizer).__name__}")


def _built(cls: type, params: list[torch.Tensor], settings: dict[str, Any]) -> torch.optim.Optimizer:
    try:
        return cls(params, **settings)
    except (TypeError, ValueError) as exc:
        how = "" if settings else f"; pass an instance, for example {cls.__name__}(model.parameters(), lr=...)"
        raise InputError(f"optimizer={cls.__name__} cannot be made for this model's parameters ({exc}){how}") from None


def _two_steps(opt: torch.optim.Optimizer, tracked: Any) -> StorageTracker:
    """Step once (the state appears), then step again watched: the step's own scratch.
    A step that needs a closure (LBFGS) gets one returning a loss made beforehand (the
    gradients are already set)."""
    closure = inspect.signature(opt.step).parameters.get("closure")
    loss = torch.zeros(())
    args = (lambda: loss,) if closure is not None and closure.default is inspect.Parameter.empty else ()
    opt.step(*args)
    tracker = StorageTracker([*tracked, loss, *tensors_in(list(opt.state.values()))])
    with tracker:
        opt.step(*args)
    return tracker


def optimizer_footprint(optimizer: Any, params: Iterable[torch.Tensor]) -> tuple[str, int, int]:
    """``(class name, state bytes, bytes one step allocates on top of its state)``.

    The steps run on fake tensors; an optimizer whose step reads values (ASGD,
    Adafactor: ``.item()``) runs on real zeros of the same shapes instead, when the
    parameters are real (its state is allocated for the while).
    """
    params = list(dict.fromkeys(params))  # tied parameters once
    key = _key(optimizer, params)
    if key not in _FOOTPRINTS:
        if len(_FOOTPRINTS) >= 16:
            _FOOTPRINTS.pop(next(iter(_FOOTPRINTS)))
        _FOOTPRINTS[key] = _footprint(optimizer, params)
    return _FOOTPRINTS[key]


_FOOTPRINTS: dict[tuple, tuple[str, int, int]] = {}
"""Footprints found, by optimizer and parameters' metadata: a sweep's points share them
(on a 70B model the two steps take seconds, the same at every batch size)."""


def _key(optimizer: Any, params: list[torch.Tensor]) -> tuple:
    """What a footprint depends on: the optimizer's class and settings, and each
    parameter's shape, dtype, device and layout (never its values); a DTensor's local
    shard and placements too."""
    kind = optimizer if isinstance(optimizer, type) else type(optimizer)
    settings = repr(sorted(optimizer.defaults.items())) if isinstance(optimizer, torch.optim.Optimizer) else ""
    shapes = tuple((tuple(p.shape), tuple(p.stride()), p.dtype, str(p.device), p.layout, *_sharding(p)) for p in params)
    return kind, settings, shapes, all(has_data(p) for p in params)  # (real ones may take the fallback)


def _footprint(optimizer: Any, params: list[torch.Tensor]) -> tuple[str, int, int]:
    # a virtual run's parameters are already fake: their mode is active, make the twins in it
    locals_ = [local_tensor(p) for p in params]
    mode = next((t.fake_mode for t in locals_ if isinstance(t, FakeTensor)), None) or FakeTensorMode()
    fakes = []
    for p in params:
        fake = _twin(p, mode)
        with mode:
            fake.grad = torch.zeros_like(fake)
        fakes.append(fake)
    try:
        with mode:
            opt = _make(optimizer, fakes)
            tracker = _two_steps(opt, [*fakes, *(f.grad for f in fakes)])
    except DataDependentOutputException:
        if not all(has_data(p) for p in params):
            raise InputError(
                f"optimizer={_name(optimizer)} reads values in step() (.item()), which the meta device does not "
                "have: its state cannot be found without real tensors; analyse with real parameters"
            ) from None
        zeros = [torch.zeros_like(p, requires_grad=p.requires_grad) for p in params]
        for z in zeros:
            z.grad = torch.zeros_like(z)
        opt = _make(optimizer, zeros)
        tracker = _two_steps(opt, [*zeros, *(z.grad for z in zeros)])
    except (RuntimeError, ValueError) as exc:  # the optimizer refuses these parameters or gradients
        raise InputError(f"optimizer={_name(optimizer)} cannot step this model's parameters: {exc}") from None
    stores = [local_tensor(t).untyped_storage() for t in tensors_in(list(opt.state.values()))]
    state = {id(s): s.nbytes() for s in stores}
    return type(opt).__name__, sum(state.values()), tracker.peak


def _sharding(p: torch.Tensor) -> tuple:
    local = local_tensor(p)
    return () if local is p else (tuple(local.shape), tuple(local.stride()), str(p.placements), str(p.device_mesh))


def _twin(p: torch.Tensor, mode: FakeTensorMode) -> torch.Tensor:
    """A fake parameter like ``p``; for a DTensor, a DTensor of a fake local shard on
    the same mesh and placements (its optimizer steps shard by shard, as the real one)."""
    local = local_tensor(p)
    if local is p:
        return fake_like(p, mode)
    from torch.distributed.tensor import DTensor

    shard = fake_like(local.detach(), mode)
    twin = DTensor.from_local(shard, p.device_mesh, p.placements, run_check=False, shape=p.shape, stride=p.stride())
    return torch.nn.Parameter(twin, requires_grad=p.requires_grad)


def _name(optimizer: Any) -> str:
    return optimizer.__name__ if isinstance(optimizer, type) else type(optimizer).__name__
