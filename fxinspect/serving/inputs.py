"""The inputs of a Hugging Face model's own prefill and decode calls, as ``generate()`` makes them.

:func:`prefill_inputs` gives the keyword arguments of the first forward of generation
(the prompt, with an empty cache); :func:`decode_inputs` those of one decode step with
``context`` tokens already cached: the new token, the cache *the model itself builds*
(what ``generate()`` picks: transformers' ``DynamicCache``, a ``StaticCache`` when asked
or when the model's ``generation_config`` says so, an ``EncoderDecoderCache`` for an
encoder-decoder, the state layers of a state-space model), filled by the model's own
forward on ``context`` tokens, and the positions and masks ``generate()`` passes at that
step. They are made by the model's own generation helpers, in ``generate()``'s order
(``_prepare_cache_for_generation``, ``prepare_inputs_for_generation``,
``_update_model_kwargs_for_generation``); the tests check them against the kwargs a
real ``generate()`` passes.

On the ``meta`` device (a model on ``meta``, or ``device="meta"``) the filling forward runs
on a fake copy of the model (``fxinspect.run.virtual``: transformers' mask code reads
values, which meta tensors refuse); the cache and every other tensor come back as
``meta`` tensors: nothing is allocated, whatever the context.

Either result goes to ``fxinspect.analyze(model, inputs)`` as it is; the cache in it is
analysed as inputs and never changed (``fxinspect.capture.states``).

Tokens are ``1, 2, 3, ...`` (mod the vocabulary), skipping the model's special tokens:
no padding is ever inferred.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Iterator
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ..capture.states import state_tensors
from ..errors import InputError, add_where
from ..run.virtual import fake_copy, fake_inputs

__all__ = ["cache_of", "decode_inputs", "prefill_inputs"]


def require_generative(model: torch.nn.Module) -> None:
    for name in ("prepare_inputs_for_generation", "_update_model_kwargs_for_generation", "generation_config"):
        if not hasattr(model, name):
            raise InputError(
                f"{type(model).__name__} is no Hugging Face generative model (it has no {name}); "
                "expected a transformers model with a language-modelling head (..ForCausalLM, "
                "..ForConditionalGeneration)"
            )


def _model_device(model: torch.nn.Module, device: Any) -> torch.device:
    if device is not None:
        return torch.device(device)
    first = next(iter(model.parameters()), None)
    return first.device if first is not None else torch.device("cpu")


def _special(model: torch.nn.Module) -> set[int]:
    ids: set[int] = set()
    for config in (model.config, model.generation_config):
        for name in ("pad_token_id", "eos_token_id", "bos_token_id", "decoder_start_token_id"):
            value = getattr(config, name, None)
            ids.update(value if isinstance(value, (list, tuple)) else [] if value is None else [value])
    return ids


def _tokens(model: torch.nn.Module, batch: int, length: int, device: torch.device, start: int = 0) -> torch.Tensor:
    """``batch`` rows of ``length`` ordinary token ids (``start``-th onwards)."""
    vocab = model.config.get_text_config(decoder=True).vocab_size
    special = _special(model)
    usable = [t for t in range(1, vocab) if t not in special] or [0]
    row = torch.tensor([usable[(start + i) % len(usable)] for i in range(length)], dtype=torch.long)
    return row.expand(batch, length).contiguous().to(device)


def _generation_config(model: torch.nn.Module, cache: Any) -> Any:
    config = copy.deepcopy(model.generation_config)
    config.use_cache = True
    config.num_beams = config.num_return_sequences = 1  # (generate() fills unset ones so; one row per sequence)
    if isinstance(cache, str):
        config.cache_implementation = cache
    return config


def _start(model: torch.nn.Module, batch: int, length: int, device: torch.device, cache: Any, max_cache_len: int):
    """``(input_ids, model_kwargs)`` as ``generate()`` has them before its first forward,
    for a decoder-only model (``input_ids``: ``length`` prompt tokens)."""
    ids = _tokens(model, batch, length, device)
    kwargs: dict[str, Any] = {"use_cache": True}
    if "position_ids" in inspect.signature(model.forward).parameters:
        # generate(): positions from the (all ones) attention mask, which it then drops
        mask = torch.ones(batch, length, dtype=torch.long, device=device)
        kwargs["position_ids"] = model._prepare_position_ids_for_generation(ids, {"attention_mask": mask})
    if model._supports_logits_to_keep():
        kwargs["logits_to_keep"] = 1
    _add_cache(model, kwargs, batch, cache, max_cache_len)
    return ids, kwargs


def _add_cache(model: torch.nn.Module, kwargs: dict, batch: int, cache: Any, max_cache_len: int) -> None:
    if cache is not None and not isinstance(cache, str):  # the caller's (empty) cache: a copy is filled
        kwargs["cache"] = copy.deepcopy(cache)
        return
    model._prepare_cache_for_generation(_generation_config(model, cache), kwargs, None, batch, max_cache_len)


def _encoder_start(model, batch, encoder_length, length, device, cache, max_cache_len):
    """``(decoder_input_ids, model_kwargs)`` of an encoder-decoder's ``generate()``: the
    encoder's outputs on ``encoder_length`` tokens, ``length`` decoder tokens."""
    encoder_ids = _tokens(model, batch, encoder_length, device)
    with torch.no_grad():
        encoder_outputs = model.get_encoder()(input_ids=encoder_ids, return_dict=True)
    start = model.generation_config.decoder_start_token_id
    start = model.config.decoder_start_token_id if start is None else start
    decoder = _tokens(model, batch, length, device)
    decoder[:, 0] = start  # generate() prepends the start token when the ids lack it
    kwargs: dict[str, Any] = {"use_cache": True, "encoder_outputs": encoder_outputs}
    _add_cache(model, kwargs, batch, cache, max_cache_len)
    return decoder, kwargs


def _to_meta(value: Any) -> Any:
    """``value`` with every tensor in it (state objects included) a ``meta`` tensor."""
    tensors = state_tensors({"value": value})
    storages: dict[int, torch.Tensor] = {}

    def twin(t: torch.Tensor) -> torch.Tensor:
        # (the same storage, size and offset: a sliding layer keeps a view into a buffer one
        # token longer than the view, and the cache's bytes are the buffer's)
        st = t.untyped_storage()
        base = storages.get(id(st))
        if base is None:
            base = storages[id(st)] = torch.empty(st.nbytes(), dtype=torch.uint8, device="meta")
        out = torch.empty(0, dtype=t.dtype, device="meta")
        return out.set_(base.untyped_storage(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))

    return copy.deepcopy(value, {id(t): twin(t) for _, t in tensors})


def _virtual(model: torch.nn.Module, device: torch.device) -> bool:
    return device.type == "meta" or any(p.device.type == "meta" for p in model.parameters())


def _decode(model, batch, context, device, cache, encoder_length, max_cache_len) -> dict:
    # the cache of a step after the first: a prompt of context - 1 tokens and one decode
    # step (a sliding layer keeps the whole prompt until its first step crops it to the window)
    filled = max(context - 1, 1)
    encoder_decoder = model.config.is_encoder_decoder
    if encoder_decoder:
        ids, kwargs = _encoder_start(model, batch, encoder_length or context, filled, device, cache, max_cache_len)
    else:
        ids, kwargs = _start(model, batch, filled, device, cache, max_cache_len)
    with torch.no_grad():
        call = model.prepare_inputs_for_generation(ids, is_first_iteration=True, **kwargs)
        for length in range(filled, context + 1):
            if length > filled:
                call = model.prepare_inputs_for_generation(ids, next_sequence_length=1, **kwargs)
            out = model(**call, return_dict=True)
            kwargs = model._update_model_kwargs_for_generation(out, kwargs, is_encoder_decoder=encoder_decoder)
            ids = torch.cat([ids, _tokens(model, batch, 1, ids.device, start=length)], dim=-1)
    step = model.prepare_inputs_for_generation(ids, next_sequence_length=1, **kwargs)
    return {**step, "return_dict": True}


def decode_inputs(
    model: torch.nn.Module,
    batch: int,
    context: int,
    *,
    device: Any = None,
    cache: Any = None,
    encoder_length: int | None = None,
    max_cache_len: int | None = None,
    parallel: Any = None,
) -> dict[str, Any]:
    """The keyword arguments of one decode step with ``context`` tokens already cached.

    ``input_ids`` (``decoder_input_ids``) of shape ``(batch, 1)``, the cache as the model
    fills it after ``context`` tokens, and what else ``generate()`` passes at that step
    (positions; ``use_cache``, ``logits_to_keep``, ``return_dict``). ``cache``: ``None``
    for what ``generate()`` would pick (the ``generation_config``'s
    ``cache_implementation``, else a ``DynamicCache``), a ``cache_implementation`` name
    (``"static"``, ``"dynamic"``), or an empty cache object (a copy of it is filled).
    ``max_cache_len``: a static cache's length (default ``context + 1``: room for this
    step). ``encoder_length``: an encoder-decoder's source length (default ``context``);
    its encoder's outputs are passed, as ``generate()`` does. ``device``: where the
    tensors are (default the model's); ``"meta"`` allocates nothing (see the module).
    ``parallel``: a :class:`fxinspect.Parallel`: the cache is one rank's, filled by the
    model parallelised as that rank's (meta only; tensor parallel: its share of the heads).
    """
    require_generative(model)
    if batch < 1 or context < 1:
        raise InputError(f"decode_inputs expects batch >= 1 and context >= 1; given batch={batch}, context={context}")
    device = _model_device(model, device)
    max_cache_len = context + 1 if max_cache_len is None else max_cache_len
    if parallel is not None and not _virtual(model, device):
        raise InputError(
            f"decode_inputs with parallel= builds one rank's cache on the meta device; given device {device} "
            "(give device='meta')"
        )
    if not _virtual(model, device):
        return _decode(model, batch, context, device, cache, encoder_length, max_cache_len)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = fake_copy(model, mode)
        fake_cache = fake_inputs(cache, mode) if cache is not None and not isinstance(cache, str) else cache
        with _as_rank(fake, parallel):
            step = _decode(fake, batch, context, torch.device("cpu"), fake_cache, encoder_length, max_cache_len)
    return _to_meta(step)


@contextlib.contextmanager
def _as_rank(model: torch.nn.Module, parallel: Any) -> Iterator[None]:
    """With ``parallel`` (a :class:`~fxinspect.parallel.spec.Parallel`), ``model`` (a fake
    copy) parallelised as that rank's, on the fake process group: the cache it fills is
    the rank's (a tensor-parallel attention caches its own key and value heads)."""
    if parallel is None:
        yield
        return
    from ..parallel.group import fake_world  # (only with parallel=: torch.distributed)
    from ..parallel.spec import Parallel

    if not isinstance(parallel, Parallel):
        raise InputError(f"parallel= expects a fxinspect.Parallel, got {type(parallel).__name__}")
    rank = f"rank {parallel.rank} of {parallel.world_size}"
    with fake_world(parallel) as mesh:
        try:
            parallel.apply(model, mesh)
        except Exception as exc:  # (the user's own exception, with where it happened)
            add_where(exc, f"in apply(model, mesh) of parallel= ({parallel.label}), {rank}")
            raise
        try:
            yield
        except Exception as exc:
            add_where(exc, f"while the model parallelised as {rank} filled its cache (decode_inputs)")
            raise


def prefill_inputs(
    model: torch.nn.Module,
    batch: int,
    prompt: int,
    *,
    device: Any = None,
    cache: Any = None,
    max_cache_len: int | None = None,
) -> dict[str, Any]:
    """The keyword arguments of the first forward of generation: ``prompt`` tokens, an
    empty cache the call fills (``cache``, ``max_cache_len`` as for :func:`decode_inputs`;
    a static cache's default length ``prompt + 1``).

    For an encoder-decoder, ``prompt`` is the source length: ``input_ids`` of shape
    ``(batch, prompt)`` for the encoder and ``decoder_input_ids`` of shape ``(batch, 1)``
    (the decoder's start token), so the one call runs the encoder and the first decoder
    step (``generate()`` makes the same two computations as two calls).
    """
    require_generative(model)
    if batch < 1 or prompt < 1:
        raise InputError(f"prefill_inputs expects batch >= 1 and prompt >= 1; given batch={batch}, prompt={prompt}")
    device = _model_device(model, device)
    max_cache_len = prompt + 1 if max_cache_len is None else max_cache_len
    if model.config.is_encoder_decoder:
        start = model.generation_config.decoder_start_token_id
        start = model.config.decoder_start_token_id if start is None else start
        kwargs: dict[str, Any] = {
            "input_ids": _tokens(model, batch, prompt, device),
            "decoder_input_ids": torch.full((batch, 1), start, dtype=torch.long, device=device),
            "use_cache": True,
        }
        _add_cache(model, kwargs, batch, cache, max_cache_len)
        return {**kwargs, "return_dict": True}
    ids, kwargs = _start(model, batch, prompt, device, cache, max_cache_len)
    first = model.prepare_inputs_for_generation(ids, is_first_iteration=True, **kwargs)
    return {**first, "return_dict": True}


def cache_of(inputs: dict[str, Any]) -> Any:
    """The cache among a call's keyword arguments (``cache``, or ``past_key_values`` before transformers 5)."""
    return inputs.get("cache", inputs.get("past_key_values"))
