"""Generation from the model's own graph: prefill, decode steps, the KV cache, what fits, how fast.

``fxinspect.generation(model, batch, prompt, new_tokens)`` analyses the model's own
prefill call and its own decode steps (the cache it builds itself, filled by its own
forward: :mod:`.inputs`), on the meta device by default, so a 70B model costs no memory:

* ``prefill`` is the report of the prompt's forward; ``decode_step(context=c)`` the report
  of one step with ``c`` tokens cached; both are reports as ``analyze`` gives them.
* A decode step's FLOPs, bytes, peak and each aten call's cost are exact curves in batch
  and context (:mod:`.curves`), fitted from a few analysed steps and checked on a spare one;
  ``cost(c)`` reads them at any context, and the time model prices them per call
  (:mod:`.step_time`).
* ``kv_bytes_per_token`` is the growth of the cache the model itself allocates
  (:mod:`.kv_curve`), windows and state-space layers included.
* ``ttft`` is the prefill's predicted time; ``tpot`` the mean predicted time of the decode
  steps, at the contexts ``prompt .. prompt + new_tokens - 2`` (the first token comes from
  the prefill); ``tokens_per_second`` the batch's generated tokens over both.
* ``peak`` is the most the generation holds: the higher of the prefill's and the last decode
  step's peaks, each with the weights and the cache it holds (``memory`` splits it);
  ``max_batch``/``max_context`` answer a budget from the same curves.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import InputError
from ..planning.budget import Budget
from ..report import Report
from .curves import fit
from .figures import report_figures
from .inputs import decode_inputs, prefill_inputs
from .kv_cache import cache_bytes, cache_windows
from .kv_curve import kv_bytes_past_windows
from .models import analysed_copy
from .step_time import StepTime, call_figures
from .terms import Term

__all__ = ["DecodeCost", "Generation", "GenerationMemory"]

_BATCHES = (1, 2, 3)


@dataclass(frozen=True)
class DecodeCost:
    """One decode step at ``context`` cached tokens for ``batch`` sequences: exact counts
    (``bytes``: read and written), the time model's seconds (``None`` without a device
    spec) and the most memory held while it runs (weights and cache included)."""

    batch: int
    context: int
    flops: int
    macs: int
    bytes: int
    seconds: float | None
    peak: int


@dataclass(frozen=True)
class GenerationMemory:
    """The generation's peak and what it is made of: the weights as stored, the cache at
    that point, and the rest (activations, and a new cache's copies while they are made)."""

    peak: int
    weights: int
    kv_cache: int
    activations: int
    phase: str  # "prefill" or "decode": which one holds the peak


class Generation:
    """The analyses of a model generating ``new_tokens`` after a ``prompt`` for ``batch``
    sequences; see the module. Made by :func:`fxinspect.generation`."""

    def __init__(
        self,
        model: torch.nn.Module,
        batch: int,
        prompt: int,
        new_tokens: int,
        device: Any,
        device_spec: Any,
        dtype: torch.dtype | None,
        cache: Any,
        options: dict[str, Any],
    ) -> None:
        if min(batch, prompt, new_tokens) < 1:
            raise InputError(
                f"generation expects batch, prompt and new_tokens >= 1; given {batch}, {prompt}, {new_tokens}"
            )
        self.batch, self.prompt, self.new_tokens = batch, prompt, new_tokens
        self.model, self.device = analysed_copy(model, device, dtype)
        self.dtype, self.cache = dtype, cache
        self.options = {"timing": False, **options}
        if device_spec is not None:
            self.options["device_spec"] = device_spec
        self._steps: dict[tuple[int, int], Report] = {}
        self._kv_at: dict[tuple[int, int], int] = {}  # (batch, context) -> the cache's bytes given to that step

    # -- the analyses ------------------------------------------------------------------

    def _analyse(self, inputs: dict[str, Any]) -> Report:
        from ..analyze import analyze  # (the entry point: imported when first needed)

        return analyze(self.model, inputs, **self.options)

    @functools.cached_property
    def prefill(self) -> Report:
        """The report of the prompt's forward (the batch's whole prompt in one call)."""
        return self._analyse(prefill_inputs(self.model, self.batch, self.prompt, device=self.device, cache=self.cache))

    def decode_step(self, context: int, batch: int | None = None) -> Report:
        """The report of one decode step with ``context`` tokens cached."""
        batch = self.batch if batch is None else batch
        key = (batch, context)
        if key not in self._steps:
            inputs = decode_inputs(self.model, batch, context, device=self.device, cache=self.cache)
            self._kv_at[key] = cache_bytes(_cache_of(inputs)).total
            self._steps[key] = self._analyse(inputs)
        return self._steps[key]

    @functools.cached_property
    def _windows(self) -> tuple[int, ...]:
        inputs = decode_inputs(self.model, 1, 4, device=self.device, cache=self.cache)
        return tuple(sorted(set(cache_windows(_cache_of(inputs)))))

    @functools.cached_property
    def curves(self) -> dict[str, Any]:
        """A decode step's figures as exact curves in ``(batch, context)`` (see :mod:`.curves`)."""

        def figures(b: int, c: int) -> dict[str, Any]:
            report = self.decode_step(c, b)
            return {**report_figures(report), **call_figures(report), "kv": self._kv_at[(b, c)]}

        windows = self._windows
        terms = [Term(), Term(b=1), Term(b=1, c=1)]
        terms += [Term(b=1, m=1, w=w) for w in windows]
        # (no context next to a window: a sliding layer's buffer turns within a token of it)
        contexts = [c for c in (3, 5, 9, 14, 21) if all(abs(c - w) > 1 for w in windows)]
        contexts += [x for w in windows for x in (w + 2, w + 7)]
        return fit(figures, terms, batches=_BATCHES, contexts=contexts, calls=len(terms) + 2)

    # -- the figures ---------------------------------------------------------------------

    @functools.cached_property
    def _kv(self):
        return kv_bytes_past_windows(self.model, 1, device=self.device, dtype=None)

    @property
    def kv_bytes_per_token(self) -> int:
        """Cache bytes one more token of one sequence costs, past every window (0 for a
        state-space model's fixed state, or once every layer is past its window)."""
        return int(self._kv.per_token)

    def kv_bytes(self, context: int, batch: int | None = None) -> int:
        """The cache's bytes at ``context`` tokens for ``batch`` sequences (from the decode
        steps' curve; measured on the model's own cache when that curve is not verified)."""
        batch = self.batch if batch is None else batch
        curve = self.curves["kv"]
        if curve.verified:
            return int(curve(batch, context))
        inputs = decode_inputs(self.model, batch, context, device=self.device, cache=self.cache)
        return cache_bytes(_cache_of(inputs)).total

    @property
    def weights_bytes(self) -> int:
        """Parameters and buffers as stored (quantized weights at their stored size)."""
        memory = self.prefill.memory
        return memory.params + memory.buffers

    def cost(self, context: int, batch: int | None = None) -> DecodeCost:
        """A decode step at ``context`` cached tokens, from the curves (no analysis)."""
        batch = self.batch if batch is None else batch
        curves = self.curves
        return DecodeCost(
            batch,
            context,
            int(curves["flops"](batch, context)),
            int(curves["macs"](batch, context)),
            int(curves["bytes"](batch, context)),
            self._step_time(batch, context) if self._step_time is not None else None,
            self._decode_peak(batch, context),
        )

    def _decode_peak(self, batch: int, context: int) -> int:
        return int(self.curves["resident"](batch, context) + self.curves["peak"](batch, context))

    @functools.cached_property
    def _step_time(self) -> StepTime | None:
        spec = self.prefill.time_model
        if spec is None:
            return None
        curves = {k: v for k, v in self.curves.items() if k.count("/") == 2}
        return StepTime(curves, next(iter(self._steps.values())), spec)  # (any step: each node's dtype)

    @property
    def ttft(self) -> float | None:
        """Time to first token: the prefill's predicted seconds (``None`` without a device spec)."""
        return self.prefill.totals.predicted_latency

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first: the decode steps' mean predicted seconds."""
        if self._step_time is None or self.new_tokens < 2:
            return None
        return self._step_time.mean(self.batch, self.prompt, self.prompt + self.new_tokens - 2)

    @property
    def tokens_per_second(self) -> float | None:
        """The batch's generated tokens per second, prefill included."""
        if self.ttft is None:
            return None
        seconds = self.ttft + (self.new_tokens - 1) * (self.tpot or 0.0)
        return self.batch * self.new_tokens / seconds

    @property
    def final_context(self) -> int:
        """The context of the last decode step (the cache then holds one token more)."""
        return self.prompt + self.new_tokens - 2

    @functools.cached_property
    def memory(self) -> GenerationMemory:
        """The peak and its parts (see :class:`GenerationMemory`)."""
        return self._memory(self.batch, self.final_context)

    @property
    def peak(self) -> int:
        """The most memory the generation holds at once, in bytes."""
        return self.memory.peak

    def _memory(self, batch: int, context: int) -> GenerationMemory:
        weights = self.weights_bytes
        prefill = self._prefill_peak(batch)
        if self.new_tokens < 2 or prefill >= (decode := self._decode_peak(batch, context)):
            kv = self._prefill_kv(batch)
            return GenerationMemory(prefill, weights, kv, prefill - weights - kv, "prefill")
        kv = self.kv_bytes(context + 1, batch)
        return GenerationMemory(decode, weights, kv, decode - weights - kv, "decode")

    def _prefill_peak(self, batch: int) -> int:
        if batch == self.batch:
            return self.prefill.memory.total_peak
        return int(self._prefill_curves["resident"](batch, self.prompt) + self._prefill_curves["peak"](batch, self.prompt))

    def _prefill_kv(self, batch: int) -> int:
        return self.kv_bytes(self.prompt, batch)

    @functools.cached_property
    def _prefill_curves(self) -> dict[str, Any]:
        def figures(b: int, c: int) -> dict[str, Any]:
            report = self.prefill if b == self.batch else self._analyse(
                prefill_inputs(self.model, b, c, device=self.device, cache=self.cache)
            )
            return report_figures(report)

        return fit(figures, [Term(), Term(b=1)], points=[(1, self.prompt), (2, self.prompt), (3, self.prompt)])

    def max_batch(self, budget: int | str, context: int | None = None, reserve: int | float | str = 0) -> int:
        """The largest batch whose generation to ``context`` (default: this one's final
        context) fits ``budget`` (bytes, or a string such as ``"80GiB"``); 0 if none does."""
        usable = Budget.of(budget, reserve).usable
        context = self.final_context if context is None else context
        fits = lambda b: self._memory(b, context).peak <= usable  # noqa: E731
        return _largest(fits, 1)

    def max_context(self, budget: int | str, batch: int | None = None, reserve: int | float | str = 0) -> int:
        """The longest context (prompt and generated tokens) ``batch`` sequences reach within
        ``budget``; 0 if the prefill alone does not fit."""
        usable = Budget.of(budget, reserve).usable
        batch = self.batch if batch is None else batch
        if self._prefill_peak(batch) > usable:
            return 0
        fits = lambda c: self._decode_peak(batch, c - 1) <= usable  # noqa: E731
        return max(self.prompt, _largest(fits, self.prompt + 1))


def _cache_of(inputs: dict[str, Any]) -> Any:
    """The cache among a call's keyword arguments (``cache``, or ``past_key_values`` before transformers 5)."""
    return inputs.get("cache", inputs.get("past_key_values"))


def _largest(fits, start: int) -> int:
    """The largest ``n >= start`` with ``fits(n)`` for a predicate true up to a point;
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
