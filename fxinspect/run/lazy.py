"""Lazy modules: analyse a materialised copy, leave the user's model lazy.

A lazy module (``nn.LazyLinear``, ``nn.LazyConv2d``, any module holding an
``UninitializedParameter``) decides its parameters' shapes on its first call and
changes its own class doing so; analysing it in place would leave it half-converted.
When the model holds any uninitialised tensor, :func:`materialized` copies it and
calls the copy once on (copies of) the example inputs, with the random streams
forked, so that the user's own first call later draws exactly what it would have.
The copy is what gets analysed; the user's model is not run at all.

Example
-------
>>> import torch
>>> model = torch.nn.Sequential(torch.nn.LazyLinear(4))
>>> copy, notes = materialized(model, (torch.randn(2, 3),), {})
>>> type(copy[0]).__name__, type(model[0]).__name__, sum(p.numel() for p in copy.parameters())  # 3*4 + 4
('Linear', 'LazyLinear', 16)
"""

from __future__ import annotations

import copy

import torch
from torch.nn.parameter import is_lazy
from torch.utils import _pytree as pytree

from .. import formatting

__all__ = ["materialized"]


def _lazy_paths(model: torch.nn.Module) -> list[str]:
    """Dotted names of the model's uninitialised parameters and buffers."""
    tensors = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    return [name for name, t in tensors if is_lazy(t)]


def materialized(model: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[torch.nn.Module, list[str]]:
    """``(model, [])`` when nothing in it is lazy; else a materialised copy and a note."""
    lazy = _lazy_paths(model)
    if not lazy:
        return model, []
    twin = copy.deepcopy(model)
    # copies of the inputs: a forward that writes its inputs must not write the user's
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), (args, kwargs))
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        twin(*args, **kwargs)
    still = _lazy_paths(twin)
    if still:
        raise ValueError(f"one call on the example inputs left {formatting.listing(still)} uninitialised")
    owners = formatting.listing(
        dict.fromkeys(
            type(m).__name__
            for m in model.modules()
            if _lazy_paths(m) and not any(_lazy_paths(child) for child in m.children())
        )
    )
    return twin, [
        f"{formatting.plural(len(lazy), 'uninitialised tensor')} ({formatting.listing(lazy)}) in {owners}: "
        "analysed a copy materialised by one call on the example inputs; your model is still lazy"
    ]
