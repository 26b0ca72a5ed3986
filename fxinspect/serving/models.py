"""The model a generation analyses: the user's own, or a meta copy (any size, no memory).

On the meta device the copy's weights are meta tensors, cast to ``dtype`` when given
(:func:`~.kv_curve.meta_copy`), and a mixture of experts runs its ``batched_mm`` experts
(:func:`~.kv_curve.meta_experts`): each token through its top-k experts, the same count as
transformers' default ``grouped_mm`` experts or the loop over the experts it hits, without
the values their offsets or the loop need, which meta tensors do not have. Elsewhere the
model runs as it is, on its own device, with its own experts (export takes a float32
grouped matmul on CPU as the model's call runs it: :mod:`fxinspect.capture.fake_kernels`).
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import InputError
from .inputs import require_generative
from .kv_curve import meta_copy, meta_experts

__all__ = ["analysed_copy"]


def analysed_copy(
    model: torch.nn.Module, device: Any, dtype: torch.dtype | None
) -> tuple[torch.nn.Module, torch.device]:
    """The model to analyse on ``device`` (``"meta"``, or ``None``: where it is) and that device."""
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"generation expects a torch.nn.Module, got {type(model).__name__}")
    require_generative(model)
    first = next(iter(model.parameters()), None)
    where = first.device if first is not None else torch.device("cpu")
    target = where if device is None else torch.device(device)
    if target.type == "meta":
        copy = meta_copy(model, dtype)
        meta_experts(copy)
        return copy, target
    if target != where:
        raise InputError(f"generation: the model is on {where}, given device={device!r} (use 'meta' or None)")
    if dtype is not None and first is not None and first.dtype != dtype:
        raise InputError(
            f"generation: dtype={dtype} would change the model (its weights are {first.dtype}); "
            "give dtype with device='meta', or cast the model first"
        )
    return model, target
