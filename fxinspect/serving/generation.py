"""Generation from the model's own graph: prefill, decode steps, the KV cache, what fits, how fast.

``fxinspect.generation(model, batch, prompt, new_tokens)`` analyses the model's own prefill
call and decode steps (its own cache, filled by its own forward: :mod:`.inputs`), on the
meta device by default: ``prefill`` and ``decode_step(c)`` are reports as ``analyze`` gives
them. A step's FLOPs, bytes, peak, cache and each aten call's cost are exact curves in batch
and context, fitted per range between the cache's windows (:mod:`.segments`, :mod:`.curves`)
and priced per call by the time model (:mod:`.step_time`). ``ttft`` is the prefill's
predicted time; ``tpot`` the decode steps' mean at the contexts ``prompt .. prompt +
new_tokens - 2`` (the first token comes from the prefill). ``peak`` is the higher of the
prefill's and the last step's, weights and cache included (:mod:`.fits`: ``memory`` splits
it; ``max_batch``/``max_context`` answer a budget from the same curves).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ..errors import InputError
from ..planning.budget import Budget
from ..progress import Parts
from ..report import Report
from .figures import decode_cost, report_figures, step_summary
from .fits import max_batch, max_context, memory_at, prefill_peak
from .inputs import cache_of, decode_inputs, prefill_inputs
from .kv_cache import cache_bytes, cache_windows
from .models import analysed_copy
from .records import DecodeCost, GenerationMemory
from .segments import Segments, fit_range
from .shallow import Layered
from .step_time import StepTime, step_seconds
from .views import generation_notes, generation_table, plot_generation

__all__ = ["DecodeCost", "Generation", "generation"]

# the batches a range is fitted at; from 2 under tensor parallelism (DTensor gathers logits by a view at batch 1)
_BATCHES, _TP_BATCHES = (1, 2, 3), (2, 3, 4)


class Generation:
    """The analyses of a model generating ``new_tokens`` after a ``prompt`` for ``batch``
    sequences; see the module. Made by :func:`generation`."""

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
        shallow: bool = True,
    ) -> None:
        if min(batch, prompt, new_tokens) < 1:
            raise InputError(
                f"generation expects batch, prompt and new_tokens >= 1; given {batch}, {prompt}, {new_tokens}"
            )
        self.batch, self.prompt, self.new_tokens = batch, prompt, new_tokens
        self._given = (device_spec, options, shallow)  # (what a shallow copy's generation is made with)
        self.model, self.device = analysed_copy(model, device, dtype)
        self.dtype, self.cache = dtype, cache
        self.options = {"timing": False, **options}
        self.parallel = options.get("parallel")  # (one rank's steps: its own share of the cache too)
        self._batches = _BATCHES if self.parallel is None else _TP_BATCHES
        if device_spec is not None:
            self.options["device_spec"] = device_spec
        self._steps: dict[tuple[int, int], Report] = {}
        self._kv_at: dict[tuple[int, int], int] = {}  # (batch, context) -> the cache's bytes given to that step
        self._summaries: dict[tuple[int, int], dict[str, Any]] = {}  # (batch, context) -> step_summary
        self._timed: dict[tuple[int, int | None], StepTime | None] = {}  # per range of contexts
        self._parts = Parts("generation", options.get("progress", True))  # (progress: the analyses as they run)

    # -- the analyses ------------------------------------------------------------------

    def _analyse(self, inputs: dict[str, Any]) -> Report:
        from ..analyze import analyze  # (the entry point: imported when first needed)

        # (generate() runs without gradients: nothing is saved for a backward; progress on stderr)
        with torch.no_grad(), self._parts.part(f"decode steps analysed: {len(self._steps)}"):
            return analyze(self.model, inputs, **self.options)

    @functools.cached_property
    def prefill(self) -> Report:
        """The report of the prompt's forward (the batch's whole prompt in one call)."""
        return self._analyse(prefill_inputs(self.model, self.batch, self.prompt, device=self.device, cache=self.cache))

    def decode_step(self, context: int, batch: int | None = None) -> Report:
        """The report of one decode step with ``context`` tokens cached."""
        key = (self.batch if batch is None else batch, context)
        if key not in self._steps:
            inputs = self._decode_inputs(*key)
            self._kv_at[key] = cache_bytes(cache_of(inputs)).total
            self._steps[key] = self._analyse(inputs)
        return self._steps[key]

    @functools.cached_property
    def _shallow(self) -> Layered | None:
        """Shallow copies of a meta decoder whose layers repeat, whose steps give this one's (:mod:`.shallow`)."""
        return Layered.of(self) if self._given[2] else None

    def _through_layers(self, what: str, *args: int) -> Any:
        """``what`` (a method's name) of the whole model from the shallow copies' (``None``
        where they cannot give it: then nothing more is asked of them)."""
        found = self._shallow.ask(what, *args) if self._shallow is not None else None
        if found is None:
            self.__dict__["_shallow"] = None
        return found

    def _summary(self, batch: int, context: int) -> dict[str, Any]:
        """What the curves and the figures read off the step at ``(batch, context)``
        (:func:`~.figures.step_summary`): the model's own analysis, or its layers'."""
        key = (batch, context)
        if key not in self._summaries:
            found = self._through_layers("_summary", batch, context) if key not in self._steps else None
            if found is None:
                found = step_summary(self.decode_step(context, batch), self._kv_at[key])
            self._summaries[key] = found
        return self._summaries[key]

    def _prefill_figures(self, batch: int) -> dict[str, Any]:
        """:func:`~.figures.report_figures` of the prefill of ``batch`` sequences (the model's, or its layers')."""
        if batch == self.batch and "prefill" in self.__dict__:
            return report_figures(self.prefill)
        found = self._through_layers("_prefill_figures", batch)
        if found is None:
            found = report_figures(self._analyse(prefill_inputs(self.model, batch, self.prompt, device=self.device,
                                                                cache=self.cache)))  # fmt: skip
        return found

    def _decode_inputs(self, batch: int, context: int) -> dict[str, Any]:
        return decode_inputs(self.model, batch, context, device=self.device, cache=self.cache, parallel=self.parallel)

    @functools.cached_property
    def _windows(self) -> tuple[int, ...]:
        return tuple(sorted(set(cache_windows(cache_of(self._decode_inputs(1, 4))))))

    @functools.cached_property
    def segments(self) -> Segments:
        """The context axis cut at the cache's windows, each range's curves fitted when first
        needed (:mod:`.segments`)."""
        return Segments(self._windows, functools.partial(fit_range, self))

    @property
    def curves(self) -> dict[str, Any]:
        """A decode step's figures as exact curves in ``(batch, context)`` over the prompt's
        range of contexts (see :mod:`.curves`; empty next to a window)."""
        return self.segments.curves(self.prompt) or {}

    def _exact(self, context: int, names: tuple[str, ...], batch: int = 0) -> dict[str, Any] | None:
        """The curves at ``context`` when those of ``names`` are verified (and fitted over ``batch``), else ``None``."""
        curves = self.segments.curves(context) if batch == 0 or batch >= self._batches[0] else None
        return curves if curves is not None and all(curves[n].verified for n in names) else None

    # -- the figures ---------------------------------------------------------------------

    @property
    def kv_bytes_per_token(self) -> int:
        """Cache bytes one more token of one sequence costs, past every window (0 for a
        state-space model's fixed state, or once every layer is past its window)."""
        past = max(self._windows, default=0) + 16
        return int(self.kv_bytes(past + 1, 1) - self.kv_bytes(past, 1))

    def kv_bytes(self, context: int, batch: int | None = None) -> int:
        """The cache's bytes at ``context`` tokens for ``batch`` sequences (from the decode
        steps' curve; measured on the model's own cache when that curve is not verified)."""
        batch = self.batch if batch is None else batch
        curves = self._exact(context, ("kv",))  # (the cache's own tensors: any batch)
        if curves is not None:
            return int(curves["kv"](batch, context))
        return cache_bytes(cache_of(self._decode_inputs(batch, context))).total

    @property
    def vocab_size(self) -> int:
        """The tokens the model scores at each step (its text config's ``vocab_size``)."""
        return self.model.config.get_text_config(decoder=True).vocab_size

    @property
    def weights_bytes(self) -> int:
        """Parameters and buffers as stored (quantized weights at their stored size)."""
        return self.prefill.memory.params + self.prefill.memory.buffers

    def cost(self, context: int, batch: int | None = None) -> DecodeCost:
        """A decode step at ``context`` cached tokens, read off the curves (analysed when
        its range has no verified counts: next to a window; the peak off its curve even
        unverified, see :meth:`decode_peak`)."""
        return decode_cost(self, context, self.batch if batch is None else batch)

    @property
    def ttft(self) -> float | None:
        """Time to first token: the prefill's predicted seconds (``None`` without a device spec)."""
        return self.prefill.totals.predicted_latency

    @functools.cached_property
    def tpot(self) -> float | None:
        """Time per output token after the first: the decode steps' mean predicted seconds."""
        if self.ttft is None or self.new_tokens < 2:
            return None
        return sum(self.step_seconds(c) for c in range(self.prompt, self.final_context + 1)) / (self.new_tokens - 1)

    def step_seconds(self, context: int, batch: int | None = None) -> float | None:
        """A decode step's predicted seconds at ``context`` (analysed next to a window)."""
        return step_seconds(self, context, self.batch if batch is None else batch)

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
        """The peak and its parts (see :class:`~.fits.GenerationMemory`)."""
        return memory_at(self, self.batch, self.final_context)

    @property
    def peak(self) -> int:
        """The most memory the generation holds at once, in bytes."""
        return self.memory.peak

    def decode_peak(self, batch: int, context: int, exact: bool = True) -> int:
        """The most a decode step at ``context`` holds (weights and cache included): off the
        curves, or analysed where they are not verified (a kernel's scratch on this CPU can
        break the peak's) when ``exact``; a search reads them anyway and checks its answer."""
        curves = self.segments.curves(context) if exact is False else self._exact(context, ("resident", "peak"), batch)
        if curves is None:
            return self._summary(batch, context)["peak"]
        return int(curves["resident"](batch, context) + curves["peak"](batch, context))

    def prefill_peak(self, batch: int) -> int:
        """The most the prefill of ``batch`` sequences holds (weights and the cache it fills included)."""
        return prefill_peak(self, batch)

    def max_batch(self, budget: int | str, context: int | None = None, reserve: int | float | str = 0) -> int:
        """The largest batch whose generation up to ``context`` (default: this one's last
        step) fits ``budget`` (bytes, or a string such as ``"80GiB"``); 0 if none does."""
        return max_batch(self, Budget.of(budget, reserve).usable, self.final_context if context is None else context)

    def max_context(self, budget: int | str, batch: int | None = None, reserve: int | float | str = 0) -> int:
        """The longest context (prompt and generated tokens) ``batch`` sequences reach within
        ``budget``; 0 if the prefill alone does not fit."""
        return max_context(self, Budget.of(budget, reserve).usable, self.batch if batch is None else batch)

    def table(self, tablefmt: str = "simple") -> str:
        """The prefill, the first, middle and last decode steps, the cache, the peak, the times."""
        return generation_table(self, tablefmt)

    def plot(self, path: Any = None, budget: int | str | None = None):
        """A decode step's cost and the memory stack against the context (a matplotlib Figure)."""
        return plot_generation(self, path, budget)

    @property
    def notes(self) -> list[str]:
        """What the figures assume, in words (the windows' ranges, a meta run's experts, generate()'s own tensors)."""
        return generation_notes(self)

    __str__ = table


def generation(
    model: torch.nn.Module,
    batch: int = 1,
    prompt: int = 512,
    new_tokens: int = 128,
    *,
    device: Any = "meta",
    device_spec: Any = None,
    dtype: torch.dtype | None = None,
    cache: Any = None,
    shallow: bool = True,
    **options: Any,
) -> Generation:
    """Generation of ``new_tokens`` after a ``prompt`` for ``batch`` sequences, analysed
    from the model's own prefill and decode steps (a Hugging Face generative model).

    ``device="meta"`` (the default) analyses a meta copy, cast to ``dtype`` when given:
    any size, no memory; ``None`` runs the model where it is. ``device_spec`` prices the
    steps (TTFT, TPOT; a preset, a ``DeviceSpec`` or ``"measured"``). ``cache``: the cache
    ``generate()`` would use (``None``), ``"static"``/``"dynamic"``, or an empty cache object.
    Other options go to each ``analyze``. Analyses run when a figure first needs them.
    ``parallel=fxinspect.Parallel.tp(n)`` (meta only): every figure is one rank's, its cache
    filled by the model parallelised as that rank's (its share of the key/value heads), each
    step's collectives in its report's ``communication``. On the meta device a decoder whose
    layers repeat has the steps its figures are fitted from analysed on copies of 2, 3 and 4
    blocks of layers (:mod:`.layers`; the same figures, exactly, in a fraction of the time;
    ``prefill`` and ``decode_step`` stay the whole model's); ``shallow=False`` analyses them whole.
    """
    return Generation(model, batch, prompt, new_tokens, device, device_spec, dtype, cache, options, shallow)
