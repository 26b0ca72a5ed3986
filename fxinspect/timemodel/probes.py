"""Workloads :mod:`.host` times that are more than one op: streamed matmuls, eager module code.

* :func:`streamed_matmuls`: ``x @ w.T`` as a Linear runs it, over weights the caches do
  not hold, for several counts of rows (a decode step's matmuls have one per sequence);
* :func:`eager_block`: a transformer block's module code on tiny tensors, so its time is
  all dispatch: Python, module calls, views and the launches of its ops, which is what an
  aten call costs in an eager model on a CPU beyond its work (a bare op in a tight loop,
  about 1 µs, is several times less). :func:`priced_calls` counts the calls the time
  model prices in it (the free ones, views, are not: their cost is folded into the others').
"""

from __future__ import annotations

import functools

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..rules import registry

__all__ = ["eager_block", "linear_over", "priced_calls", "streamed_matmuls"]

_WIDTH, _HEADS = 16, 4
_WEIGHTS = 4  # streamed weights taken in turn: 4 × 64 MiB, beyond any common CPU cache


def streamed_matmuls(inner: int, outer: int, rows: tuple[int, ...], device: str) -> list[tuple[dict, object]]:
    """For each count of rows, ``{"work", "bytes"}`` of ``x @ w.T`` over an ``outer × inner``
    float32 weight and the call that runs it: each call the next of :data:`_WEIGHTS` such
    weights, so that it reads one the caches no longer hold (a cache keeps part of a
    weight read over and over; a model's next step reads every weight of its layers first)."""
    weights = [torch.randn(outer, inner, device=device) for _ in range(_WEIGHTS)]
    out = []
    for m in rows:
        x = torch.randn(m, inner, device=device)
        moved = 4 * (m * inner + outer * inner + m * outer)
        out.append(({"work": 2 * m * inner * outer, "bytes": moved}, functools.partial(linear_over, x, weights)))
    return out


def linear_over(x: torch.Tensor, weights: list[torch.Tensor]) -> torch.Tensor:
    """``x @ w.T`` with the first of ``weights``, which then goes last."""
    weights.append(weights.pop(0))
    return torch.nn.functional.linear(x, weights[-1])


class _Block(torch.nn.Module):
    """A decoder block as model code writes it: RMS norms, projections, heads viewed and
    rotated, attention, a gated MLP, residuals."""

    def __init__(self) -> None:
        super().__init__()
        w = _WIDTH
        self.q, self.k, self.v, self.o = (torch.nn.Linear(w, w, bias=False) for _ in range(4))
        self.gate, self.up, self.down = (torch.nn.Linear(w, w, bias=False) for _ in range(3))
        self.norms = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(w)) for _ in range(2)])

    @staticmethod
    def _norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        x32 = x.to(torch.float32)
        return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, w = x.shape
        h = self._norm(x, self.norms[0])
        q, k, v = (p(h).view(b, t, _HEADS, w // _HEADS).transpose(1, 2) for p in (self.q, self.k, self.v))
        q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, w))
        h = self._norm(x, self.norms[1])
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def eager_block(device: str):
    """A call of :class:`_Block` on one token (under ``no_grad``), its work negligible."""
    block = _Block().to(device)
    x = torch.randn(1, 1, _WIDTH, device=device)
    cos, sin = (
        torch.ones(1, 1, 1, _WIDTH // _HEADS, device=device),
        torch.zeros(1, 1, 1, _WIDTH // _HEADS, device=device),
    )

    @torch.no_grad()
    def run() -> None:
        block(x, cos, sin)

    return run


class _Counter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.priced = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if registry.lookup(func) is not registry.FREE:
            self.priced += 1
        return func(*args, **(kwargs or {}))


def priced_calls(fn) -> int:
    """How many aten calls one call of ``fn`` makes that the time model prices (not free)."""
    with _Counter() as counter:
        fn()
    return counter.priced
