"""Checkpoints put on a model's modules by a plan, and taken off again.

Each module's ``forward`` is set on the instance to a non-reentrant
``torch.utils.checkpoint`` of its class's forward, so classes, parameter names and the
state dict stay as they were, and a ``copy.deepcopy`` of the model checkpoints the same
modules of the copy (the attribute is a ``functools.partial`` over the module).

>>> import torch
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
>>> with AppliedPlan(model, ["0"]):
...     "forward" in vars(model[0])
True
>>> "forward" in vars(model[0])
False
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
import torch.utils.checkpoint

from ..errors import InputError
from ..run.prepare import unwrapped

__all__ = ["AppliedPlan", "checkpointable"]


def _checkpointed_forward(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """The module's own forward, run under a non-reentrant checkpoint."""
    forward = type(module).forward.__get__(module)
    return torch.utils.checkpoint.checkpoint(forward, *args, use_reentrant=False, **kwargs)


def checkpointable(module: torch.nn.Module) -> bool:
    """Whether a plan can checkpoint ``module``: its ``forward`` is its class's, not one
    set on the instance (by another tool, or by a plan already applied)."""
    return "forward" not in vars(module)


class AppliedPlan:
    """A plan's checkpoints on a model; ``remove()`` or leaving a ``with`` block takes them off."""

    def __init__(self, model: torch.nn.Module, paths: Sequence[str]):
        model = unwrapped(model, "plan.apply")[0]  # (paths are the unwrapped model's, as reports give them)
        missing = [p for p in paths if not _has_submodule(model, p)]
        if missing:
            raise InputError(
                f"plan.apply: {type(model).__name__} has no module {missing[0]!r} (the plan names {list(paths)})"
            )
        self.modules = [model.get_submodule(p) for p in paths]
        taken = [p for p, m in zip(paths, self.modules) if not checkpointable(m)]
        if taken:
            raise InputError(f"plan.apply: the forward of {taken} is already replaced on the instance")
        for m in self.modules:
            m.forward = functools.partial(_checkpointed_forward, m)

    def remove(self) -> None:
        """Take the checkpoints off: each module's forward is its class's again."""
        for m in self.modules:
            vars(m).pop("forward", None)
        self.modules = []

    def __enter__(self) -> AppliedPlan:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _has_submodule(model: torch.nn.Module, path: str) -> bool:
    try:
        model.get_submodule(path)
    except AttributeError:
        return False
    return True
