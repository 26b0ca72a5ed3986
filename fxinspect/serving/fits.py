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
from typing import Any

from .curves import fit
from .figures import report_figures
from .records import GenerationMemory
from .segments import side_by_side
from .terms import Term

__all__ = [
    "UNBOUNDED_CONTEXT",
    "context_limit",
    "largest_fitting",
    "max_batch",
    "max_context",
    "memory_at",
    "prefill_peak",
]


def memory_at(gen: Any, batch: int, context: int, exact: bool = True) -> GenerationMemory:
    """``gen``'s peak at ``batch`` sequences whose last decode step runs at ``context``
    (``exact``: see ``Generation.decode_peak``)."""
    weights = gen.weights_bytes
    prefill = gen.prefill_peak(batch)
    if gen.new_tokens >= 2:
        decode = gen.decode_peak(batch, context, exact)
        loop = 2 * batch * gen.vocab_size * 4 + batch * (2 * context + 3) * 8
        if decode + loop > prefill:
            kv = gen.kv_bytes(context + 1, batch)
            return GenerationMemory(decode + loop, weights, kv, decode - weights - kv, "decode", loop)
    kv = gen.kv_bytes(gen.prompt, batch)
    return GenerationMemory(prefill, weights, kv, prefill - weights - kv, "prefill")


def prefill_peak(gen: Any, batch: int) -> int:
    """The most the prefill of ``batch`` sequences holds: ``gen``'s own prefill, or a line in
    the batch through it and two more prefills (fitted once, checked on the third)."""
    if batch == gen.batch:
        return gen.prefill.memory.total_peak
    curves = gen.__dict__.get("_prefill_curves")
    if curves is None:

        def figures(b: int, p: int) -> dict[str, Any]:
            return gen._prefill_figures(b)  # (p: the prompt's)

        points = [(b, gen.prompt) for b in (sorted({1, 2, gen.batch})[:3] if gen.batch > 2 else [1, 2, 3])]
        found = side_by_side(figures, [p for p in points if p[0] != gen.batch], gen.device)  # (the others side by side)
        found[(gen.batch, gen.prompt)] = report_figures(gen.prefill)
        curves = gen.__dict__["_prefill_curves"] = fit(lambda b, p: found[(b, p)], [Term(), Term(b=1)], points=points)
    return int(curves["resident"](batch, gen.prompt) + curves["peak"](batch, gen.prompt))


def max_batch(gen: Any, usable: int, context: int) -> int:
    """The largest batch whose generation, up to a last step at ``context``, holds at most ``usable`` bytes."""
    found = largest_fitting(lambda b: memory_at(gen, b, context, exact=False).peak <= usable, 1)
    while found and memory_at(gen, found, context).peak > usable:  # (the answer checked where the curve is not)
        found -= 1
    return found


def max_context(gen: Any, usable: int, batch: int) -> int:
    """The longest context ``batch`` sequences reach holding at most ``usable`` bytes (0: the
    prefill does not fit). Where the memory sets no bound (a cache that stops growing: a
    sliding window on every layer, a recurrent state), the model's own limit (:func:`context_limit`)."""
    if gen.prefill_peak(batch) > usable:
        return 0
    fits = lambda c: gen.decode_peak(batch, c - 1, exact=False) <= usable  # noqa: E731
    found = largest_fitting(fits, gen.prompt + 1, UNBOUNDED_CONTEXT)
    if found >= UNBOUNDED_CONTEXT:
        return max(gen.prompt, context_limit(gen))
    while found > gen.prompt and gen.decode_peak(batch, found - 1) > usable:
        found -= 1
    return max(gen.prompt, found)


UNBOUNDED_CONTEXT = 2**31
"""The longest context a search tries (a memory that allows it sets no bound), and a model's
limit when its config states none."""


def context_limit(gen: Any) -> int:
    """The longest context the model takes: its text config's ``max_position_embeddings``
    (:data:`UNBOUNDED_CONTEXT` without one)."""
    config = getattr(gen.model, "config", None)
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    return int(getattr(text, "max_position_embeddings", None) or UNBOUNDED_CONTEXT)


def largest_fitting(fits: Callable[[int], bool], start: int, most: int | None = None) -> int:
    """The largest ``n`` from ``start`` to ``most`` (no bound: ``None``) with ``fits(n)``, for
    a predicate true up to a point; ``start - 1`` when ``fits(start)`` is false."""
    if not fits(start):
        return start - 1
    if most is not None and fits(most):
        return most
    low, high = start, start * 2 if most is None else min(start * 2, most)
    while fits(high):
        low, high = high, high * 2 if most is None else min(high * 2, most)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low
