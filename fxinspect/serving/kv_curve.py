"""Cache bytes as a function of the context, from the model's own forward (on the meta device).

For each context ``c`` the model runs a prefill of ``c - 1`` tokens and one decode step with its
own cache, the state ``generate()`` leaves after decoding (a prefill alone differs: a
sliding-window layer then keeps a view of the whole prompt's buffer until the next step). The
cache it returns is measured with :func:`cache_bytes`. On the meta device nothing is computed or
allocated, so a full-size configuration costs a walk through its layers.

"KV bytes per token" is the growth between two consecutive contexts of one sequence: a full
attention cache grows by the same amount at every context; a sliding-window layer stops growing
past its window; a state-space layer's state does not grow at all.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch

from fxinspect.serving.kv_cache import CacheBytes, cache_bytes, cache_windows

__all__ = ["KvCurve", "kv_bytes_curve", "kv_bytes_past_windows", "meta_copy", "meta_experts"]


@dataclass(frozen=True)
class KvCurve:
    """Cache bytes at each analysed context (decode state: prefill of ``c - 1`` tokens, one step)."""

    batch: int
    contexts: tuple[int, ...]
    bytes: tuple[CacheBytes, ...]

    @property
    def totals(self) -> tuple[int, ...]:
        """The cache's allocated bytes at each context."""
        return tuple(b.total for b in self.bytes)

    @property
    def per_token(self) -> int | Fraction:
        """Bytes one more token of one sequence costs, between the last two contexts."""
        if len(self.contexts) < 2:
            raise ValueError(f"per_token needs two contexts or more, given {self.contexts}")
        growth = Fraction(self.totals[-1] - self.totals[-2], (self.contexts[-1] - self.contexts[-2]) * self.batch)
        return int(growth) if growth.denominator == 1 else growth

    def extrapolate(self, context: int) -> int | Fraction:
        """Total bytes at ``context``, growing by ``per_token`` from the last analysed context.

        Exact when the last two analysed contexts are past every window (their growth is then
        the growth at every longer context), as :func:`kv_bytes_past_windows` chooses them.
        """
        return self.totals[-1] + self.per_token * self.batch * (context - self.contexts[-1])

    @property
    def shape(self) -> str:
        """``"constant"``, ``"linear"`` (equal growth per token) or ``"sublinear"`` (growth that slows: windows)."""
        steps = [
            Fraction(b - a, d - c) for a, b, c, d in zip(self.totals, self.totals[1:], self.contexts, self.contexts[1:])
        ]
        if all(s == 0 for s in steps):
            return "constant"
        return "linear" if len(set(steps)) == 1 else "sublinear"


def meta_copy(model: torch.nn.Module, dtype: torch.dtype | None = None) -> torch.nn.Module:
    """A copy of ``model`` whose parameters and buffers are meta tensors; the model is untouched.

    The tensors are mapped to meta before the deep copy, so no weight is ever copied; shared
    (tied) parameters stay shared. ``dtype`` casts the floating ones.
    """

    def meta(t: torch.Tensor) -> torch.Tensor:
        cast = dtype if dtype is not None and t.is_floating_point() else t.dtype
        return torch.empty_like(t, device="meta", dtype=cast)

    memo: dict[int, Any] = {}
    for p in model.parameters():
        memo[id(p)] = torch.nn.Parameter(meta(p), requires_grad=p.requires_grad)
    for b in model.buffers():
        memo[id(b)] = meta(b)
    return copy.deepcopy(model, memo)


def meta_experts(run: torch.nn.Module) -> None:
    """Route a meta copy's mixture-of-experts through transformers' ``batched_mm`` experts.

    The same arithmetic as the default, but without data-dependent shapes: the eager loop over
    hit experts calls ``nonzero`` (no meta kernel) and ``grouped_mm``'s meta kernel takes only
    16-bit inputs. Each token is sent to its top-k experts as in every implementation, and the
    cache, which this module measures, does not depend on the choice.
    """
    current = getattr(run.config, "_experts_implementation", None)
    setter = getattr(run, "set_experts_implementation", None)
    if current is not None and current != "batched_mm" and setter is not None:
        setter("batched_mm")


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _encoder_inputs(model: torch.nn.Module, batch: int, device: torch.device) -> dict[str, torch.Tensor]:
    config = model.config
    if model.main_input_name == "input_features":  # Whisper: exactly 2 * max_source_positions frames
        frames = 2 * config.max_source_positions
        return {"input_features": torch.zeros(batch, config.num_mel_bins, frames, device=device)}
    return {"input_ids": torch.zeros(batch, 16, dtype=torch.long, device=device)}


def _decode_state(
    model: torch.nn.Module, batch: int, context: int, encoder: dict[str, torch.Tensor], state: Any
) -> Any:
    """The model's cache (``state``, or its own when None) after a prefill of ``context - 1`` tokens and one step."""
    device = _device(model)
    # transformers 5 names the argument and the output `cache`; earlier versions `past_key_values`
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    ids = "decoder_input_ids" if encoder else "input_ids"
    steps = [context - 1, 1] if context > 1 else [1]
    extra = dict(encoder)
    for n in steps:
        tokens = torch.zeros(batch, n, dtype=torch.long, device=device)
        kwargs = {ids: tokens, "use_cache": True, **extra}
        if state is not None:
            kwargs[name] = state
        out = model(**kwargs)
        state = getattr(out, name)
        if encoder:  # the decode step reuses the encoder's output, as generate() does
            extra = {"encoder_outputs": (out.encoder_last_hidden_state,)}
    return state


def _runner(
    model: torch.nn.Module,
    batch: int,
    device: str | torch.device,
    dtype: torch.dtype | None,
    encoder_inputs: dict[str, torch.Tensor] | None,
    new_cache: Callable[[int], Any] | None,
) -> Callable[[int], Any]:
    """A function from a context to the cache the model (or its meta copy) holds there."""
    device = torch.device(device)
    if device.type == "meta":
        run = meta_copy(model, dtype)  # also for a meta model: the experts switch below is the copy's
        meta_experts(run)
    elif dtype is not None:
        raise ValueError(f"kv_bytes_curve: dtype={dtype} needs device='meta' (it would change the model)")
    elif _device(model) != device:
        raise ValueError(f"kv_bytes_curve: the model is on {_device(model)}, given device={device}")
    else:
        run = model
    encoder: dict[str, torch.Tensor] = {}
    if getattr(model.config, "is_encoder_decoder", False):
        given = encoder_inputs or _encoder_inputs(run, batch, device)
        encoder = {k: v.to(device) for k, v in given.items()}
    return lambda c: _decode_state(run, batch, c, encoder, new_cache(c) if new_cache is not None else None)


def kv_bytes_curve(
    model: torch.nn.Module,
    batch: int,
    contexts: Sequence[int],
    device: str | torch.device = "meta",
    dtype: torch.dtype | None = None,
    encoder_inputs: dict[str, torch.Tensor] | None = None,
    new_cache: Callable[[int], Any] | None = None,
) -> KvCurve:
    """Cache bytes of ``model``'s own cache at each of ``contexts`` tokens, for ``batch`` sequences.

    With ``device="meta"`` the forward runs on a meta copy of the model (weights never copied,
    ``dtype`` casting it), so any size is cheap; otherwise ``model`` must already be on
    ``device`` and runs as it is (``dtype`` then not allowed). Encoder-decoder models get
    ``encoder_inputs`` (default: 16 token ids, or Whisper's fixed-length features) and the
    contexts count decoder tokens; the cross-attention part stays constant. ``new_cache(context)``
    gives the empty cache to fill (a ``StaticCache`` of a chosen length, say); by default the
    model makes its own, as ``generate()`` does.
    """
    measure = _runner(model, batch, device, dtype, encoder_inputs, new_cache)
    with torch.no_grad():
        measured = tuple(cache_bytes(measure(c)) for c in contexts)
    return KvCurve(batch, tuple(contexts), measured)


def kv_bytes_past_windows(
    model: torch.nn.Module,
    batch: int = 1,
    device: str | torch.device = "meta",
    dtype: torch.dtype | None = None,
    encoder_inputs: dict[str, torch.Tensor] | None = None,
    start: int = 16,
) -> KvCurve:
    """The cache at ``start`` tokens and at two consecutive contexts past every window it declares.

    The windows are read from the cache the model builds at ``start`` (its layers'
    ``sliding_window``, for sliding and chunked attention alike), so the returned curve's
    ``per_token`` is the steady growth: what a token costs however long the context gets.
    """
    measure = _runner(model, batch, device, dtype, encoder_inputs, None)
    with torch.no_grad():
        first = measure(start)
        past = max((start, *cache_windows(first)))
        contexts = (start, past + 1, past + 2)
        measured = (cache_bytes(first), *(cache_bytes(measure(c)) for c in contexts[1:]))
    return KvCurve(batch, contexts, measured)
