"""The allocator on the model's own call: the measured side of the memory estimate.

The analysed program frees each value at its last use; the model, run as the user runs
it, keeps a module's arguments until the module returns and its locals until its forward
does. The estimate models the first (:mod:`~fxinspect.run.memory.lifetimes`), so the figure to
hold it against is the allocator's on the model's own eager call, not on the program:
:func:`measure_model_call` runs ``model(*args, **kwargs)`` (and with ``loss_fn`` the
backward of ``loss_fn(output)``, every ``.grad`` starting from ``None``) under an
:class:`~fxinspect.run.memory.allocator.AllocatorWatch`. The caller guards the model: this
run writes what a forward writes (batch norm's running statistics), as the program's did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from ...capture.autocast_cache import fresh_autocast_cache
from ..recorders import fresh_grads
from .allocator import AllocatorWatch

__all__ = ["measure_model_call"]


def measure_model_call(
    model: torch.nn.Module,
    args: tuple,
    kwargs: dict,
    device: torch.device,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
) -> tuple[int | None, int | None]:
    """``(forward peak, peak)``: the allocator's peak growth over the model's own call,
    the forward's and (with ``loss_fn``) the whole step's; ``(None, None)`` on a device
    the allocator cannot watch."""
    if device.type not in ("cpu", "cuda"):
        return None, None
    trainable = [p for p in model.parameters() if p.requires_grad]
    watch = AllocatorWatch(device)
    with contextlib.ExitStack() as stack:
        stack.enter_context(fresh_grads(trainable))
        stack.enter_context(fresh_autocast_cache())  # casts weights as a region of its own does
        if loss_fn is not None:
            stack.enter_context(torch.enable_grad())
        with watch:
            output = model(*args, **kwargs)
            if loss_fn is not None:
                loss = loss_fn(output)
                watch.begin_backward()
                loss.backward()
                del loss
            del output
    return watch.forward_peak, watch.peak
