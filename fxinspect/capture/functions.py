"""Custom ``torch.autograd.Function`` calls that a tier traced through, losing their backward.

Symbolic tracing keeps each ``cls.apply(...)`` as one node that makes the real call
(:mod:`fxinspect.capture.kept`), so the program's backward is the Function's own. The
export and eager tiers cannot: export traces the Function's ``forward`` and its graph is
differentiated op by op (a straight-through estimator's backward becomes the rounding's,
a gradient reversal is lost), and the eager tier records the ``forward``'s ops, which
autograd ran with grad off (no gradient reaches what comes before). Such a program
computes the model's values but not its gradients, so a tier says which Functions it
traced through (``Capture.lost_functions``) and a backward is not run on it
(:func:`lost_function_error`; ``method="auto"`` prefers a capture that keeps them).

Example
-------
>>> import torch
>>> class Twice(torch.autograd.Function):
...     forward = staticmethod(lambda ctx, x: x.clone())
...     backward = staticmethod(lambda ctx, g: 2 * g)
>>> model = torch.nn.Linear(2, 2)
>>> with functions_traced_through(model) as seen:
...     _ = Twice.apply(model(torch.randn(1, 2)))
>>> seen
[('Twice', '')]
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence

import torch
from torch.utils import _pytree as pytree

from ..errors import CaptureError

__all__ = ["functions_traced_through", "lost_function_error", "lost_function_notes", "named"]


def _running_module(paths: dict[int, str], limit: int = 64) -> str:
    """The path of the innermost module of the model whose ``forward`` is on the stack
    (``""``, the root, when none is found within ``limit`` frames)."""
    frame = sys._getframe(2)
    for _ in range(limit):
        if frame is None:
            break
        owner = frame.f_locals.get("self")
        if owner is not None and id(owner) in paths:
            return paths[id(owner)]
        frame = frame.f_back
    return ""


def _needs_grad(args: tuple, kwargs: dict) -> bool:
    """Whether the call takes part in a backward: grad on and a tensor input requiring it."""
    if not torch.is_grad_enabled():
        return False
    leaves = pytree.tree_leaves((args, kwargs))
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in leaves)


@contextlib.contextmanager
def functions_traced_through(model: torch.nn.Module) -> Iterator[list[tuple[str, str]]]:
    """``(Function class, module path)`` of each custom ``autograd.Function`` (one defined
    outside torch) applied on tensors requiring grad while the block runs; each once.

    Torch's own Functions (reentrant checkpointing's) compute what their forward does,
    and one applied without grad has no backward to lose: neither is listed.
    """
    paths = {id(m): p for p, m in model.named_modules()}
    seen: list[tuple[str, str]] = []
    original = torch.autograd.Function.__dict__["apply"]

    def apply(cls, *args, **kwargs):
        if cls.__module__.split(".")[0] != "torch" and _needs_grad(args, kwargs):
            entry = (cls.__qualname__, _running_module(paths))
            if entry not in seen:
                seen.append(entry)
        return original.__get__(None, cls)(*args, **kwargs)  # (a classmethod, in C or Python)

    torch.autograd.Function.apply = classmethod(apply)
    try:
        yield seen
    finally:
        torch.autograd.Function.apply = original


def named(lost: Sequence[tuple[str, str]], limit: int = 4) -> str:
    """``"Doubled (in module 'fc2'), Round (in the root module)"``, the first ``limit``."""
    said = [f"{cls} (in {f'module {path!r}' if path else 'the root module'})" for cls, path in lost[:limit]]
    return ", ".join(said) + (", ..." if len(lost) > limit else "")


def lost_function_notes(tier: str, lost: Sequence[tuple[str, str]]) -> list[str]:
    """The note a tier that traced through custom Functions adds to its capture."""
    if not lost:
        return []
    return [
        f"{tier}: custom autograd.Function {named(lost)} traced through: the forward figures are the model's, "
        "but the program's backward is not the Function's own, so no backward is run on this capture "
        "(method='symbolic' keeps it)"
    ]


def lost_function_error(tier: str, lost: Sequence[tuple[str, str]], failures: Sequence[tuple[str, str]] = ()):
    """The error for a backward asked of a capture that traced through custom Functions."""
    tried = "".join(f"\n  {t}: {reason}" for t, reason in failures)
    return CaptureError(
        f"a backward was asked, but the {tier} tier traced through the custom autograd.Function "
        f"{named(lost)}: its program differentiates the ops of the Function's forward (export) or none of them "
        "(eager) instead of running its own backward, so gradients and backward figures may be wrong. Use method='symbolic', "
        "which keeps each Function call as one node (with leaf_modules=[...] for parts it cannot trace); "
        "leaf_modules does not help under export or eager, which trace through every module. "
        "A forward-only analysis (backward=False, or inspect under torch.no_grad()) runs on this tier."
        + (f"\nOther tiers:{tried}" if tried else ""),
        failures,
    )
