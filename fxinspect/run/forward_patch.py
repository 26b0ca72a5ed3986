"""Answer a model's calls with something else, for the length of a block of user code.

``inspect`` and ``track(ops=True)`` need the user's own ``model(x)`` to run the
instrumented program. :class:`ForwardPatch` puts a ``forward`` on the model instance
that hands the call to ``call(args, kwargs)``; while ``call`` runs, the model has its
own ``forward`` back (capturing it, or a later call, sees the model as it is), and
:meth:`ForwardPatch.remove` leaves the instance as it was.

Example
-------
>>> import torch
>>> model = torch.nn.Linear(2, 2)
>>> patch = ForwardPatch(model, lambda args, kwargs: model(*args) * 0)
>>> float(model(torch.ones(1, 2)).abs().sum()), patch.remove(), "forward" in vars(model)
(0.0, None, False)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["ForwardPatch"]


class ForwardPatch:
    """``model.forward`` answered by ``call(args, kwargs)`` until :meth:`remove`."""

    def __init__(self, model: torch.nn.Module, call: Callable[[tuple, dict], Any]) -> None:
        self.model = model
        self._had = "forward" in vars(model)
        self._original = vars(model).get("forward")

        def forward(*args: Any, **kwargs: Any) -> Any:
            self.remove()  # the model's own forward while ``call`` runs
            try:
                return call(args, kwargs)
            finally:
                model.forward = forward

        self._forward = forward
        model.forward = forward

    def remove(self) -> None:
        """Give the model its own ``forward`` back."""
        if self._had:
            self.model.forward = self._original
        else:
            vars(self.model).pop("forward", None)
