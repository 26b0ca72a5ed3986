"""The bytes a generation cache holds, read from its own tensors, and the textbook closed form.

``cache_bytes(cache)`` walks any transformers cache (``DynamicCache`` and its layer objects,
sliding-window layers, ``StaticCache``, ``EncoderDecoderCache``, linear-attention / Mamba
layers with conv and recurrent states, quantized layers) or a legacy tuple of per-layer tuples,
by duck typing: tensors reached through public and private attributes, lists, tuples and dicts
(modules and configs skipped, 8 levels deep at most), and the inner tensors of tensor subclasses.
A cache class written later therefore still counts. The kind comes from the innermost name on a
tensor's path (``conv``, ``ssm``/``recurrent``, ``key``/``k_``, ``value``/``v_``, under a
``cross`` name for cross-attention); a tensor whose names say nothing falls back to the ``other``
kind rather than being dropped, and its layer is the first list index on its path (``None``
outside any list).

Bytes are counted per storage, once: a sliding-window layer keeps a view of the last
``window - 1`` tokens of a ``window``-token buffer, and the whole buffer is what stays allocated,
so that is what counts (``logical`` gives the views' own bytes). Meta tensors have storages with
sizes, so a cache built on the meta device counts exactly like a real one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["KINDS", "CacheBytes", "cache_bytes", "cache_windows", "closed_form_kv_bytes_per_token"]

KINDS = ("key", "value", "cross_key", "cross_value", "conv_state", "ssm_state", "other")

# attributes that never hold cache tensors but can lead far (configs, modules, streams)
_SKIP = frozenset(
    {"config", "layer_class_to_replicate", "prefetch_stream", "device", "dtype", "quantizer", "optimizer"}
)
# a legacy per-layer tuple: (key, value) or (self key, self value, cross key, cross value)
_LEGACY = ("key", "value", "cross_key", "cross_value")
_MAX_DEPTH = 8


@dataclass(frozen=True)
class CacheBytes:
    """Bytes held by a generation cache: total, per kind of tensor and per layer.

    ``total`` counts every storage once, at its allocated size; ``logical`` sums the bytes of the
    distinct tensor views (smaller when a layer keeps a slice of a larger buffer). ``by_layer``
    maps the layer index (the first list index on the tensor's path) to bytes; tensors outside
    any layer (a shared counter, say) are under ``None``.
    """

    total: int
    logical: int
    by_kind: dict[str, int] = field(default_factory=dict)
    by_layer: dict[int | None, int] = field(default_factory=dict)
    tensors: int = 0

    @property
    def self_attention(self) -> int:
        """Bytes of the self-attention keys and values."""
        return self.by_kind.get("key", 0) + self.by_kind.get("value", 0)

    @property
    def cross(self) -> int:
        """Bytes of the cross-attention keys and values (encoder-decoder models)."""
        return self.by_kind.get("cross_key", 0) + self.by_kind.get("cross_value", 0)

    @property
    def state(self) -> int:
        """Bytes of the recurrent state (conv and SSM states): constant in the context."""
        return self.by_kind.get("conv_state", 0) + self.by_kind.get("ssm_state", 0)


def _inner(t: torch.Tensor) -> dict[str, torch.Tensor] | None:
    """The plain tensors behind a wrapper tensor subclass (quantized values and scales), else None."""
    flatten = getattr(t, "__tensor_flatten__", None)
    if type(t) is torch.Tensor or type(t) is torch.nn.Parameter or flatten is None:
        return None
    names, _ = flatten()
    return {n: getattr(t, n) for n in names}


def _walk(obj: Any, path: tuple, seen: set[int], depth: int = 0) -> Iterator[tuple[tuple, torch.Tensor | int]]:
    """Every (path, tensor) reachable from ``obj``, and every int attribute named like a window.

    A path mixes attribute names and indices.
    """
    if isinstance(obj, torch.Tensor):
        inner = _inner(obj)
        if inner is None:
            yield path, obj
        else:
            for name, t in inner.items():
                yield from _walk(t, (*path, name), seen, depth + 1)
        return
    if isinstance(obj, int) and not isinstance(obj, bool) and path and "window" in str(path[-1]):
        yield path, obj
    if depth > _MAX_DEPTH or id(obj) in seen or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
        return
    seen.add(id(obj))
    if isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    elif isinstance(obj, Mapping):
        items = obj.items()
    elif isinstance(obj, torch.nn.Module) or isinstance(obj, type) or not hasattr(obj, "__dict__"):
        return
    else:
        items = ((k, v) for k, v in vars(obj).items() if k not in _SKIP)
    for key, value in items:
        yield from _walk(value, (*path, key), seen, depth + 1)


def cache_windows(cache: Any) -> tuple[int, ...]:
    """The window lengths a cache's layers declare (``sliding_window``: sliding or chunked layers)."""
    return tuple(v for _, v in _walk(cache, (), set()) if not isinstance(v, torch.Tensor))


def _kind(path: tuple, legacy: bool) -> str:
    """The kind of a tensor from the names on its path (a legacy tuple: from its position)."""
    names = [p.lower() for p in path if isinstance(p, str)]
    cross = any("cross" in n for n in names)
    if legacy and not names and len(path) == 2 and path[1] < len(_LEGACY):
        return _LEGACY[path[1]]
    for name in reversed(names):  # the innermost name decides
        if "conv" in name:
            return "conv_state"
        if "ssm" in name or "recurrent" in name:
            return "ssm_state"
        if "key" in name or name == "k" or name.startswith("k_"):
            return "cross_key" if cross else "key"
        if "value" in name or name == "v" or name.startswith("v_"):
            return "cross_value" if cross else "value"
    return "other"


def _storage_id(t: torch.Tensor) -> tuple[str, int]:
    # the StorageImpl's address: distinct per allocation on every device, meta included
    # (a meta storage's data_ptr is 0 for all)
    return (str(t.device), t.untyped_storage()._cdata)


def cache_bytes(cache: Any) -> CacheBytes:
    """The bytes of every tensor ``cache`` holds, each storage once.

    Parameters
    ----------
    cache
        A transformers ``Cache`` (any subclass; read by duck typing over its attributes), an
        ``EncoderDecoderCache`` (self and cross parts under their own kinds), or a legacy tuple
        of per-layer ``(key, value[, cross_key, cross_value])`` tuples.

    Examples
    --------
    >>> k = torch.zeros(2, 4, 10, 16)  # batch 2, 4 heads, 10 tokens, head_dim 16
    >>> cache_bytes(((k, k.clone()),)).total  # 2 * (2 * 4 * 10 * 16 * 4 B)
    10240
    """
    legacy = isinstance(cache, (list, tuple))
    by_kind: dict[str, int] = {}
    by_layer: dict[int | None, int] = {}
    storages: set[tuple[str, int]] = set()
    views: set[tuple] = set()
    total = logical = count = 0
    for path, t in _walk(cache, (), set()):
        if not isinstance(t, torch.Tensor):
            continue
        sid = _storage_id(t)
        view = (sid, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if view not in views:
            views.add(view)
            logical += t.numel() * t.element_size()
            count += 1
        if sid in storages:  # an alias or a view of a storage already counted
            continue
        storages.add(sid)
        size = t.untyped_storage().nbytes()
        total += size
        kind = _kind(path, legacy)
        by_kind[kind] = by_kind.get(kind, 0) + size
        layer = next((p for p in path if isinstance(p, int)), None)
        by_layer[layer] = by_layer.get(layer, 0) + size
    return CacheBytes(total, logical, by_kind, by_layer, count)


_ATTENTION_TYPES = frozenset({"full_attention", "sliding_attention", "chunked_attention", "attention"})


def _first(config: Any, *names: str) -> Any:
    return next((getattr(config, n) for n in names if getattr(config, n, None) is not None), None)


def closed_form_kv_bytes_per_token(config: Any, dtype: torch.dtype) -> int | None:
    """The textbook KV bytes per token of one sequence: 2 · layers · kv_heads · head_dim · bytes.

    What anyone computes from a config card, for comparison with the measured figure. It assumes
    every layer caches keys and values of every past token, so it overstates sliding-window and
    latent-attention (MLA) caches; for MLA configs (with ``kv_lora_rank``) the heads and head
    size are the uncompressed ones (``num_key_value_heads`` × ``v_head_dim``, the "MHA" cache the
    DeepSeek-V2 paper compares with). ``None`` where the formula does not apply: a config without
    attention heads (state-space models) or with layers that are not attention (hybrids such as
    Jamba or Bamba), where no single "layers" count means what the formula needs.
    """
    # an encoder-decoder config names its decoder's sizes itself (and Whisper's decoder view of
    # it maps decoder_layers to the head count)
    if getattr(config, "is_encoder_decoder", False) or not hasattr(config, "get_text_config"):
        text = config
    else:
        text = config.get_text_config(decoder=True)
    types = _first(text, "layer_types", "layers_block_type")
    if types is not None and any(t not in _ATTENTION_TYPES for t in types):
        return None
    heads = _first(text, "decoder_attention_heads", "num_attention_heads", "n_head", "num_heads")
    layers = _first(text, "decoder_layers", "num_decoder_layers", "num_hidden_layers", "n_layer", "num_layers")
    if heads is None or layers is None or getattr(text, "attn_layer_indices", None) is not None:
        return None
    # multi-query (one shared head) unless a Falcon-style config says its kv-head count is used
    if getattr(text, "multi_query", False) and not getattr(text, "new_decoder_architecture", False):
        kv_heads = 1
    else:
        kv_heads = _first(text, "num_key_value_heads", "num_kv_heads") or heads
    if getattr(text, "kv_lora_rank", None) is not None:
        head_dim = text.v_head_dim
    else:
        hidden = _first(text, "hidden_size", "n_embd", "d_model")
        head_dim = _first(text, "head_dim", "d_kv") or hidden // heads
    return 2 * layers * kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()
