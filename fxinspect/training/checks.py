"""Every training step's outputs checked for NaN/Inf, cheaply: the exact step when asked.

``watch`` logs histograms every ``every`` steps; between them a NaN can come and go (a
loop that skips the step, as ``GradScaler`` does on an overflow) and the next logged
step shows only where it spread. :class:`FiniteChecks` checks the model's own output
and the gradient that reaches it on *every* training step: one float32 sum each (a NaN
or ±Inf anywhere makes it non-finite; only a sum that overflows float32, values near
1e38 / numel, would be a false alarm), kept on the device and read (tested) in
batches, so a step costs one pass over the output, no copy and no synchronisation.

Example
-------
>>> import torch
>>> checks = FiniteChecks()
>>> for step, value in enumerate([1.0, float("nan"), 2.0]):
...     checks.output(step, torch.tensor([value]))
>>> checks.nonfinite()
[(1, 'output')]
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["FiniteChecks"]

_BATCH = 256  # flags read together (one synchronisation each)


class FiniteChecks:
    """Per-step finiteness of the model's output and its gradient; see the module."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, str, torch.Tensor]] = []
        self._found: list[tuple[int, str]] = []  # (step, "output" or "output gradient") that were not finite

    def output(self, step: int, tensors: Any) -> None:
        """Check this step's floating outputs; hook their gradients to check them as they arrive."""
        outs = [t for t in (tensors if isinstance(tensors, (list, tuple)) else [tensors]) if t.is_floating_point()]
        if not outs:
            return
        self._add(step, "output", outs)
        if torch.is_grad_enabled():
            for t in outs:
                if t.requires_grad:
                    t.register_hook(lambda grad, step=step: self._add(step, "output gradient", [grad]))

    def _add(self, step: int, kind: str, tensors: list[torch.Tensor]) -> None:
        # a NaN or ±Inf anywhere makes the sum non-finite: one op, no copy. A detached
        # tensor records no graph, so no grad mode is entered (which costs twice the sum)
        for t in tensors:
            detached = t.detach()
            self._pending.append(
                (step, kind, detached.sum() if detached.dtype == torch.float32 else detached.sum(dtype=torch.float32))
            )
        if len(self._pending) >= _BATCH:
            self._read()

    def _read(self) -> None:
        if self._pending:
            flags = torch.isfinite(torch.stack([f for _, _, f in self._pending])).cpu().tolist()
            self._found += [(s, k) for (s, k, _), ok in zip(self._pending, flags) if not ok]
            self._pending.clear()

    def nonfinite(self) -> list[tuple[int, str]]:
        """``(step, what)`` of every check that found NaN/Inf, in step order."""
        self._read()
        return sorted(set(self._found))

    def to_plain(self) -> dict[str, Any]:
        return {"nonfinite": [list(x) for x in self.nonfinite()]}

    @classmethod
    def from_plain(cls, data: dict[str, Any] | None) -> FiniteChecks:
        checks = cls()
        if data:
            checks._found = [tuple(x) for x in data["nonfinite"]]
        return checks
