"""Parameters and buffers per module, each tensor counted once.

A tied or shared tensor (one ``Parameter`` object reachable under several names, such
as an embedding tied to an output projection) is counted once, under the first name
``named_parameters`` gives it, and its other names are listed as aliases.

Example
-------
>>> import torch
>>> emb = torch.nn.Embedding(10, 4); head = torch.nn.Linear(4, 10, bias=False)
>>> head.weight = emb.weight
>>> infos, shared = module_infos(torch.nn.ModuleDict({"emb": emb, "head": head}))
>>> infos[0].params, [(s.name, s.aliases) for s in shared]     # 10*4, once
(40, [('emb.weight', ('head.weight',))])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from ..records import SharedParameter
from ..tensors import local_tensor, stored_bytes


@dataclass(frozen=True)
class ModuleInfo:
    """What the analyser knows of one module before its nodes are summed."""

    path: str
    type: str
    params: int
    trainable_params: int
    buffers: int
    own_params: int
    own_buffers: int
    children: tuple[str, ...]


def _names_by_tensor(model: torch.nn.Module, kind: str) -> dict[int, list[str]]:
    """``id(tensor) -> every dotted name`` it is registered under, first name first."""
    named = model.named_parameters if kind == "params" else model.named_buffers
    out: dict[int, list[str]] = {}
    for name, t in named(remove_duplicate=False):
        out.setdefault(id(t), []).append(name)
    return out


def _subtree_tensors(model: torch.nn.Module) -> dict[int, tuple[dict[int, torch.Tensor], dict[int, torch.Tensor]]]:
    """``id(module) -> (parameters, buffers)`` of its whole subtree, each tensor once,
    built bottom-up in one pass (``module.parameters()`` per module would walk every
    subtree again, quadratic in the depth)."""
    out: dict[int, tuple[dict[int, torch.Tensor], dict[int, torch.Tensor]]] = {}

    def visit(module: torch.nn.Module) -> tuple[dict, dict]:
        if id(module) in out:  # a module shared by two parents
            return out[id(module)]
        params = {id(p): p for p in module._parameters.values() if p is not None}
        buffers = {id(b): b for b in module._buffers.values() if b is not None}
        for child in module._modules.values():
            if child is not None:
                child_params, child_buffers = visit(child)
                params.update(child_params)
                buffers.update(child_buffers)
        out[id(module)] = (params, buffers)
        return params, buffers

    visit(model)
    return out


def module_infos(model: torch.nn.Module) -> tuple[list[ModuleInfo], list[SharedParameter]]:
    """One :class:`ModuleInfo` per module (``named_modules`` order) and the shared tensors."""
    param_names = _names_by_tensor(model, "params")
    buffer_names = _names_by_tensor(model, "buffers")
    modules = list(model.named_modules())
    paths = {id(m): p for p, m in modules}
    subtrees = _subtree_tensors(model)
    infos = []
    for path, module in modules:
        prefix = f"{path}." if path else ""
        params, buffers = subtrees[id(module)]
        own_params = [p for n, p in module._parameters.items() if p is not None and param_names[id(p)][0] == prefix + n]
        own_buffers = [b for n, b in module._buffers.items() if b is not None and buffer_names[id(b)][0] == prefix + n]
        children = tuple(paths[id(c)] for c in module.children() if paths.get(id(c), None) is not None)
        infos.append(
            ModuleInfo(
                path=path,
                type=type(module).__name__,
                params=sum(p.numel() for p in params.values()),
                trainable_params=sum(p.numel() for p in params.values() if p.requires_grad),
                buffers=sum(b.numel() for b in buffers.values()),
                own_params=sum(p.numel() for p in own_params),
                own_buffers=sum(b.numel() for b in own_buffers),
                children=tuple(dict.fromkeys(c for c in children if c.startswith(prefix) or not path)),
            )
        )
    shared = [
        SharedParameter(name=names[0], aliases=tuple(names[1:]), numel=_numel(model, names[0]))
        for names in list(param_names.values()) + list(buffer_names.values())
        if len(names) > 1
    ]
    return infos, shared


def _numel(model: torch.nn.Module, name: str) -> int:
    module_path, _, attr = name.rpartition(".")
    return getattr(model.get_submodule(module_path), attr).numel()


def _size(tensors: list[torch.Tensor]) -> int:
    """Bytes of ``tensors`` as stored: a plain tensor its elements, a wrapper subclass
    (a quantized weight) the storages of its inner tensors, each once. A ``DTensor``
    counts the whole tensor: these are the whole model's figures (``memory.params``
    says what one rank holds)."""
    plain, wrapped = 0, []
    for t in tensors:
        if type(t) is not torch.Tensor and is_traceable_wrapper_subclass(t) and local_tensor(t) is t:
            wrapped.append(t)
        else:
            plain += t.numel() * t.element_size()
    return plain + stored_bytes(wrapped)


def tensor_bytes(model: torch.nn.Module) -> tuple[int, int]:
    """``(parameter bytes, buffer bytes)`` as stored, each tensor once: a quantized weight
    counts its packed values and scales, not ``numel`` times the dtype it computes in."""
    params = list({id(p): p for p in model.parameters()}.values())
    buffers = list({id(b): b for b in model.buffers()}.values())
    return _size(params), _size(buffers)
