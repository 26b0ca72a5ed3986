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

from .errors import FxInspectError
from .tensors import forked_rng, has_data, inner_tensors

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


_ACTIVE = [0]  # how many preserved() blocks are open: fxinspect is running the model itself


def in_analysis() -> bool:
    """Whether fxinspect is running the model on its own (capturing, counting, timing):
    hooks of ``watch`` and ``track`` let such calls pass, so a watched training loop
    counts and logs only its own steps."""
    return _ACTIVE[0] > 0


class ModelChangedError(FxInspectError):
    """The model wrote its own parameters during the analysed pass."""


@contextlib.contextmanager
def preserved(model: torch.nn.Module) -> Iterator[None]:
    """Restore ``model``'s state, flags, hooks and the RNG on exit."""
    state = _Snapshot(model)
    _ACTIVE[0] += 1
    with forked_rng():
        try:
            yield
        finally:
            _ACTIVE[0] -= 1
            with torch.no_grad():
                state.restore_modules()
                state.restore_tensors()
                changed = state.restore_parameters()
            if changed:
                names = [n for n, p in model.named_parameters() if any(p is c for c in changed)]
                raise ModelChangedError(
                    f"the model wrote its own parameters {names} during the pass; fxinspect cannot restore them"
                )


def _versions(p: torch.Tensor) -> tuple[int, ...]:
    """The version counters of ``p``'s data: its own, or a quantized weight's inner tensors'
    (a write into its int8 values leaves the wrapper's counter where it was)."""
    return tuple(t._version for t in inner_tensors(p))


class _Snapshot:
    """What a pass can change in a model, taken before it runs (parameters by reference)."""

    def __init__(self, model: torch.nn.Module) -> None:
        modules = list(model.modules())
        self.training = [(m, m.training) for m in modules]
        self.hooks = [(m, name, dict(getattr(m, name))) for m in modules for name in _HOOK_DICTS if hasattr(m, name)]
        # plain attributes too: a first forward may set flags or caches on the model (Hugging
        # Face marks its output-capturing hooks as installed), which must not outlive the pass
        self.attributes = [(m, dict(vars(m))) for m in modules]
        # ... and the contents of plain dict/list attributes: caches filled during the pass
        # (timm keeps attention biases per device in a dict) must not keep its tensors
        handled = {"_parameters", "_buffers", "_modules", *_HOOK_DICTS}
        self.containers = [
            (value, copy.copy(value))
            for m in modules
            for key, value in vars(m).items()
            if type(value) in (dict, list) and key not in handled
        ]
        self.slots = [(m, "_parameters", dict(m._parameters)) for m in modules]
        self.slots += [(m, "_buffers", dict(m._buffers)) for m in modules]
        params = {id(p): p for m in modules for p in m._parameters.values() if p is not None}.values()
        self.param_state = [(p, p.requires_grad, p.grad, _versions(p)) for p in params]
        self.grads = [(g, g.clone()) for _, _, g, _ in self.param_state if g is not None and has_data(g)]
        buffers = {id(b): b for m in modules for b in m._buffers.values() if b is not None}.values()
        self.buffer_values = [(b, b.detach().clone()) for b in buffers if has_data(b)]
        # attributes set on the tensors themselves (by the forward, or a rule's mark on a
        # random mask drawn into a buffer) must not outlive the pass either
        self.tensor_attributes = [(t, dict(t.__dict__)) for t in [*params, *buffers]]

    def restore_modules(self) -> None:
        """Attributes, containers, parameter/buffer slots, hooks and training flags."""
        for m, saved in self.attributes:
            current = vars(m)
            for key in [k for k in current if k not in saved]:
                del current[key]
            for key, value in saved.items():
                if current.get(key, _MISSING) is not value:
                    current[key] = value
        for value, saved in self.containers:
            if isinstance(value, dict):
                value.clear()
                value.update(saved)
            else:
                value[:] = saved
        for m, name, saved in self.slots + self.hooks:
            current = getattr(m, name)
            current.clear()
            current.update(saved)
        for m, flag in self.training:
            m.training = flag

    def restore_tensors(self) -> None:
        """Attributes set on the tensors, buffer values and gradient values."""
        for t, saved in self.tensor_attributes:
            if t.__dict__ != saved:
                t.__dict__.clear()
                t.__dict__.update(saved)
        for b, value in self.buffer_values:
            if not torch.equal(b, value) or b.dtype != value.dtype:
                b.copy_(value)
        for g, value in self.grads:
            g.copy_(value)

    def restore_parameters(self) -> list[torch.Tensor]:
        """``requires_grad`` and ``.grad`` put back; the parameters whose values the pass wrote."""
        changed = []
        for p, requires_grad, grad, version in self.param_state:
            p.requires_grad_(requires_grad)
            p.grad = grad
            if _versions(p) != version:
                changed.append(p)
        return changed
