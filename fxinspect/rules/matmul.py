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
_grouped_mm                             ``out.numel() * k`` (2-D x 2-D: ``m * k * n``)
_addmm_activation                       as addmm, plus 1 flop per output element
convolution (every backend variant)     ``out.numel() * numel(weight[1:])``;
                                        transposed: ``input.numel() * numel(weight[1:])``
convolution_backward                    one forward convolution per requested
                                        gradient (input, weight); grad_bias is free
_trilinear (nn.Bilinear)                one MAC per point of the broadcast space
=====================================  ==============================================

Note: for grouped convolutions ``FlopCounterMode`` counts the weight gradient of
``convolution_backward`` ``groups`` times too high (it uses all input channels where
each group sees ``C_in / groups``); we count the true figure, equal to the forward.
"""

from __future__ import annotations

from typing import Any

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


@register_rule(aten._grouped_mm)
def grouped_mm(args, kwargs, out):
    """Grouped GEMM (mixture-of-experts): every output element sums over k."""
    a, b = args[0], args[1]
    if a.dim() == 2 and b.dim() == 2:  # groups split k; out is (groups, m, n)
        return Cost.matmul(a.shape[0] * a.shape[1] * b.shape[1])
    return Cost.matmul(first_tensor(out).numel() * a.shape[-1])


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


@register_rule(*aten_packets(["_scaled_mm_v2"]))
def scaled_mm_v2(args, kwargs, out):
    """Scaled (low-precision) matmul ``self @ mat2``: as ``mm``; the scales are per
    tensor or per row, their multiplies not counted (as ``_scaled_mm``)."""
    return Cost.matmul(matmul_macs(args[0], args[1]))


@register_rule(*aten_packets(["sparse_sampled_addmm"]))
def sparse_sampled_addmm(args, kwargs, out):
    """``mat1 @ mat2`` computed only where the sparse ``self`` has entries: nnz * k."""
    sparse, mat1 = args[0], args[1]
    return Cost.matmul(sparse._nnz() * mat1.shape[-1])


@register_rule(aten._sparse_mm_reduce_impl)
def sparse_mm_reduce(args, kwargs, out):
    """Sparse ``self (m, k)`` times dense ``other (k, n)``: one MAC per entry and column."""
    return Cost.matmul(args[0]._nnz() * args[1].shape[-1])
