"""Matrix products on packed low-bit weights: the dense product's MACs, ``flops = 2 * macs``.

A weight-only quantized linear (int4 or int8 values with per-group scales) either
dequantises its weight into a dense tensor first, ops that the other families count (a
``_to_copy`` that reads the packed values and writes the dense copy, the scale
multiply, then ``mm``), or calls one of the kernels below, which read the packed weight
and multiply in the activation's dtype. Either way the arithmetic is the dense
product's: one MAC per multiply of ``input @ weight.T``, ``input.numel() * N`` for an
``(..., K)`` input and an ``(..., N)`` result, as ``mm`` counts. The scales applied
inside the kernel are not counted (as for ``_scaled_mm``). Bytes are the defaults: the
tensors the kernel is given, so the packed weight and its scales as stored, never the
dequantised size. ``FlopCounterMode`` has no formula for these kernels and counts them 0.

==========================================  ======================================
op                                          arguments
==========================================  ======================================
_weight_int4pack_mm (CUDA tinygemm)         input, packed int4, group size,
_weight_int4pack_mm_for_cpu                 scales and zeros
_weight_int4pack_mm_with_scales_and_zeros   input, packed int4, group size,
                                            scales, zeros (XPU)
_weight_int8pack_mm (CPU)                   input, int8 weight (N, K), scales
_dyn_quant_matmul_4bit (CPU, KleidiAI)      input, packed weight (its bias inside),
                                            block size, K, N
==========================================  ======================================

torchao's own ``torchao::dequantize_affine`` (``(q - zero_point) * scale`` per element,
blockwise, cast to the output dtype: what its tensors run where an op has no packed
kernel, an int8 embedding table dequantised whole before the gather) costs 2 flops per
output element, 1 without a zero point; its bytes are the defaults (the stored values,
scales and zero points read, the dense tensor written). That op exists once torchao is
imported, which fxinspect never does: :func:`register_torchao_rules` registers it then,
at import of :mod:`fxinspect.rules` or when the counting run first meets a ``torchao::`` op.

Example
-------
>>> import torch
>>> x, w = torch.randn(4, 64), torch.randint(-128, 127, (32, 64), dtype=torch.int8)
>>> packed_weight_matmul((x, w, torch.ones(32)), {}, torch.empty(4, 32))   # 4 * 64 * 32
Cost(flops=16384, macs=8192, bytes_read=None, bytes_written=None)
"""

from __future__ import annotations

from typing import Any

from ._util import arg, aten_packets, first_tensor, float_numel
from .registry import Cost, register_defined, register_namespace_loader, register_rule

PACKED_WEIGHT_MATMULS = (
    "_weight_int4pack_mm",
    "_weight_int4pack_mm_for_cpu",
    "_weight_int4pack_mm_with_scales_and_zeros",
    "_weight_int8pack_mm",
    "_dyn_quant_matmul_4bit",
)


@register_rule(*aten_packets(PACKED_WEIGHT_MATMULS))
def packed_weight_matmul(args: tuple, kwargs: dict, out: Any) -> Cost:
    """A matmul on a packed weight: ``input.numel() * N`` MACs, the dense product's."""
    return Cost.matmul(args[0].numel() * first_tensor(out).shape[-1])


def dequantize_affine(args: tuple, kwargs: dict, out: Any) -> Cost:
    """``torchao::dequantize_affine(input, block_size, scale, zero_point, ...)``: a subtract
    and a multiply per output element (the multiply alone without a zero point)."""
    per_element = 1 if arg(args, kwargs, 3, "zero_point") is None else 2
    return Cost(flops=per_element * float_numel(first_tensor(out)))


TORCHAO_RULES = {"dequantize_affine": dequantize_affine}


def register_torchao_rules() -> bool:
    """Register the torchao ops' rules for those defined; safe to call again. Returns
    whether any is (they are once torchao is imported)."""
    return register_defined("torchao", TORCHAO_RULES)


register_torchao_rules()
register_namespace_loader("torchao", register_torchao_rules)
