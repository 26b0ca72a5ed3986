"""Lazy modules: analyse a materialised copy, or materialise the model as its first call would.

A lazy module (``nn.LazyLinear``, ``nn.LazyConv2d``, any module holding an
``UninitializedParameter``) decides its parameters' shapes on its first call and
changes its own class doing so; analysing it in place would leave it half-converted.
When the model holds any uninitialised tensor, :func:`materialized` copies it and
calls the copy once on (copies of) the example inputs, with the random streams
forked, so that the user's own first call later draws exactly what it would have.
The copy is what gets analysed; the user's model is not run at all.

:func:`materialized_in_place` is for ``inspect``, whose analysed call is the user's own
first call: the copy makes that call from the current RNG state (so it draws the
initial values the user's call would, in the same order), and the user's lazy modules
then take those values and finish their lazy protocol as their own first call does.

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
from typing import Any

import torch
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.parameter import UninitializedBuffer, is_lazy
from torch.utils import _pytree as pytree

from .. import formatting
from ..tensors import forked_rng

__all__ = ["materialized", "materialized_in_place"]


def _lazy_paths(model: torch.nn.Module) -> list[str]:
    """Dotted names of the model's uninitialised parameters and buffers."""
    tensors = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    return [name for name, t in tensors if is_lazy(t)]


def _called_twin(
    model: torch.nn.Module, args: tuple, kwargs: dict
) -> tuple[torch.nn.Module, dict[str, dict[str, torch.Tensor]]]:
    """A copy of ``model`` after one call on copies of the inputs (no gradients), and the
    values each lazy module's own tensors had as it finished initialising (by path), before
    its forward ran (which may update them: a norm's running statistics)."""
    # torch's UninitializedBuffer cannot be deep-copied (a lazy norm's running statistics):
    # the copy gets fresh uninitialised buffers of the same kind
    memo: dict[int, Any] = {
        id(b): UninitializedBuffer(requires_grad=b.requires_grad, device=b.device, dtype=b.dtype)
        for b in model.buffers()
        if isinstance(b, UninitializedBuffer)
    }
    twin = copy.deepcopy(model, memo)
    initial: dict[str, dict[str, torch.Tensor]] = {}

    def keep(path: str):  # a pre-hook that runs after the module's own lazy initialisation
        def hook(module: torch.nn.Module, _: Any) -> None:
            if path not in initial:
                own = {**module._parameters, **module._buffers}
                initial[path] = {n: t.detach().clone() for n, t in own.items() if t is not None}

        return hook

    lazy_modules = [(p, m) for p, m in twin.named_modules() if isinstance(m, LazyModuleMixin)]
    handles = [m.register_forward_pre_hook(keep(p)) for p, m in lazy_modules]
    # copies of the inputs: a forward that writes its inputs must not write the user's
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), (args, kwargs))
    try:
        with torch.no_grad():
            twin(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    still = _lazy_paths(twin)
    if still:
        raise ValueError(f"one call on the example inputs left {formatting.listing(still)} uninitialised")
    return twin, initial


def _owners(model: torch.nn.Module, lazy: list[str]) -> str:
    """The classes of the modules that hold ``lazy`` tensors themselves."""
    owners = dict.fromkeys(
        type(m).__name__
        for m in model.modules()
        if _lazy_paths(m) and not any(_lazy_paths(child) for child in m.children())
    )
    return f"{formatting.plural(len(lazy), 'uninitialised tensor')} ({formatting.listing(lazy)}) in {formatting.listing(owners)}"


def materialized(model: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[torch.nn.Module, list[str]]:
    """``(model, [])`` when nothing in it is lazy; else a materialised copy and a note."""
    lazy = _lazy_paths(model)
    if not lazy:
        return model, []
    with forked_rng():
        twin, _ = _called_twin(model, args, kwargs)
    return twin, [
        f"{_owners(model, lazy)}: analysed a copy materialised by one call on the example inputs; "
        "your model is still lazy"
    ]


def materialized_in_place(model: torch.nn.Module, args: tuple, kwargs: dict) -> list[str]:
    """Materialise ``model``'s lazy modules as its first call on ``(args, kwargs)`` would;
    a note when there were any (``[]`` and nothing done otherwise)."""
    lazy = _lazy_paths(model)
    if not lazy:
        return []
    said = _owners(model, lazy)
    _, initial = _called_twin(model, args, kwargs)  # from the current RNG state, which it advances
    for path, module in model.named_modules():
        own = [*module._parameters.values(), *module._buffers.values()]
        if any(t is not None and is_lazy(t) for t in own):
            _adopt(module, initial[path])
    return [f"{said}: materialised in your model as its first call does (the values that call draws)"]


def _adopt(module: torch.nn.Module, values: dict[str, torch.Tensor]) -> None:
    """``module``'s own lazy tensors take ``values``; its lazy hooks go, as after its first
    call (``LazyModuleMixin._infer_parameters``)."""
    for slots in (module._parameters, module._buffers):
        for name, t in slots.items():
            if t is not None and is_lazy(t):
                value = values[name]
                t.materialize(value.shape, device=value.device, dtype=value.dtype)
                with torch.no_grad():
                    t.copy_(value)
    if isinstance(module, LazyModuleMixin) and hasattr(module, "_initialize_hook"):
        module._initialize_hook.remove()
        module._load_hook.remove()
        del module._initialize_hook, module._load_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become
