"""Leave the user's model exactly as it was, whatever the analysis does or raises.

:func:`preserved` snapshots what a forward (or backward) pass can change and puts it
back in ``finally``: buffer values (BatchNorm running statistics, counters), which
tensor object every parameter and buffer attribute holds, the attributes set on those
tensors themselves, every other attribute of
every module (added ones are removed, reassigned ones put back), ``requires_grad`` and
``.grad`` of every parameter, every module's ``training`` flag and hook dictionaries,
and the global RNG streams (dropout draws from them).

Parameters are not copied (that would double the memory of a large model): a forward
pass does not write them, and if one does (its version counter moved) the values
cannot be restored, so :class:`ModelChangedError` says which.

Example
-------
>>> import torch
>>> bn = torch.nn.BatchNorm1d(3)
>>> with preserved(bn):
...     _ = bn(torch.randn(4, 3))          # training mode updates running stats
>>> bn.running_mean.abs().sum().item(), bn.num_batches_tracked.item()
(0.0, 0)
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

import torch

from ..errors import FxInspectError
from ..tensors import has_data

_HOOK_DICTS = (
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)


_MISSING = object()


class ModelChangedError(FxInspectError):
    """The model wrote its own parameters during the analysed pass."""


@contextlib.contextmanager
def preserved(model: torch.nn.Module) -> Iterator[None]:
    """Restore ``model``'s state, flags, hooks and the RNG on exit."""
    modules = list(model.modules())
    training = [(m, m.training) for m in modules]
    hooks = [(m, name, dict(getattr(m, name))) for m in modules for name in _HOOK_DICTS if hasattr(m, name)]
    # plain attributes too: a first forward may set flags or caches on the model (Hugging
    # Face marks its output-capturing hooks as installed), which must not outlive the pass
    attributes = [(m, dict(vars(m))) for m in modules]
    # ... and the contents of plain dict/list attributes: caches filled during the pass
    # (timm keeps attention biases per device in a dict) must not keep its tensors
    handled = {"_parameters", "_buffers", "_modules", *_HOOK_DICTS}
    containers = [
        (value, copy.copy(value))
        for m in modules
        for key, value in vars(m).items()
        if type(value) in (dict, list) and key not in handled
    ]
    slots = [(m, "_parameters", dict(m._parameters)) for m in modules]
    slots += [(m, "_buffers", dict(m._buffers)) for m in modules]
    params = {id(p): p for m in modules for p in m._parameters.values() if p is not None}.values()
    param_state = [(p, p.requires_grad, p.grad, p._version) for p in params]
    grads = [(g, g.clone()) for _, _, g, _ in param_state if g is not None and has_data(g)]
    buffers = {id(b): b for m in modules for b in m._buffers.values() if b is not None}.values()
    buffer_values = [(b, b.detach().clone()) for b in buffers if has_data(b)]
    # attributes set on the tensors themselves (by the forward, or a rule's mark on a
    # random mask drawn into a buffer) must not outlive the pass either
    tensor_attributes = [(t, dict(t.__dict__)) for t in [*params, *buffers]]
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices, enabled=True):
        try:
            yield
        finally:
            with torch.no_grad():
                for m, saved in attributes:
                    current = vars(m)
                    for key in [k for k in current if k not in saved]:
                        del current[key]
                    for key, value in saved.items():
                        if current.get(key, _MISSING) is not value:
                            current[key] = value
                for value, saved in containers:
                    if isinstance(value, dict):
                        value.clear()
                        value.update(saved)
                    else:
                        value[:] = saved
                for m, name, saved in slots + hooks:
                    current = getattr(m, name)
                    current.clear()
                    current.update(saved)
                for m, flag in training:
                    m.training = flag
                for t, saved in tensor_attributes:
                    if t.__dict__ != saved:
                        t.__dict__.clear()
                        t.__dict__.update(saved)
                for b, value in buffer_values:
                    if not torch.equal(b, value) or b.dtype != value.dtype:
                        b.copy_(value)
                for g, value in grads:
                    g.copy_(value)
                changed = []
                for p, requires_grad, grad, version in param_state:
                    p.requires_grad_(requires_grad)
                    p.grad = grad
                    if p._version != version:
                        changed.append(p)
            if changed:
                names = [n for n, p in model.named_parameters() if any(p is c for c in changed)]
                raise ModelChangedError(
                    f"the model wrote its own parameters {names} during the pass; fxinspect cannot restore them"
                )
