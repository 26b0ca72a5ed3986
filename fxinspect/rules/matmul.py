"""Matrix products and convolutions: MACs from shapes, ``flops = 2 * macs``.

A MAC is one multiply-accumulate of the naive algorithm; bias additions, ``alpha`` /
``beta`` scalings and the accumulation into ``self`` of ``addmm``-style ops are not
counted, as in ``torch.utils.flop_counter`` (whose totals these rules equal, see the
tests).

=====================================  ==============================================
op                                      MACs
=====================================  ==============================================
mm, addmm, bmm, baddbmm, addbmm,        ``numel(A) * B.shape[-1]`` (batch * m * k * n)
_int_mm, _scaled_mm
mv, addmv, dot, vdot                    ``numel(A)`` (m * k, or k)
addr                                    ``m * n`` (outer product: k = 1)
_grouped_mm                             per group, the rows/columns/depth ``offs``
                                        gives it (read from its values) times the
                                        other two sizes; 3-D x 3-D: as bmm
_addmm_activation                       as addmm, plus 1 flop per output element
convolution (every backend variant)     ``out.numel() * numel(weight[1:])``;
                                        transposed: ``input.numel() * numel(weight[1:])``
convolution_backward                    one forward convolution per requested
                                        gradient (input, weight); grad_bias is free
_trilinear (nn.Bilinear)                one MAC per point of the broadcast space
=====================================  ==============================================

``_grouped_mm`` (mixture-of-experts layers) is the one rule here that reads values: the
few integers of ``offs``, since which rows each group multiplies is known from nothing
else (rows past ``offs[-1]`` are skipped by the kernel). For meta and fake tensors those
values do not exist: the rule raises, so the op is listed uncounted rather than priced
by a guess (see :func:`group_sizes`).

Note: for grouped convolutions ``FlopCounterMode`` counts the weight gradient of
``convolution_backward`` ``groups`` times too high (it uses all input channels where
each group sees ``C_in / groups``); we count the true figure, equal to the forward.
"""

from __future__ import annotations

from typing import Any

import torch

from ..tensors import has_data
from ._util import arg, aten, aten_packets, first_tensor, float_numel, numel
from .registry import Cost, Rule, register_rule


def matmul_macs(a, b) -> int:
    """MACs of ``a @ b`` for a matrix/batch ``a`` and a matrix/batch or vector ``b``."""
    if b.dim() == 1:  # mv, dot: every element of a meets one element of b
        return a.numel()
    return a.numel() * b.shape[-1]


def _mm_rule(i: int, j: int) -> Rule:
    """A rule for a product of the tensor arguments ``i`` and ``j``."""

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        return Cost.matmul(matmul_macs(args[i], args[j]))

    rule.__name__ = rule.__qualname__ = f"matmul_of_args_{i}_{j}"
    return rule


register_rule(*aten_packets(["mm", "bmm", "mv", "dot", "vdot", "_int_mm", "_scaled_mm"]))(_mm_rule(0, 1))
register_rule(*aten_packets(["addmm", "baddbmm", "addbmm", "addmv"], inplace=True))(_mm_rule(1, 2))


@register_rule(*aten_packets(["addr"], inplace=True))
def addr(args, kwargs, out):
    """Outer-product update: one multiply per output element."""
    return Cost.matmul(args[1].numel() * args[2].numel())


@register_rule(aten._addmm_activation)
def addmm_activation(args, kwargs, out):
    """addmm fused with relu/gelu: the matmul plus 1 flop per output element."""
    macs = matmul_macs(args[1], args[2])
    return Cost(flops=2 * macs + float_numel(first_tensor(out)), macs=macs)


def group_sizes(offs: torch.Tensor) -> list[int]:
    """The size of each group delimited by ``offs``, the groups' cumulative ends.

    Group ``g`` spans ``[offs[g - 1], offs[g])`` (the first from 0); elements past
    ``offs[-1]`` belong to no group. Reads the values (``G`` integers, one host sync on
    an accelerator). Raises ``ValueError`` when they cannot be read (a meta or fake
    tensor: the counting run then lists the op uncounted, never a guessed figure) or
    when they decrease (the kernels leave that undefined).
    """
    if not has_data(offs):
        raise ValueError(
            "grouped matmul offsets are a meta/fake tensor: the sizes of the groups are values, "
            "unknown without data, so its MACs are not counted"
        )
    ends = [int(end) for end in offs.tolist()]
    sizes, start = [], 0
    for end in ends:
        if end < start:
            raise ValueError(f"grouped matmul offsets must not decrease, got {ends}")
        sizes.append(end - start)
        start = end
    return sizes


def grouped_mm_macs(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None) -> int:
    """MACs of a grouped matmul ``a @ b`` whose jagged dimension ``offs`` splits.

    ``sum(group sizes)`` is the length of the jagged dimension the groups cover:

    * 2-D ``(M, K)`` x 3-D ``(G, K, N)``: rows of ``a`` split (experts' forward);
      group ``g`` is ``(m_g, K) @ (K, N)``: ``sum(m_g) * K * N``;
    * 3-D ``(G, M, K)`` x 2-D ``(K, N)``: columns of ``b`` split: ``M * K * sum(n_g)``;
    * 2-D ``(M, K)`` x 2-D ``(K, N)``: the contraction splits (weight gradients),
      ``G`` results ``(M, k_g) @ (k_g, N)``: ``M * sum(k_g) * N``;
    * 3-D ``(G, M, K)`` x 3-D ``(G, K, N)``: no ``offs``, a batched product: ``G*M*K*N``.
    """
    if a.dim() == 3 and b.dim() == 3:
        return matmul_macs(a, b)
    if offs is None:
        raise ValueError(f"grouped matmul of a {a.dim()}-D and a {b.dim()}-D operand needs offs")
    covered = sum(group_sizes(offs))
    if a.dim() == 2 and b.dim() == 3:
        return covered * a.shape[1] * b.shape[2]
    if a.dim() == 3 and b.dim() == 2:
        return a.shape[1] * a.shape[2] * covered
    if a.dim() == 2 and b.dim() == 2:
        return a.shape[0] * covered * b.shape[1]
    raise ValueError(f"grouped matmul operands must be 2-D or 3-D, got {a.dim()}-D and {b.dim()}-D")


@register_rule(aten._grouped_mm)
def grouped_mm(args, kwargs, out):
    """Grouped GEMM ``(self, mat2, offs=None, bias=None, out_dtype=None)``: the MACs of
    the groups ``offs`` delimits (:func:`grouped_mm_macs`); raises without its values."""
    return Cost.matmul(grouped_mm_macs(args[0], args[1], arg(args, kwargs, 2, "offs")))


@register_rule(aten._trilinear)
def trilinear(args, kwargs, out):
    """``nn.Bilinear``'s kernel: one MAC per point of the broadcast iteration space."""
    i1, i2, i3 = args[0], args[1], args[2]
    expand = [arg(args, kwargs, 3 + n, f"expand{n + 1}") for n in range(3)]
    ndim = i1.dim() + len(expand[0])
    sizes = [1] * ndim
    for t, exp in zip((i1, i2, i3), expand, strict=True):
        dims = [d for d in range(ndim) if d not in set(exp)]
        for d, size in zip(dims, t.shape, strict=True):
            sizes[d] = max(sizes[d], size)
    return Cost.matmul(numel(sizes))


def conv_macs(x, weight, out, transposed: bool) -> int:
    """MACs of a convolution: every output (input, if transposed) element meets one
    filter of ``C_in / groups * prod(kernel)`` weights (``weight.shape[1:]``)."""
    per_element = numel(weight.shape[1:])
    return (x.numel() if transposed else first_tensor(out).numel()) * per_element


def _conv_rule(transposed: bool | None, name: str) -> Rule:
    """A rule for a convolution whose ``transposed`` flag is fixed, or (``None``) read
    from argument 6 as in ``aten.convolution``."""

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        flag = transposed if transposed is not None else bool(arg(args, kwargs, 6, "transposed", False))
        return Cost.matmul(conv_macs(args[0], args[1], out, flag))

    rule.__name__ = rule.__qualname__ = name
    return rule


register_rule(*aten_packets(["convolution", "_convolution", "convolution_overrideable"]))(
    _conv_rule(None, "convolution")
)
register_rule(
    *aten_packets(
        [
            "cudnn_convolution",
            "mkldnn_convolution",
            "miopen_convolution",
            "miopen_depthwise_convolution",
            "_mps_convolution",
            "_nnpack_spatial_convolution",
            "_slow_conv2d_forward",
            "slow_conv3d_forward",
            "slow_conv_dilated2d",
            "slow_conv_dilated3d",
            "_conv_depthwise2d",
            "conv_depthwise3d",
        ]
    )
)(_conv_rule(False, "convolution_forward"))
register_rule(
    *aten_packets(
        [
            "cudnn_convolution_transpose",
            "miopen_convolution_transpose",
            "_mps_convolution_transpose",
            "slow_conv_transpose2d",
            "slow_conv_transpose3d",
        ]
    )
)(_conv_rule(True, "convolution_transposed"))


def _conv_backward_cost(grad_out, x, weight, transposed: bool, mask) -> Cost:
    # grad_input is a transposed convolution of grad_out with the weight, grad_weight a
    # convolution of the input with grad_out: each has exactly the forward's MACs.
    per_element = numel(weight.shape[1:])
    forward = (x.numel() if transposed else grad_out.numel()) * per_element
    return Cost.matmul(forward * (bool(mask[0]) + bool(mask[1])))


@register_rule(aten.convolution_backward)
def convolution_backward(args, kwargs, out):
    """Backward of ``aten.convolution``: one forward's MACs per gradient requested."""
    transposed = bool(arg(args, kwargs, 7, "transposed", False))
    mask = arg(args, kwargs, 10, "output_mask", (True, True, True))
    return _conv_backward_cost(args[0], args[1], args[2], transposed, mask)


@register_rule(aten._slow_conv2d_backward)
def slow_conv2d_backward(args, kwargs, out):
    """Backward of the CPU fallback convolution (``output_mask`` overloads, or all three)."""
    mask = arg(args, kwargs, 6, "output_mask", (True, True, True))
    return _conv_backward_cost(args[0], args[1], args[2], False, mask)
