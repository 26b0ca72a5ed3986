"""What fits: a generation's peak and its parts at any batch and context, and the largest that fit.

A generation holds the most either in its prefill (the prompt's activations, the cache it
fills) or in its last decode step (the longest cache, the step's activations); both hold
the weights. Between its decode steps transformers' ``generate()`` (greedy) keeps tensors
of its own, which no step of the model allocates: the next-token scores in float32 (the
last logits' copy and the processed scores: ``2 · batch · vocab · 4`` bytes) and the token
ids, old and grown by one (``batch · (2·context + 3) · 8`` bytes at a step on ``context``
cached tokens); they are ``loop``, added to a decode step's peak (measured against the
allocator over real ``generate()`` calls: what it holds beyond them is under 100 B). :func:`memory_at` reads the higher of the two from the analysed curves, and
:func:`largest_fitting` searches the largest batch or context under a budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["GenerationMemory", "largest_fitting", "memory_at"]


@dataclass(frozen=True)
class GenerationMemory:
    """The generation's peak and what it is made of: the weights as stored, the cache at
    that point, and the rest (activations, and a new cache's copies while they are made)."""

    peak: int
    weights: int
    kv_cache: int
    activations: int
    phase: str  # "prefill" or "decode": which one holds the peak
    loop: int = 0  # generate()'s own tensors between decode steps (see the module)


def memory_at(gen: Any, batch: int, context: int) -> GenerationMemory:
    """``gen``'s peak at ``batch`` sequences whose last decode step runs at ``context``."""
    weights = gen.weights_bytes
    prefill = gen.prefill_peak(batch)
    if gen.new_tokens >= 2:
        if (batch, context) == (
            gen.batch,
            gen.final_context,
        ):  # (this generation's own: analysed, not read off a curve)
            decode = gen.decode_step(context).memory.total_peak
        else:
            decode = gen.decode_peak(batch, context)
        loop = 2 * batch * gen.vocab_size * 4 + batch * (2 * context + 3) * 8
        if decode + loop > prefill:
            kv = gen.kv_bytes(context + 1, batch)
            return GenerationMemory(decode + loop, weights, kv, decode - weights - kv, "decode", loop)
    kv = gen.kv_bytes(gen.prompt, batch)
    return GenerationMemory(prefill, weights, kv, prefill - weights - kv, "prefill")


def largest_fitting(fits: Callable[[int], bool], start: int) -> int:
    """The largest ``n >= start`` with ``fits(n)``, for a predicate true up to a point;
    ``start - 1`` when ``fits(start)`` is false."""
    if not fits(start):
        return start - 1
    low, high = start, start * 2
    while fits(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low
