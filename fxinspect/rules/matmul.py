"""Matrix products and convolutions: MACs from shapes, ``flops = 2 * macs``.

A MAC is one multiply-accumulate of the naive algorithm, as in
``torch.utils.flop_counter`` (whose totals these rules' MACs equal, see the tests), and
``flops = 2 * macs`` plus one thing ``FlopCounterMode`` leaves out: **a bias add costs 1
flop per output element** -- the accumulation into ``self`` of ``addmm``-style ops
(when ``beta != 0``) and the ``bias`` of a convolution or ``_scaled_mm``. So ``addmm``
counts what ``mm`` + ``add`` count, and ``nn.Linear`` gives the same figure whichever
path its input's layout takes (a 3-D non-contiguous input runs ``bmm`` + ``add``), and
``nn.Conv2d`` the same whatever kernel adds its bias (cuDNN adds it as a separate op).
The backward counts the bias gradient as the sum it is (1 per ``grad_output`` element),
as autograd's ``sum`` after ``mm`` does for ``addmm``. ``alpha``/``beta`` scalings are
not counted.

=====================================  ==============================================
op                                      MACs
=====================================  ==============================================
mm, addmm, bmm, baddbmm, addbmm,        ``numel(A) * B.shape[-1]`` (batch * m * k * n)
_int_mm, _scaled_mm                     (+ 1 flop per output element: the bias add)
mv, addmv, dot, vdot                    ``numel(A)`` (m * k, or k)
addr                                    ``m * n`` (outer product: k = 1)
_grouped_mm                             per group, the rows/columns/depth ``offs``
                                        gives it (read from its values) times the
                                        other two sizes; 3-D x 3-D: as bmm
_addmm_activation                       as addmm, plus 1 flop per output element
convolution (every backend variant)     ``out.numel() * numel(weight[1:])``;
                                        transposed: ``input.numel() * numel(weight[1:])``
                                        (+ 1 flop per output element with a bias)
convolution_backward                    one forward convolution per requested
                                        gradient (input, weight); grad_bias: 1 flop
                                        per ``grad_output`` element, no MAC
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


def bias_flops(out: Any, bias: Any) -> int:
    """1 flop per (float) output element when a bias is added (``bias`` not ``None``)."""
    return 0 if bias is None else float_numel(first_tensor(out))


def accumulates(args: tuple, kwargs: dict) -> bool:
    """Whether an ``addmm``-style op adds ``self`` into its product (``beta != 0``)."""
    return arg(args, kwargs, 3, "beta", 1) != 0


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


register_rule(*aten_packets(["mm", "bmm", "mv", "dot", "vdot", "_int_mm"]))(_mm_rule(0, 1))


@register_rule(aten._scaled_mm)
def scaled_mm(args, kwargs, out):
    """fp8 GEMM: the product, plus its optional ``bias`` add."""
    macs = matmul_macs(args[0], args[1])
    return Cost(flops=2 * macs + bias_flops(out, arg(args, kwargs, 4, "bias")), macs=macs)


@register_rule(*aten_packets(["addmm", "baddbmm", "addbmm", "addmv"], inplace=True))
def addmm(args, kwargs, out):
    """``beta * self + alpha * (A @ B)``: the product, plus the add of ``self`` (the
    bias of ``nn.Linear``) unless ``beta == 0``: what ``mm`` + ``add`` count."""
    macs = matmul_macs(args[1], args[2])
    return Cost(flops=2 * macs + (float_numel(first_tensor(out)) if accumulates(args, kwargs) else 0), macs=macs)


@register_rule(*aten_packets(["addr"], inplace=True))
def addr(args, kwargs, out):
    """Outer-product update: one multiply per output element, plus the add of ``self``."""
    macs = args[1].numel() * args[2].numel()
    return Cost(flops=2 * macs + (float_numel(first_tensor(out)) if accumulates(args, kwargs) else 0), macs=macs)


@register_rule(aten._addmm_activation)
def addmm_activation(args, kwargs, out):
    """addmm fused with relu/gelu: the matmul, the bias add, 1 flop per element for the activation."""
    macs = matmul_macs(args[1], args[2])
    bias = float_numel(first_tensor(out)) if accumulates(args, kwargs) else 0
    return Cost(flops=2 * macs + bias + float_numel(first_tensor(out)), macs=macs)


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


def _conv_rule(transposed: bool | None, name: str, bias_at: int | None = 2) -> Rule:
    """A rule for a convolution whose ``transposed`` flag is fixed, or (``None``) read
    from argument 6 as in ``aten.convolution``; its bias is argument ``bias_at``
    (``None``: the kernel takes none, cuDNN's, whose caller adds it as its own op)."""

    def rule(args: tuple, kwargs: dict, out: Any) -> Cost:
        flag = transposed if transposed is not None else bool(arg(args, kwargs, 6, "transposed", False))
        macs = conv_macs(args[0], args[1], out, flag)
        bias = None if bias_at is None else arg(args, kwargs, bias_at, "bias")
        return Cost(flops=2 * macs + bias_flops(out, bias), macs=macs)

    rule.__name__ = rule.__qualname__ = name
    return rule


register_rule(*aten_packets(["convolution", "_convolution", "convolution_overrideable"]))(
    _conv_rule(None, "convolution")
)
# Backend kernels, by where their bias is: (input, weight, bias, padding, ...),
# (input, weight, kernel_size, bias, ...), or none.
register_rule(
    *aten_packets(
        [
            "mkldnn_convolution",
            "miopen_convolution",
            "miopen_depthwise_convolution",
            "_mps_convolution",
            "_nnpack_spatial_convolution",
        ]
    )
)(_conv_rule(False, "convolution_forward"))
register_rule(
    *aten_packets(
        [
            "_slow_conv2d_forward",
            "slow_conv3d_forward",
            "slow_conv_dilated2d",
            "slow_conv_dilated3d",
            "_conv_depthwise2d",
            "conv_depthwise3d",
        ]
    )
)(_conv_rule(False, "convolution_forward_bias_3", bias_at=3))
register_rule(aten.cudnn_convolution)(_conv_rule(False, "convolution_forward_no_bias", bias_at=None))
register_rule(*aten_packets(["miopen_convolution_transpose"]))(_conv_rule(True, "convolution_transposed"))
register_rule(*aten_packets(["slow_conv_transpose2d", "slow_conv_transpose3d"]))(
    _conv_rule(True, "convolution_transposed_bias_3", bias_at=3)
)
register_rule(*aten_packets(["cudnn_convolution_transpose", "_mps_convolution_transpose"]))(
    _conv_rule(True, "convolution_transposed_no_bias", bias_at=None)
)


def _conv_backward_cost(grad_out, x, weight, transposed: bool, mask) -> Cost:
    # grad_input is a transposed convolution of grad_out with the weight, grad_weight a
    # convolution of the input with grad_out: each has exactly the forward's MACs;
    # grad_bias sums grad_out (1 flop per element, no MAC).
    per_element = numel(weight.shape[1:])
    forward = (x.numel() if transposed else grad_out.numel()) * per_element
    macs = forward * (bool(mask[0]) + bool(mask[1]))
    grad_bias = float_numel(grad_out) if len(mask) > 2 and mask[2] else 0
    return Cost(flops=2 * macs + grad_bias, macs=macs)


@register_rule(aten.convolution_backward)
def convolution_backward(args, kwargs, out):
    """Backward of ``aten.convolution``: one forward's MACs per gradient requested
    (input, weight), and the sum that is the bias gradient."""
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
