"""Attention kernels: the two matmuls of scaled-dot-product attention, as MACs.

For query ``(..., s_q, d_qk)`` over ``h_q`` query heads, keys ``s_k`` long and values of
width ``d_v``::

    forward   macs = b * h_q * s_q * s_k * (d_qk + d_v)         # Q K^T, then P V
    backward  macs = b * h_q * s_q * s_k * (3 * d_qk + 2 * d_v)  # recompute Q K^T,
                                                                 # dP, dV, dQ, dK

``flops = 2 * macs``, as ``torch.utils.flop_counter``'s sdpa formulas. The softmax,
scaling, masking and dropout inside a fused kernel are not counted, and a causal or
otherwise masked attention is counted in full (an upper bound, like
``FlopCounterMode``). Grouped-query attention (k/v with fewer heads) counts the query
heads: every query head attends. Variable-length (nested) batches are counted as
``len(cu_seqlens) - 1`` sequences of the maximal lengths, an upper bound read from
shapes alone. (``FlopCounterMode`` reads the ``(b, s, h, d)`` tensors of
``_efficient_attention_forward/backward`` as ``(b, h, s, d)``; we read the layout each
kernel has.)

The eval fast paths of ``nn.MultiheadAttention`` (``_native_multi_head_attention``)
and ``nn.TransformerEncoderLayer`` (``_transformer_encoder_layer_fwd``) are counted as
the ops their slow paths run: the q/k/v and output projections, the attention, and for
the encoder layer the feed-forward matmuls plus the per-element costs of its layer
norms, residual additions and activation, and the projections' bias adds (1 flop per
output element, as ``addmm`` counts them). Both paths give the same MACs; the flops
differ by what the slow path computes outside its attention kernel (the ``need_weights``
path's scaling, softmax and head average), which the fast path's kernel does not count.
"""

from __future__ import annotations

from typing import Any

from ._util import aten, aten_packets
from .normalization import norm_flops
from .registry import Cost, Rule, register_rule

FORWARD = (1, 1)  # MACs per (b, h_q, s_q, s_k) and unit of (d_qk, d_v)
BACKWARD = (3, 2)


def attention_macs(q, k, v, seq_dim: int, weights: tuple[int, int], varlen=None) -> int:
    """MACs of attention of ``q`` over ``k``/``v`` (sequence axis ``seq_dim``).

    ``q.numel() // d_qk`` is ``b * h_q * s_q`` in every layout; ``varlen`` is
    ``(cu_seqlens_q, max_q, max_k)`` for nested batches.
    """
    d_qk, d_v = q.shape[-1], v.shape[-1]
    width = weights[0] * d_qk + weights[1] * d_v
    if varlen is not None and varlen[0] is not None:
        cu_seqlens_q, max_q, max_k = varlen
        heads = q.shape[-2]
        return (cu_seqlens_q.shape[0] - 1) * heads * max_q * max_k * width
    return (q.numel() // d_qk) * k.shape[seq_dim] * width


def _sdpa_rule(first: int, seq_dim: int, weights: tuple[int, int], varlen_at: int | None = None) -> Rule:
    """A rule for an attention op whose q, k, v are arguments ``first..first+2``;
    ``varlen_at`` is the index of ``cu_seqlens_q`` (then ``cu_seqlens_k``, ``max_q``,
    ``max_k``) for the kernels that take nested batches."""

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        q, k, v = args[first], args[first + 1], args[first + 2]
        varlen = None
        if varlen_at is not None:
            varlen = (args[varlen_at], args[varlen_at + 2], args[varlen_at + 3])
        return Cost.matmul(attention_macs(q, k, v, seq_dim, weights, varlen))

    rule.__name__ = rule.__qualname__ = "attention_forward" if weights == FORWARD else "attention_backward"
    return rule


# Layout (b, h, s, d): sequence at -2.
FUSED_FORWARDS = (  # the kernels whose backward recomputes Q K^T (layout (b, h, s, d), then (b, s, h, d))
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_fused_attention_overrideable",
    "_flash_attention_forward",
    "_efficient_attention_forward",
)
FUSED_BACKWARDS = tuple(f"{name.removesuffix('_forward')}_backward" for name in FUSED_FORWARDS)
"""Their backward kernels: ``BACKWARD``'s ``3 * d_qk`` holds the recomputed ``Q K^T``
(what a model-FLOPs count leaves out: :mod:`fxinspect.integrations.flops`)."""

register_rule(
    *aten_packets(
        [*FUSED_FORWARDS[:5], "_scaled_dot_product_attention_math", "_scaled_dot_product_attention_math_for_mps"]
    )
)(_sdpa_rule(0, -2, FORWARD))
register_rule(*aten_packets(FUSED_BACKWARDS[:5]))(_sdpa_rule(1, -2, BACKWARD))
# Layout (b, s, h, d): sequence at 1; or nested (total, h, d) with cu_seqlens.
register_rule(aten._flash_attention_forward)(_sdpa_rule(0, 1, FORWARD, varlen_at=3))
register_rule(aten._efficient_attention_forward)(_sdpa_rule(0, 1, FORWARD, varlen_at=4))
register_rule(aten._flash_attention_backward)(_sdpa_rule(1, 1, BACKWARD, varlen_at=6))
register_rule(aten._efficient_attention_backward)(_sdpa_rule(1, 1, BACKWARD, varlen_at=6))


def sequence_lengths(t) -> list[int]:
    """The length of every sequence of a batch-first ``(b, s, e)`` tensor, or of a nested
    tensor's sequences (padding dropped: what the fast paths compute on)."""
    if t.is_nested:
        return [int(size[0]) for size in t._nested_tensor_size().tolist()]
    return [t.shape[-2]] * (t.numel() // (t.shape[-2] * t.shape[-1]))


def mha_macs(query, key, qkv_weight, proj_weight) -> int:
    """MACs of multi-head attention with packed projections (batch-first, embed E);
    nested query and key count the tokens of each sequence, not its padding."""
    embed = qkv_weight.shape[1]
    n_q, n_k = query.numel() // embed, key.numel() // embed  # tokens: b*s_q, b*s_k
    q_proj = n_q * embed * (qkv_weight.shape[0] // 3)
    kv_proj = 2 * n_k * embed * (qkv_weight.shape[0] // 3)
    pairs = sum(q * k for q, k in zip(sequence_lengths(query), sequence_lengths(key)))
    attention = pairs * 2 * embed  # heads * head_dim = E for both matmuls
    out_proj = n_q * proj_weight.numel()
    return q_proj + kv_proj + attention + out_proj


def mha_bias_flops(query, key, qkv_weight, qkv_bias, proj_weight, proj_bias) -> int:
    """Bias adds of the projections, 1 flop per output element (as ``addmm`` counts them)."""
    embed = qkv_weight.shape[1]
    n_q, n_k = query.numel() // embed, key.numel() // embed
    per_projection = qkv_weight.shape[0] // 3
    qkv = (n_q + 2 * n_k) * per_projection if qkv_bias is not None else 0
    return qkv + (n_q * proj_weight.shape[0] if proj_bias is not None else 0)


@register_rule(aten._native_multi_head_attention)
def native_multi_head_attention(args, kwargs, out):
    """``nn.MultiheadAttention``'s fast path: projections (with their bias adds) +
    attention + output projection."""
    macs = mha_macs(args[0], args[1], args[5], args[7])
    return Cost(flops=2 * macs + mha_bias_flops(args[0], args[1], args[5], args[6], args[7], args[8]), macs=macs)


def _present(*tensors) -> int:
    return sum(t is not None for t in tensors)


@register_rule(aten._transformer_encoder_layer_fwd)
def transformer_encoder_layer(args, kwargs, out):
    """``nn.TransformerEncoderLayer``'s fast path, counted as its slow path's ops."""
    src, qkv_weight, proj_weight = args[0], args[3], args[5]
    ffn_1, ffn_2 = args[14], args[16]
    tokens = src.numel() // qkv_weight.shape[1]
    macs = mha_macs(src, src, qkv_weight, proj_weight) + tokens * (ffn_1.numel() + ffn_2.numel())
    norms = sum(norm_flops(src.numel(), "mean_var", affine=_present(args[i], args[i + 1])) for i in (10, 12))
    residuals = 2 * src.numel()
    activation = tokens * ffn_1.shape[0]  # relu or gelu: 1 per element
    biases = mha_bias_flops(src, src, qkv_weight, args[4], proj_weight, args[6])
    biases += sum(tokens * w.shape[0] for w, b in ((ffn_1, args[15]), (ffn_2, args[17])) if b is not None)
    return Cost(flops=2 * macs + norms + residuals + activation + biases, macs=macs)
