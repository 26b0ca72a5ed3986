"""Every training step's outputs checked for NaN/Inf, cheaply: the exact step when asked.

``watch`` logs histograms every ``every`` steps; between them a NaN can come and go (a
loop that skips the step, as ``GradScaler`` does on an overflow) and the next logged
step shows only where it spread. :class:`FiniteChecks` checks the model's own output
and the gradient that reaches it on *every* training step, and a step between logged
ones runs no op for it:

* an output or gradient of at most :data:`HELD` values (a classifier's logits, a
  small model's; not a view of a larger tensor) is held, detached, and checked with the next ones together, every
  :data:`EVERY` of them, in a few ops for them all: each op a step runs costs it more
  than the values (the step's own ops leave the caches cold). An output written in
  place later in its step is checked as written;
* a larger one is summed in float32 as it comes (one op: a NaN or ±Inf anywhere makes
  the sum non-finite; only a sum that overflows float32, values near 1e38 / numel,
  would be a false alarm) and only the sum is kept.

The results stay on the device and are read (tested) in batches: no synchronisation
per step.

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

from collections.abc import Callable
from typing import Any

import torch

from .binning import places

__all__ = ["EVERY", "HELD", "FiniteChecks"]

HELD = 1 << 15
"""Values of an output or gradient held to be checked with others (128 KiB of float32)."""

EVERY = 64
"""Held tensors checked together (at most 8 MiB of float32 held)."""

_BATCH = 256  # results read together (one synchronisation each)


def _holdable(t: torch.Tensor) -> bool:
    """Small, and not a view of a larger tensor (holding it would hold all of that)."""
    return t.numel() <= HELD and (t._base is None or t._base.numel() <= HELD)


class FiniteChecks:
    """Per-step finiteness of the model's output and its gradient; see the module."""

    def __init__(self) -> None:
        self._held: list[tuple[int, str, torch.Tensor]] = []
        self._arriving: list[tuple[int, list[torch.Tensor]]] = []  # (step, its small gradients, as they come)
        # (which checks, a value each): a non-finite value marks its check as failed
        self._pending: list[tuple[list[tuple[int, str]], torch.Tensor]] = []
        self._found: list[tuple[int, str]] = []  # (step, "output" or "output gradient") that were not finite

    def output(self, step: int, tensors: Any, also: Callable[[], None] | None = None) -> None:
        """Check this step's floating outputs; hook their gradients to check them as they
        arrive (and call ``also`` there: the backward has begun)."""
        outs = [t for t in (tensors if isinstance(tensors, (list, tuple)) else [tensors]) if t.is_floating_point()]
        if not outs:
            return
        self._arrived()
        self._add(step, "output", outs)
        if torch.is_grad_enabled():
            for t in outs:
                if not t.requires_grad:
                    continue
                if also is None and _holdable(t):
                    # the hook is the list's own append: no Python runs in the backward
                    arriving: list[torch.Tensor] = []
                    self._arriving.append((step, arriving))
                    t.register_hook(arriving.append)
                else:
                    t.register_hook(lambda grad, step=step: self._gradient(step, grad, also))

    def _arrived(self) -> None:
        """Hold the small gradients appended since the last step (detached, if a
        double backward gave them a graph)."""
        arriving, self._arriving = self._arriving, []
        for step, grads in arriving:
            self._add(step, "output gradient", grads)

    def _gradient(self, step: int, grad: torch.Tensor, also: Callable[[], None] | None) -> None:
        self._add(step, "output gradient", [grad])
        if also is not None:
            also()

    def _add(self, step: int, kind: str, tensors: list[torch.Tensor]) -> None:
        for t in tensors:
            # (detached: a held output would hold its step's autograd graph; a detached sum
            # records none, and no grad mode is entered, which costs twice the sum)
            detached = t.detach() if t.requires_grad else t
            if _holdable(t):
                self._held.append((step, kind, detached))
                if len(self._held) >= EVERY:
                    self._check_held()
            else:
                total = detached.sum() if detached.dtype == torch.float32 else detached.sum(dtype=torch.float32)
                self._pending.append(([(step, kind)], total))
        if len(self._pending) >= _BATCH:
            self._read()

    def _check_held(self) -> None:
        """The held tensors' sums in float32, one per tensor, in a few ops for each device."""
        held, self._held = self._held, []
        by_device: dict[torch.device, list] = {}
        for entry in held:
            by_device.setdefault(entry[2].device, []).append(entry)
        for device, entries in by_device.items():
            ts = [t for _, _, t in entries]
            values = torch._C._nn.flatten_dense_tensors(ts).to(torch.float32)
            owners = places(tuple(t.numel() for t in ts), device)
            sums = torch.zeros(len(ts), dtype=torch.float32, device=device).index_add_(0, owners, values)
            self._pending.append(([(s, k) for s, k, _ in entries], sums))

    def _read(self) -> None:
        if self._pending:
            flags = torch.isfinite(torch.cat([v.reshape(-1) for _, v in self._pending])).cpu().tolist()
            whose = [w for ws, _ in self._pending for w in ws]
            self._found += [w for w, ok in zip(whose, flags) if not ok]
            self._pending.clear()

    def nonfinite(self) -> list[tuple[int, str]]:
        """``(step, what)`` of every check that found NaN/Inf, in step order."""
        self._arrived()
        self._check_held()
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
