"""Virtual runs: analyse a model without allocating its weights (meta and fake tensors).

A run is *virtual* when ``analyze(..., device="meta")`` asks for it, when any parameter
or buffer of the model is on the ``meta`` device, or when an example input is a meta or
fake tensor. Then :func:`virtual` hands the analysis

* a copy of the model made by ``copy.deepcopy`` whose memo maps every parameter,
  buffer and tensor attribute to a *fake tensor* of the same shape, strides, dtype and
  ``requires_grad`` (``Parameter``\\ s stay parameters, tied weights stay tied). No
  weight is allocated and the user's model is never touched;
* the example inputs as fake tensors of the same metadata;
* an active ``FakeTensorMode`` for capture and the counting run.

Fake rather than meta tensors, because models branch on values: transformers' mask code
calls ``.item()``, which meta tensors refuse, while it recognises fake tensors as
"tracing" and takes its trace-safe path. A fake tensor also keeps the device the real
run would use (a real model's own device; ``cpu`` for tensors that live on ``meta``), so
every op dispatches exactly as in a real run and is priced by the same rule (on CPU,
``scaled_dot_product_attention`` reaches ``_scaled_dot_product_flash_attention_for_cpu``,
on a meta tensor it would reach the math path's ``bmm``\\ s instead).

Mode order: the fake mode is entered here, *outside*; the counting mode is entered later,
inside it, so it is the innermost mode and sees every aten op first, then hands it on to
fake propagation. Ops a fake kernel decomposes internally are not seen twice.

What needs real values is reported as unavailable, never as zero: no timing run, and
value statistics / NaN counts are ``None`` (``values.has_data`` is false for fake
tensors). Where a model branches on values, the virtual run follows the branch a
tracer would: transformers builds an explicit causal mask instead of checking the
padding with ``.item()``, so a few mask ops (and their bytes) differ from a real run;
FLOPs and MACs do not. Fake tensors also answer ``.device`` through the dispatcher;
the counting mode skips such ``prim`` queries, so node records list the same ops.

Example
-------
>>> import torch, fxinspect
>>> with torch.device("meta"):
...     model = torch.nn.Linear(1024, 1024)
>>> r = fxinspect.analyze(model, torch.empty(8, 1024, device="meta"))
>>> r.totals.params, r.totals.macs, r.totals.latency      # 1024*1024+1024 ; 8*1024*1024
(1049600, 8388608, None)
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes, is_traceable_wrapper_subclass

from ..errors import InputError
from ..options import meta_device
from ..tensors import has_data

__all__ = ["VirtualRun", "fake_copy", "fake_inputs", "is_virtual", "meta_on_host", "virtual", "virtual_device"]

HOST = torch.device("cpu")
"""Where a fake copy of a ``meta`` tensor pretends to live (what a real run would use)."""


def _model_tensors(model: torch.nn.Module) -> Iterator[torch.Tensor]:
    for m in model.modules():
        yield from (p for p in m._parameters.values() if p is not None)
        yield from (b for b in m._buffers.values() if b is not None)


def is_virtual(model: torch.nn.Module, args: tuple = (), kwargs: dict | None = None, device: Any = None) -> bool:
    """Whether the analysis of ``model(*args, **kwargs)`` must run without real data:
    ``device="meta"``, a parameter or buffer on ``meta`` (or fake), or a meta/fake input."""
    if meta_device(device) is not None:
        return True
    if any(not has_data(t) for t in _model_tensors(model)):
        return True
    leaves = pytree.tree_leaves((args, kwargs or {}))
    return any(isinstance(t, torch.Tensor) and not has_data(t) for t in leaves)


def virtual_device(t: torch.Tensor) -> torch.device:
    """The device a fake copy of ``t`` reports: its own, ``cpu`` for a ``meta`` tensor."""
    device = t.fake_device if isinstance(t, FakeTensor) else t.device
    return HOST if device.type == "meta" else device


def fake_like(t: torch.Tensor, mode: FakeTensorMode) -> torch.Tensor:
    """A fake tensor of ``mode`` with ``t``'s shape, strides, dtype and ``requires_grad``
    on :func:`virtual_device` (``t``'s data is neither read nor copied). A wrapper tensor
    subclass (a quantized weight) stays one, around fake copies of its inner tensors, so
    that the virtual run dispatches as the real one does (dequantise then matmul, or the
    packed kernel) and its bytes are those stored."""
    if type(t) is not torch.Tensor and is_traceable_wrapper_subclass(t):
        names, context = t.__tensor_flatten__()
        inner = {n: fake_like(getattr(t, n), mode) for n in names}
        out = type(t).__tensor_unflatten__(inner, context, t.size(), t.stride())
    else:
        with mode, torch.no_grad():
            out = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device=virtual_device(t))
    if isinstance(t, torch.nn.Parameter):
        return torch.nn.Parameter(out, requires_grad=t.requires_grad)
    if t.requires_grad:
        out.requires_grad_(True)
    return out


def _attribute_tensors(value: Any) -> Iterator[torch.Tensor]:
    """Tensors held by a module attribute: directly or in a list/tuple/dict."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            if isinstance(v, torch.Tensor):
                yield v
    elif isinstance(value, dict):
        for v in value.values():
            if isinstance(v, torch.Tensor):
                yield v


def fake_copy(model: torch.nn.Module, mode: FakeTensorMode) -> torch.nn.Module:
    """A deep copy of ``model`` whose parameters, buffers and tensor attributes are fake.

    ``copy.deepcopy`` is given a memo that already maps every such tensor (by identity,
    so tied weights stay one tensor) to its fake twin: the weights are never copied.
    """
    memo: dict[int, Any] = {}
    for m in model.modules():
        tensors = [t for t in m._parameters.values() if t is not None]
        tensors += [t for t in m._buffers.values() if t is not None]
        for name, value in vars(m).items():
            if name not in ("_parameters", "_buffers", "_modules"):
                tensors += list(_attribute_tensors(value))
        for t in tensors:
            if id(t) not in memo:
                memo[id(t)] = fake_like(t, mode)
    try:
        return copy.deepcopy(model, memo)
    except Exception as exc:
        raise InputError(
            f"cannot analyse {type(model).__name__} without allocating: copy.deepcopy of the model failed "
            f"({type(exc).__name__}: {exc}); build the model on the meta device or pass real tensors"
        ) from exc


def fake_inputs(value: Any, mode: FakeTensorMode) -> Any:
    """``value`` with every tensor in it a fake copy in ``mode``."""
    return pytree.tree_map_only(torch.Tensor, lambda t: fake_like(t, mode), value)


@dataclass
class VirtualRun:
    """What the analysis runs on: the model and inputs (fake copies when virtual)."""

    model: torch.nn.Module
    args: tuple
    kwargs: dict
    virtual: bool = False
    mode: FakeTensorMode | None = None
    notes: list[str] = field(default_factory=list)


def _note(model: torch.nn.Module, device: torch.device | None, fake_model: torch.nn.Module) -> str:
    if device is not None:
        why = 'device="meta"'
    elif any(not has_data(t) for t in _model_tensors(model)):
        why = "the model's tensors are on the meta device"
    else:
        why = "the example inputs are meta/fake tensors"
    devices = sorted({str(virtual_device(t)) for t in _model_tensors(fake_model)}) or [str(HOST)]
    return (
        f"virtual run ({why}): fake tensors on {', '.join(devices)}, no weight allocated; "
        "timing, NaN/Inf checks and value statistics are unavailable"
    )


@contextlib.contextmanager
def virtual(
    model: torch.nn.Module, args: tuple, kwargs: dict, device: str | torch.device | None = None
) -> Iterator[VirtualRun]:
    """Run capture and counting inside this block on what it yields.

    Not virtual (see :func:`is_virtual`): yields the model and inputs unchanged and
    enters no mode. Virtual: yields a fake copy of the model and fake inputs, with a
    ``FakeTensorMode`` active until the block ends.
    """
    dev = meta_device(device)
    if not is_virtual(model, args, kwargs, dev):
        yield VirtualRun(model, args, kwargs)
        return
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake_model = fake_copy(model, mode)
    fake_args, fake_kwargs = fake_inputs((tuple(args), dict(kwargs)), mode)
    run = VirtualRun(fake_model, fake_args, fake_kwargs, True, mode, [_note(model, dev, fake_model)])
    with mode:
        yield run


class _MetaOnHost(TorchFunctionMode):
    """Real ``meta`` tensors a torch function meets, as fake tensors of ``mode`` on
    :data:`HOST`: what the fake copies of the model's own meta tensors are. A function mode,
    so that autograd saves the fake tensor for the backward too."""

    def __init__(self, mode: FakeTensorMode) -> None:
        super().__init__()
        self.mode, self.fakes = mode, {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        args, kwargs = pytree.tree_map_only(torch.Tensor, self._fake, (args, kwargs or {}))
        return func(*args, **kwargs)

    def _fake(self, t: torch.Tensor) -> torch.Tensor:
        if type(t) is not torch.Tensor or not t.is_meta:
            return t
        if id(t) not in self.fakes:
            with _disable_current_modes():  # (made as an input is: no op of the loss's own)
                self.fakes[id(t)] = (t, fake_like(t, self.mode))
        return self.fakes[id(t)][1]


def meta_on_host(loss_fn: Any) -> Any:
    """``loss_fn`` such that, on a virtual run's output, a real ``meta`` tensor it holds (the
    labels, made beside a model built on ``meta``) stands for one on :data:`HOST`, as the
    model's own meta tensors do, rather than meeting the output's device as another."""

    @functools.wraps(loss_fn)
    def loss(output: Any) -> torch.Tensor:
        fake = next((t for t in pytree.tree_leaves(output) if isinstance(t, FakeTensor)), None)
        if fake is None:
            return loss_fn(output)
        with _MetaOnHost(fake.fake_mode):
            return loss_fn(output)

    return loss
