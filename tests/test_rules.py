"""Tests of the aten cost rules: formulas, FlopCounterMode cross-checks, the registry."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry, sdpa_backward_flop_count, sdpa_flop_count

import fxinspect
from fxinspect.rules import (
    FREE,
    Cost,
    FreeReason,
    elementwise,
    free,
    free_reason,
    lookup,
    losses,
    movement,
    pooling,
    quantized,
    reduction,
    register_free,
    register_rule,
    registered_ops,
)
from fxinspect.rules._util import missing_names

aten = torch.ops.aten


class CostMode(TorchDispatchMode):
    """Runs every aten call and adds up what our rules say it costs."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[torch._ops.OpOverload, Cost]] = []
        self.uncounted: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        rule = lookup(func)
        if rule is None:
            self.uncounted.add(str(func))
        else:
            self.calls.append((func, rule(args, kwargs, out)))
        return out

    @property
    def flops(self) -> int:
        return sum(cost.flops for _, cost in self.calls)

    @property
    def macs(self) -> int:
        return sum(cost.macs for _, cost in self.calls)

    def flops_known_to_flop_counter(self) -> int:
        return sum(cost.flops for func, cost in self.calls if func.overloadpacket in flop_registry)

    def macs_known_to_flop_counter(self) -> int:
        return sum(cost.macs for func, cost in self.calls if func.overloadpacket in flop_registry)


def measure(run, *inputs) -> CostMode:
    """Our costs of ``run(*inputs)``; inputs are made outside so their factories don't count."""
    with CostMode() as mode:
        run(*inputs)
    return mode


def both(run, *inputs) -> tuple[CostMode, int]:
    """Our costs and FlopCounterMode's total for the same calls."""
    with FlopCounterMode(display=False) as reference:
        mode = measure(run, *inputs)
    return mode, reference.get_total_flops()


r = torch.randn  # short, for the tables below


# -- matmul-like ops equal FlopCounterMode --------------------------------------------

MATMUL_CASES = {
    # id: (inputs, run, 2 * MACs = FlopCounterMode's flops, bias flops: 1 per output element)
    "mm": (lambda: (r(8, 16), r(16, 4)), torch.mm, 2 * 8 * 16 * 4, 0),  # 1024
    "addmm": (lambda: (r(4), r(8, 16), r(16, 4)), torch.addmm, 2 * 8 * 16 * 4, 8 * 4),  # 1024 + 32
    "addmm_beta_0": (lambda: (r(4), r(8, 16), r(16, 4)), lambda c, a, b: torch.addmm(c, a, b, beta=0), 1024, 0),
    "bmm": (lambda: (r(3, 8, 16), r(3, 16, 4)), torch.bmm, 2 * 3 * 8 * 16 * 4, 0),  # 3072
    "baddbmm": (lambda: (r(3, 8, 4), r(3, 8, 16), r(3, 16, 4)), torch.baddbmm, 2 * 3 * 8 * 16 * 4, 3 * 8 * 4),  # +96
    "linear_3d": (lambda: (r(2, 5, 16), r(4, 16), r(4)), F.linear, 2 * 10 * 16 * 4, 10 * 4),  # 1280 + 40
    "matmul_4d": (lambda: (r(2, 3, 5, 8), r(2, 3, 8, 7)), torch.matmul, 2 * 6 * 5 * 8 * 7, 0),  # 3360
}


@pytest.mark.parametrize("make, run, expected, bias", MATMUL_CASES.values(), ids=MATMUL_CASES.keys())
def test_matmul_equals_flop_counter(make, run, expected, bias):
    mode, reference = both(run, *make())
    assert 2 * mode.macs_known_to_flop_counter() == reference == expected
    assert mode.macs * 2 == expected
    assert mode.flops == expected + bias  # FlopCounterMode leaves the bias add out


# The add of ``self`` into addmv/addbmm/addr: 1 flop per output element.
ACCUMULATED = {"addmv": 8, "addbmm": 8 * 4, "addr": 8 * 4}
MATMUL_UNKNOWN_TO_FLOP_COUNTER = {
    # id: (inputs, run, expected macs)
    "mv": (lambda: (r(8, 16), r(16)), torch.mv, 8 * 16),  # 128
    "addmv": (lambda: (r(8), r(8, 16), r(16)), torch.addmv, 8 * 16),  # 128 (+ 8 flops: the add)
    "dot": (lambda: (r(16), r(16)), torch.dot, 16),
    "addbmm": (lambda: (r(8, 4), r(3, 8, 16), r(3, 16, 4)), torch.addbmm, 3 * 8 * 16 * 4),  # 1536 (+ 32)
    "addr": (lambda: (r(8, 4), r(8), r(4)), torch.addr, 8 * 4),  # outer product: 32 (+ 32)
    # experts: 6 tokens split 2 + 4 over 2 experts of 8 -> 4 weights: 6 * 8 * 4
    "grouped_mm": (
        lambda: (r(6, 8), r(2, 8, 4), torch.tensor([2, 6], dtype=torch.int32)),
        lambda a, b, offs: aten._grouped_mm(a, b, offs),
        6 * 8 * 4,  # 192
    ),
    "bilinear": (lambda: (r(3, 4), r(3, 5), r(6, 4, 5)), F.bilinear, 3 * 6 * 4 * 5),  # 360
}


@pytest.mark.parametrize(
    "make, run, expected", MATMUL_UNKNOWN_TO_FLOP_COUNTER.values(), ids=MATMUL_UNKNOWN_TO_FLOP_COUNTER.keys()
)
def test_other_matmuls(request, make, run, expected):
    mode = measure(run, *make())
    assert mode.macs == expected
    assert mode.flops == 2 * expected + ACCUMULATED.get(request.node.callspec.id, 0)


# -- grouped matmul (mixture-of-experts): what the offsets say each group multiplies ------


def offsets(*ends):
    return torch.tensor(ends, dtype=torch.int32)


GROUPED_MM = {
    # id: (a, b, offs, expected macs); a group of size 0 multiplies nothing
    # experts' forward: 6 tokens split 2 + 4 over 2 experts of 8 -> 4 weights: (2 + 4) * 8 * 4
    "rows": (r(6, 8), r(2, 8, 4), offsets(2, 6), 6 * 8 * 4),  # 192
    # rows 5..7 lie past offs[-1]: in no group, not multiplied: (2 + 3) * 8 * 4
    "rows_past_the_last_offset": (r(8, 8), r(2, 8, 4), offsets(2, 5), 5 * 8 * 4),  # 160, not 8 * 8 * 4
    # 4 experts, two of them given no token: (0 + 3 + 0 + 3) * 8 * 4
    "rows_empty_experts": (r(6, 8), r(4, 8, 4), offsets(0, 3, 3, 6), 6 * 8 * 4),  # 192
    # columns of b split (3-D x 2-D): 2 groups of (4, 8) @ (8, n_g), n = 2 + 3 of 8 columns
    "columns": (r(2, 4, 8), r(8, 8), offsets(2, 5), 4 * 8 * 5),  # 160
    # contraction split (2-D x 2-D, weight gradients): (4, k_g) @ (k_g, 4), k = 3 + 3 of 8
    "depth": (r(4, 8), r(8, 4), offsets(3, 6), 4 * 6 * 4),  # 96
    # 3-D x 3-D: no offsets, a batched product: 2 * 4 * 8 * 4
    "batched": (r(2, 4, 8), r(2, 8, 4), None, 2 * 4 * 8 * 4),  # 256
}


@pytest.mark.parametrize("a, b, offs, expected", GROUPED_MM.values(), ids=GROUPED_MM.keys())
def test_grouped_mm_counts_the_groups_offsets_delimit(a, b, offs, expected):
    mode = measure(lambda: aten._grouped_mm(a, b, offs))
    assert mode.uncounted == set()
    assert (mode.macs, mode.flops) == (expected, 2 * expected)


def test_grouped_mm_backward_is_two_forwards():
    a, b, offs = r(8, 8, requires_grad=True), r(2, 8, 4, requires_grad=True), offsets(2, 5)
    out = F.grouped_mm(a, b, offs=offs)
    # grad_a: rows as the forward; grad_b: a^T @ grad, the contraction split: 8 * 5 * 4 each
    assert measure(lambda: out.backward(torch.randn(8, 4))).macs == 2 * 5 * 8 * 4  # 320


def test_grouped_mm_without_offset_values_raises_so_it_is_uncounted():
    from fxinspect.rules.matmul import grouped_mm

    bf16 = dict(device="meta", dtype=torch.bfloat16)
    a, b, offs = (
        torch.empty(6, 8, **bf16),
        torch.empty(2, 8, 8, **bf16),
        torch.empty(2, device="meta", dtype=torch.int32),
    )
    with pytest.raises(ValueError, match="meta/fake"):
        grouped_mm((a, b, offs), {}, aten._grouped_mm(a, b, offs))


def test_grouped_mm_with_decreasing_offsets_raises():
    from fxinspect.rules.matmul import grouped_mm_macs

    with pytest.raises(ValueError, match="must not decrease"):
        grouped_mm_macs(r(6, 8), r(2, 8, 4), offsets(4, 2))


@pytest.mark.parametrize("case", ["rows", "rows_past_the_last_offset", "rows_empty_experts"])
def test_transformers_grouped_mm_fallback_counts_as_grouped_mm(case):
    pytest.importorskip("transformers.integrations.moe")  # defines torch.ops.transformers.*
    from fxinspect.rules.hf import register_transformers_rules

    assert register_transformers_rules()  # idempotent: the loader or the import did it already
    a, b, offs, expected = GROUPED_MM[case]
    ops = torch.ops.transformers
    mode = measure(lambda: ops.grouped_mm_fallback(a, b, offs=offs))
    assert mode.uncounted == set()
    assert mode.macs == expected
    grad = torch.randn(a.shape[0], b.shape[2])
    # grad_input and grad_weight, one forward each
    assert measure(lambda: ops.grouped_mm_fallback_backward(a, b, offs, grad)).macs == 2 * expected


# (dims, c_in, c_out, kernel, stride, padding, dilation, groups, transposed, output_padding)
CONV_CASES = {
    "1d": (1, 4, 8, 3, 1, 0, 1, 1, False, 0),
    "2d_stride_pad": (2, 3, 8, 3, 2, 1, 1, 1, False, 0),
    "2d_dilation": (2, 4, 6, 3, 1, 2, 2, 1, False, 0),
    "2d_groups": (2, 4, 8, 3, 1, 1, 1, 2, False, 0),
    "2d_depthwise": (2, 4, 4, 3, 1, 1, 1, 4, False, 0),
    "3d": (3, 2, 4, 3, 1, 1, 1, 1, False, 0),
    "transposed_1d_stride": (1, 4, 6, 3, 2, 0, 1, 1, True, 1),
    "transposed_2d_groups": (2, 4, 8, 3, 2, 1, 1, 2, True, 1),
    "transposed_3d_dilation": (3, 2, 4, 2, 1, 0, 2, 1, True, 0),
}


def conv_inputs(dims, c_in, c_out, kernel, stride, padding, dilation, groups, transposed, output_padding, grad=False):
    """Arguments of ``torch.convolution`` for a batch of 2 inputs of side 7."""
    x = torch.randn(2, c_in, *[7] * dims, requires_grad=grad)
    shape = (c_in, c_out // groups) if transposed else (c_out, c_in // groups)
    w = torch.randn(*shape, *[kernel] * dims, requires_grad=grad)
    b = torch.randn(c_out, requires_grad=grad)
    return (x, w, b, [stride] * dims, [padding] * dims, [dilation] * dims, transposed, [output_padding] * dims, groups)


@pytest.mark.parametrize("case", CONV_CASES.values(), ids=CONV_CASES.keys())
def test_convolution_equals_flop_counter(case):
    inputs = conv_inputs(*case)
    mode, reference = both(torch.convolution, *inputs)
    assert 2 * mode.macs_known_to_flop_counter() == reference > 0
    out = torch.convolution(*inputs)
    assert mode.flops == 2 * mode.macs + out.numel()  # the bias add: 1 flop per output element


@pytest.mark.parametrize("case", CONV_CASES.values(), ids=CONV_CASES.keys())
def test_convolution_backward(case):
    groups = case[7]
    inputs = conv_inputs(*case, grad=True)
    forward = measure(torch.convolution, *inputs).macs
    out = torch.convolution(*inputs)
    mode, reference = both(lambda: out.sum().backward())
    backward = [cost for func, cost in mode.calls if func.overloadpacket is aten.convolution_backward]
    assert len(backward) == 1
    assert backward[0].macs == 2 * forward  # grad_input and grad_weight: one forward each
    # FlopCounterMode counts grad_weight with all C_in instead of C_in / groups;
    # grad_bias sums grad_output: 1 flop per output element, which it leaves out.
    assert 2 * backward[0].macs == reference - 2 * forward * (groups - 1)
    assert backward[0].flops == 2 * backward[0].macs + out.numel()


def test_conv_backward_honours_output_mask():
    x, w = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3, requires_grad=True)
    out = F.conv2d(x, w)  # x needs no gradient: only grad_weight is computed
    mode = measure(lambda: out.sum().backward())
    (cost,) = [c for f, c in mode.calls if f.overloadpacket is aten.convolution_backward]
    assert cost.macs == 1 * 4 * 6 * 6 * 3 * 3 * 3  # out elements * C_in * k * k = 3888


# -- attention ----------------------------------------------------------------------


def meta(*shape):
    return torch.empty(*shape, device="meta")


Q, K, V, V_WIDE = (2, 4, 6, 8), (2, 4, 5, 8), (2, 4, 5, 8), (2, 4, 5, 16)


def _bshd(shape):
    return meta(*shape).transpose(1, 2)


# id: (run, value shape, whether FlopCounterMode reads the layout right)
def qkv(v_shape=V):
    return meta(*Q), meta(*K), meta(*v_shape)


ATTENTION_FORWARD = {
    "flash": (lambda: aten._scaled_dot_product_flash_attention(*qkv()), V, True),
    "efficient": (lambda: aten._scaled_dot_product_efficient_attention(*qkv(V_WIDE), None, True), V_WIDE, True),
    "cudnn": (lambda: aten._scaled_dot_product_cudnn_attention(*qkv(V_WIDE), None, True), V_WIDE, True),
    "cpu": (lambda: aten._scaled_dot_product_flash_attention_for_cpu(*qkv()), V, False),  # unknown to it
    "_flash_attention_forward": (
        lambda: aten._flash_attention_forward(_bshd(Q), _bshd(K), _bshd(V), None, None, 6, 5, 0.0, False, False),
        V,
        True,
    ),
    # nested batch: 2 sequences (cu_seqlens of 3) of at most 6 queries and 5 keys; an
    # upper bound from shapes, as FlopCounterMode's for tensors without data
    "_flash_attention_forward_varlen": (
        lambda: aten._flash_attention_forward(
            meta(10, 4, 8), meta(9, 4, 8), meta(9, 4, 8), meta(3).int(), meta(3).int(), 6, 5, 0.0, False, False
        ),
        V,
        True,
    ),
    # FlopCounterMode takes this kernel's (b, s, h, d) tensors for (b, h, s, d).
    "_efficient_attention_forward": (
        lambda: aten._efficient_attention_forward(
            _bshd(Q), _bshd(K), _bshd(V_WIDE), None, None, None, 6, 5, 0.0, 0, True
        ),
        V_WIDE,
        False,
    ),
}


@pytest.mark.parametrize("run, v_shape, upstream_agrees", ATTENTION_FORWARD.values(), ids=ATTENTION_FORWARD.keys())
def test_attention_kernels_match_flop_counter_formula(run, v_shape, upstream_agrees):
    mode, reference = both(run) if upstream_agrees else (measure(run), None)
    # 2 * b * h * s_q * s_k * (d + d_v) = 2 * 2*4*6*5 * (8 + 8) = 7680 or (8 + 16): 11520
    assert mode.flops == 2 * mode.macs == sdpa_flop_count(Q, K, v_shape)
    if upstream_agrees:
        assert mode.flops == reference


def _efficient_backward():
    q, k, v = meta(*Q), meta(*K), meta(*V_WIDE)
    out, lse, seed, offset = aten._scaled_dot_product_efficient_attention(q, k, v, None, True)
    args = (meta(2, 4, 6, 16), q, k, v, None, out, lse, seed, offset, 0.0, [True] * 3 + [False])
    return aten._scaled_dot_product_efficient_attention_backward, args


def _flash_backward():
    q, k, v = _bshd(Q), _bshd(K), _bshd(V)
    out, lse, rng, unused, _ = aten._flash_attention_forward(q, k, v, None, None, 6, 5, 0.0, False, False)
    args = (_bshd((2, 4, 6, 8)), q, k, v, out, lse, None, None, 6, 5, 0.0, False, rng, unused)
    return aten._flash_attention_backward, args


def _efficient_kernel_backward():
    q, k, v = _bshd(Q), _bshd(K), _bshd(V_WIDE)
    out, lse, seed, offset, _, _ = aten._efficient_attention_forward(q, k, v, None, None, None, 6, 5, 0.0, 0, True)
    args = (_bshd((2, 4, 6, 16)), q, k, v, None, out, None, None, 6, 5, lse, 0.0, seed, offset, 0, False)
    return aten._efficient_attention_backward, args


def _cpu_backward():
    q, k, v = meta(*Q), meta(*K), meta(*V)
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
    return aten._scaled_dot_product_flash_attention_for_cpu_backward, (meta(*Q), q, k, v, out, lse, 0.0, False)


@pytest.mark.parametrize(
    "make, v_shape, upstream_agrees",
    [
        (_efficient_backward, V_WIDE, True),
        (_flash_backward, V, True),
        (_efficient_kernel_backward, V_WIDE, False),  # FlopCounterMode misreads its layout
        (_cpu_backward, V, False),  # unknown to FlopCounterMode
    ],
    ids=["efficient", "_flash_attention_backward", "_efficient_attention_backward", "cpu"],
)
def test_attention_backward_kernels_match_flop_counter_formula(make, v_shape, upstream_agrees):
    op, args = make()
    mode, reference = both(op, *args) if upstream_agrees else (measure(op, *args), None)
    # 2 * b*h*s_q*s_k * (3d + 2d_v) = 2 * 240 * (24 + 32) = 26880, or (24 + 16): 19200
    assert mode.flops == sdpa_backward_flop_count(Q[:3] + v_shape[3:], Q, K, v_shape)
    if upstream_agrees:
        assert mode.flops == reference


@pytest.mark.parametrize(
    "q_shape, k_shape, v_shape, gqa",
    [
        ((2, 4, 6, 8), (2, 4, 5, 8), (2, 4, 5, 8), False),
        ((2, 8, 6, 8), (2, 2, 6, 8), (2, 2, 6, 8), True),  # grouped-query: 8 q heads, 2 kv heads
    ],
)
def test_cpu_sdpa_matches_flop_counter_formulas(q_shape, k_shape, v_shape, gqa):
    q, k, v = (torch.randn(*s, requires_grad=True) for s in (q_shape, k_shape, v_shape))
    forward = measure(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa))
    assert 2 * forward.macs == sdpa_flop_count(q_shape, k_shape, v_shape)
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
    backward = measure(lambda: out.sum().backward())
    assert 2 * backward.macs == sdpa_backward_flop_count(out.shape, q_shape, k_shape, v_shape)


def test_math_sdpa_counts_its_bmms():
    # d_v != d_qk: CPU falls back to the math path, bmm + softmax + bmm, and its backward
    # is four bmms (no recomputation of the scores, unlike the fused kernels).
    q, k, v = torch.randn(1, 2, 7, 8, requires_grad=True), torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 16)
    forward = measure(lambda: F.scaled_dot_product_attention(q, k, v))
    assert forward.macs == 1 * 2 * 7 * 3 * (8 + 16)  # b*h*s_q*s_k*(d + d_v) = 1008
    out = F.scaled_dot_product_attention(q, k, v)
    backward = measure(lambda: out.sum().backward())
    assert backward.macs == 1 * 2 * 7 * 3 * (8 + 16)  # dS = dO V^T and dQ = dS K: 1008 (k, v need no grad)


def test_gqa_counts_query_heads():
    q, k, v = torch.randn(1, 8, 4, 16), torch.randn(1, 2, 4, 16), torch.randn(1, 2, 4, 16)
    mode = measure(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    assert mode.macs == 1 * 8 * 4 * 4 * (16 + 16)  # b * h_q * s_q * s_k * (d + d_v) = 4096


def test_multihead_attention_fast_path_equals_slow_path():
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        fast = measure(lambda: mha(x, x, x, need_weights=False))
    slow = measure(lambda: mha(x, x, x, need_weights=False))
    assert any(f.overloadpacket is aten._native_multi_head_attention for f, _ in fast.calls)
    # 4 projections: 4 * 10 tokens * 16 * 16; attention: 10 * 5 keys * 2 * 16
    assert fast.macs == slow.macs == 4 * 10 * 16 * 16 + 10 * 5 * 2 * 16  # 11840


def test_transformer_encoder_layer_fast_path_equals_slow_path():
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        fast = measure(layer, x)
    slow = measure(layer, x)
    assert [str(f) for f, _ in fast.calls] == ["aten._transformer_encoder_layer_fwd.default"]
    assert fast.macs == slow.macs == 11840 + 10 * 2 * 16 * 32  # attention + ffn = 22080
    # Both count every bias add (1 flop per output element of the q/k/v, output and
    # feed-forward projections): the same flops.
    assert slow.flops == fast.flops


def test_vit_b_16_matches_torchvision_published_gmacs():
    torchvision = pytest.importorskip("torchvision")
    from torch._subclasses.fake_tensor import FakeTensorMode

    with torch.device("meta"):
        model = torchvision.models.vit_b_16().eval()
    model = model.to_empty(device="cpu")  # uninitialised: only shapes matter under fake mode
    with FakeTensorMode(allow_non_fake_inputs=True), torch.no_grad():
        mode = measure(model, torch.empty(1, 3, 224, 224))
    assert mode.uncounted == set()
    assert any(f.overloadpacket is aten._native_multi_head_attention for f, _ in mode.calls)
    assert round(mode.macs / 1e9, 2) == 17.56  # torchvision's published GFLOPS (which are MACs)


# -- fused recurrent layers equal their decomposition ----------------------------------


@pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN")
@pytest.mark.parametrize("cell", ["LSTM", "GRU", "RNN"])
def test_recurrent_fused_equals_decomposed(cell):
    rnn = getattr(torch.nn, cell)(8, 16, 2, bidirectional=True)
    x = torch.randn(5, 3, 8)
    with torch.no_grad():
        fused = measure(rnn, x)
        with torch.backends.mkldnn.flags(enabled=False):
            decomposed = measure(rnn, x)
    assert (fused.flops, fused.macs) == (decomposed.flops, decomposed.macs)
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[cell]
    # 2 directions; layer 1 reads 8 features, layer 2 reads 2 * 16; hidden 16.
    assert fused.macs == 2 * 15 * gates * 16 * (8 + 16) + 2 * 15 * gates * 16 * (32 + 16)


# -- per-element families ----------------------------------------------------------------

x24 = lambda: (r(2, 4),)  # noqa: E731
PER_ELEMENT_CASES = {
    # id: (inputs, run, expected flops)
    "add_broadcast": (lambda: (r(2, 3), r(3)), torch.add, 2 * 3),  # output elements: 6
    "add_inplace": (lambda: (r(2, 3), r(3)), lambda a, b: a.add_(b), 6),
    "add_out": (lambda: (r(2, 3), r(2, 3), torch.empty(2, 3)), lambda a, b, o: torch.add(a, b, out=o), 6),
    "integer_add": (lambda: (torch.ones(2, 3, dtype=torch.long),), lambda a: a + a, 0),  # not floating point
    "compare": (lambda: (r(2, 3),), lambda a: a > 0, 0),  # bool result
    "gelu": (x24, F.gelu, 8),  # 1 * 8
    "addcmul": (lambda: (r(2, 4), r(2, 4), r(2, 4)), torch.addcmul, 2 * 8),  # 16
    "lerp": (lambda: (r(2, 4), r(2, 4)), lambda a, b: torch.lerp(a, b, 0.5), 3 * 8),  # 24
    "where": (lambda: (r(2, 4) > 0, r(2, 4), r(2, 4)), torch.where, 0),  # a selection
    "max_binary": (lambda: (r(2, 4), r(4)), torch.max, 8),  # pointwise overload: output elements
    "softmax": (x24, lambda a: a.softmax(-1), 5 * 8),  # 40
    "log_softmax": (x24, lambda a: a.log_softmax(-1), 5 * 8),  # 40
    "sum": (lambda: (r(4, 5),), torch.sum, 20),  # per input element: 20
    "max_dim": (lambda: (r(4, 5),), lambda a: a.max(1), 20),
    "var": (lambda: (r(4, 5),), lambda a: a.var(1), 4 * 20),  # 80
    "argmax": (lambda: (r(4, 5),), torch.argmax, 0),  # integer result
    "norm": (lambda: (r(4, 5),), torch.linalg.vector_norm, 2 * 20),  # 40
    "mse_loss": (lambda: (r(4, 5), r(4, 5)), F.mse_loss, 3 * 20),  # 60
    "nll_loss": (lambda: (r(4, 5), torch.tensor([0, 1, 2, 3])), F.nll_loss, 4),  # one per target
    "batch_norm_train": (
        lambda: (r(2, 3, 4, 4), None, None, torch.ones(3), torch.zeros(3)),
        lambda x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b, training=True),
        96 * (3 + 2 + 2),  # stats + normalise + affine per element: 672
    ),
    "batch_norm_eval": (
        lambda: (r(2, 3, 4, 4), torch.zeros(3), torch.ones(3), torch.ones(3), torch.zeros(3)),
        lambda x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b, training=False),
        96 * (2 + 2),  # statistics given: 384
    ),
    "layer_norm": (
        lambda: (r(2, 8), torch.ones(8), torch.zeros(8)),
        lambda x, w, b: F.layer_norm(x, [8], w, b),
        16 * 7,  # stats 3 + normalise 2 + weight 1 + bias 1: 112
    ),
    "layer_norm_no_affine": (x24, lambda x: F.layer_norm(x, (4,)), 8 * 5),  # 40
    "group_norm": (lambda: (r(2, 4, 3),), lambda x: F.group_norm(x, 2), 24 * 5),  # 120
    "max_pool2d": (lambda: (r(1, 1, 4, 4),), lambda x: F.max_pool2d(x, 2), 4 * 2 * 2),  # 4 outputs * window 4
    "max_pool1d": (lambda: (r(1, 2, 8),), lambda x: F.max_pool1d(x, 2), 8 * 2),  # 8 outputs * window 2
    "avg_pool3d": (lambda: (r(1, 1, 4, 4, 4),), lambda x: F.avg_pool3d(x, 2), 8 * 8),  # 8 outputs * 8
    # windows of 5 -> 3: [0, 2), [1, 4), [3, 5): 2 + 3 + 2 = 7 per dim; 2 channels
    "adaptive_avg_pool2d": (lambda: (r(1, 2, 5, 5),), lambda x: F.adaptive_avg_pool2d(x, 3), 2 * 7 * 7),  # 98
    "adaptive_avg_pool_global": (lambda: (r(2, 3, 4, 4),), lambda x: F.adaptive_avg_pool2d(x, 1), 96),
    "upsample_nearest": (lambda: (r(1, 2, 3, 3),), lambda x: F.interpolate(x, scale_factor=2), 0),
    "upsample_bilinear": (lambda: (r(1, 2, 3, 3),), lambda x: F.interpolate(x, None, 2, "bilinear"), 72 * 7),  # 504
    # bilinear: 2 channels * 9 samples * 7 = 126
    "grid_sample": (lambda: (r(1, 2, 4, 4), r(1, 3, 3, 2)), lambda x, g: F.grid_sample(x, g, align_corners=False), 126),
    "rfft": (lambda: (r(4, 8),), torch.fft.rfft, 240),  # 2.5 * 32 real elements * log2(8)
    "fft2": (lambda: (torch.randn(4, 8, dtype=torch.complex64),), torch.fft.fft2, 800),  # 5 * 32 * log2(32)
    "native_dropout": (lambda: (r(4, 5),), lambda x: aten.native_dropout(x, 0.5, True), 20),  # the multiply
    "dropout_cpu": (lambda: (r(4, 5),), lambda x: F.dropout(x, 0.5, training=True), 20),  # x * mask; mask.div_ free
    "cat": (lambda: (r(2, 3), r(2, 3)), lambda a, b: torch.cat([a, b]), 0),
    "embedding": (lambda: (torch.tensor([1, 2]), r(10, 4)), F.embedding, 0),
}


@pytest.mark.parametrize("make, run, expected", PER_ELEMENT_CASES.values(), ids=PER_ELEMENT_CASES.keys())
def test_per_element_costs(make, run, expected):
    mode = measure(run, *make())
    assert mode.uncounted == set()
    assert mode.flops == expected
    assert mode.macs == 0


def test_rules_read_only_shapes_meta_tensors():
    mode = measure(lambda x, w: F.gelu(F.conv2d(x, w)), meta(1, 3, 8, 8), meta(4, 3, 3, 3))
    assert mode.macs == 4 * 6 * 6 * 3 * 3 * 3  # 3888
    assert mode.flops == 2 * 3888 + 4 * 6 * 6  # + gelu per output element: 7920


# -- bytes ---------------------------------------------------------------------------


def single(run, *inputs) -> Cost:
    (call,) = [c for c in measure(run, *inputs).calls]
    return call[1]


def test_embedding_reads_rows_not_table():
    indices, table = torch.tensor([[1, 2, 3]]), torch.randn(1000, 4)
    cost = single(F.embedding, indices, table)
    assert cost.bytes_read == 3 * 8 + 3 * 4 * 4  # int64 indices + 3 rows of 4 floats = 72


def test_index_select_reads_indices_and_result():
    cost = single(torch.index_select, torch.randn(100, 4), 0, torch.tensor([5, 7]))
    assert cost.bytes_read == 2 * 8 + 2 * 4 * 4  # 48


def test_factories_read_nothing_and_copy_reads_source():
    assert single(lambda: torch.zeros(3, 4)).bytes_read == 0
    assert single(torch.zeros_like, torch.randn(3, 4)).bytes_read == 0
    cost = single(lambda a, b: a.copy_(b), torch.empty(3, 4), torch.randn(3, 4, dtype=torch.float64))
    assert (cost.bytes_read, cost.bytes_written) == (3 * 4 * 8, 3 * 4 * 4)  # float64 in, float32 out


def test_default_bytes_are_left_to_the_caller():
    assert single(torch.cat, [torch.randn(2), torch.randn(2)]) == Cost()


@pytest.mark.parametrize(
    "run",
    [lambda x: x.view(4), lambda x: x.t(), lambda x: x.expand(3, 2, 2), torch.empty_like],
    ids=["view", "t", "expand", "empty_like"],
)
def test_views_and_allocations_are_free(run):
    mode = measure(run, torch.randn(2, 2))
    assert mode.calls and all(lookup(f) is FREE for f, _ in mode.calls)
    assert all(cost == Cost(0, 0, 0, 0) for _, cost in mode.calls)


# -- coverage ------------------------------------------------------------------------


def _names(table: dict) -> list[str]:
    return [name for names in table.values() for name in names]


@pytest.mark.parametrize(
    "names",
    [
        _names(elementwise.PER_OUTPUT_ELEMENT),
        _names(reduction.PER_INPUT_ELEMENT),
        _names(losses.FORWARD) + _names(losses.BACKWARD),
        _names(pooling.WINDOWED)
        + _names(pooling.WINDOWED_BACKWARD)
        + _names(pooling.ADAPTIVE)
        + _names(pooling.ADAPTIVE_BACKWARD)
        + list(pooling.SCATTER_BACKWARD)
        + list(pooling.NEIGHBOURS),
        list(movement.MOVES) + list(movement.GATHERS) + list(movement.FACTORIES),
        _names(free.FREE_OPS),
        list(quantized.PACKED_WEIGHT_MATMULS),
    ],
    ids=["elementwise", "reduction", "losses", "pooling", "movement", "free", "quantized"],
)
def test_every_listed_name_is_an_aten_op(names):
    assert missing_names(names) == []


def test_packed_int8_weight_matmul_counts_the_dense_product():
    class Int8Linear(torch.nn.Module):  # what a weight-only int8 linear calls on CPU
        def __init__(self):
            super().__init__()
            self.register_buffer("weight", torch.randint(-128, 127, (32, 64), dtype=torch.int8))
            self.register_buffer("scales", torch.rand(32))

        def forward(self, x):
            return torch.ops.aten._weight_int8pack_mm(x, self.weight, self.scales)

    report = fxinspect.analyze(Int8Linear(), torch.randn(4, 64), timing=False)
    (call,) = [c for n in report.nodes for c in n.aten if c.op == "aten._weight_int8pack_mm.default"]
    assert report.uncounted == ()
    assert (call.macs, call.flops) == (4 * 64 * 32, 2 * 4 * 64 * 32)  # M * K * N = 8,192
    # reads x 4 * 64 * 4 B + the int8 weight 32 * 64 + 32 float scales; writes 4 * 32 floats
    assert (call.bytes_read, call.bytes_written) == (1024 + 2048 + 128, 512)


def test_small_convnet_and_transformer_training_step_is_fully_counted():
    torchvision = pytest.importorskip("torchvision")
    model = torchvision.models.mobilenet_v3_small(num_classes=10).train()
    encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 1)
    x, tokens = torch.randn(2, 3, 32, 32), torch.randn(2, 5, 16)

    def step():
        loss = F.cross_entropy(model(x), torch.tensor([1, 2])) + encoder(tokens).square().mean()
        loss.backward()

    mode = measure(step)
    assert mode.uncounted == set()
    assert mode.flops > 2 * mode.macs > 0


def test_torchvision_ops_are_counted():
    torchvision = pytest.importorskip("torchvision")
    from fxinspect.rules.vision import register_torchvision_rules

    assert register_torchvision_rules()  # idempotent: already done at import if loaded
    features, rois = torch.randn(1, 4, 8, 8), torch.tensor([[0.0, 0.0, 0.0, 4.0, 4.0], [0.0, 2.0, 2.0, 6.0, 6.0]])
    mode = measure(lambda: torchvision.ops.roi_align(features, rois, output_size=3, sampling_ratio=2))
    assert mode.uncounted == set()
    assert mode.flops == 2 * 4 * 3 * 3 * 4 * 8  # outputs * 2x2 samples * (bilinear 7 + average 1) = 2304
    boxes = torch.tensor([[0.0, 0.0, 2.0, 2.0], [0.0, 0.0, 2.0, 2.1]])
    assert measure(lambda: torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8]), 0.5)).flops == 0


def _torchvision(name, size=64, **kwargs):
    def make():
        torchvision = pytest.importorskip("torchvision")
        return torchvision.models.get_model(name, weights=None, **kwargs), (torch.randn(2, 3, size, size),)

    return make


def _timm(name, size=64):
    def make():
        timm = pytest.importorskip("timm")
        return timm.create_model(name, pretrained=False), (torch.randn(2, 3, size, size),)

    return make


def _hf(config_name, **config):
    def make():
        transformers = pytest.importorskip("transformers")
        model = transformers.AutoModel.from_config(getattr(transformers, config_name)(**config))
        return model, (torch.randint(0, 100, (2, 8)),)

    return make


TINY = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, vocab_size=100)
REAL_MODELS = {
    "resnet18": _torchvision("resnet18"),
    "mobilenet_v3_large": _torchvision("mobilenet_v3_large"),
    "vit_b_16": _torchvision("vit_b_16", size=32, image_size=32),
    "swin_t": _torchvision("swin_t"),
    "convnext_atto": _timm("convnext_atto"),
    "efficientnet_b0": _timm("efficientnet_b0"),
    "llama": _hf("LlamaConfig", **TINY, num_key_value_heads=2),
    "bert": _hf("BertConfig", **TINY),
}


@pytest.mark.slow
@pytest.mark.parametrize("make", REAL_MODELS.values(), ids=REAL_MODELS.keys())
def test_real_models_are_fully_counted(make):
    model, inputs = make()
    with torch.no_grad():
        inference = measure(model.eval(), *inputs)
    model.train()
    training = measure(lambda: sum(t.float().sum() for t in _float_leaves(model(*inputs))).backward())
    assert inference.uncounted == training.uncounted == set()
    assert 0 < 2 * inference.macs <= inference.flops


def _float_leaves(output):
    if hasattr(output, "to_tuple"):
        output = output.to_tuple()
    leaves = torch.utils._pytree.tree_leaves(output)
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]


# -- the registry --------------------------------------------------------------------


def test_duplicate_registration_raises():
    with pytest.raises(ValueError, match="already has the rule"):
        register_rule(aten.mm)(lambda args, kwargs, out: Cost())


def test_replace_overrides_and_restores():
    original = lookup(aten.mm.default)
    try:

        @register_rule(aten.mm, replace=True)
        def custom(args, kwargs, out):
            return Cost(flops=1)

        assert lookup(aten.mm.default) is custom
        assert measure(torch.mm, torch.randn(2, 2), torch.randn(2, 2)).flops == 1
    finally:
        register_rule(aten.mm, replace=True)(original)
    assert lookup(aten.mm.default) is original


def test_overload_rule_wins_over_packet():
    assert lookup(aten.max.other) is not lookup(aten.max.dim) is lookup(aten.max.default)


def test_unknown_op_is_uncounted():
    @torch.library.custom_op("fxinspect_test::double", mutates_args=())
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    assert lookup(torch.ops.fxinspect_test.double.default) is None
    assert measure(double, torch.randn(3)).uncounted == {"fxinspect_test.double.default"}


def test_register_rejects_non_ops():
    with pytest.raises(TypeError):
        register_rule("aten::mm")(lambda args, kwargs, out: Cost())


def _unregister(op):
    from fxinspect.rules import registry

    del registry._RULES[op]
    registry._FREE_REASONS.pop(op, None)


def test_register_free_marks_ops_free():
    op = torch.ops.aten.is_coalesced
    assert op not in registered_ops()
    try:
        register_free(op)
        assert lookup(op.default) is FREE
        assert free_reason(op.default) is FreeReason.USER  # the user-facing default
    finally:
        _unregister(op)


def test_register_free_records_its_reason():
    op = torch.ops.aten.is_coalesced
    try:
        register_free(op, reason=FreeReason.METADATA)
        assert free_reason(op.default) is FreeReason.METADATA
        register_rule(op, replace=True)(lambda args, kwargs, out: Cost())
        assert free_reason(op.default) is None  # counted now: no stale reason
    finally:
        _unregister(op)


_FREE_OPS = sorted((op for op, rule in registered_ops().items() if rule is FREE), key=str)


@pytest.mark.parametrize("op", _FREE_OPS, ids=str)
def test_every_free_op_has_its_own_reason(op):
    overload = op if isinstance(op, torch._ops.OpOverload) else getattr(op, op.overloads()[0])
    assert isinstance(free_reason(overload), FreeReason)
    assert free_reason(overload) is not FreeReason.USER  # ours always say why


def test_free_reasons_follow_the_tables():
    assert free_reason(aten.view.default) is FreeReason.VIEW
    assert free_reason(aten.sym_size.int) is FreeReason.METADATA
    assert free_reason(aten._assert_async.default) is FreeReason.CHECK
    assert free_reason(aten.empty_like.default) is FreeReason.ALLOCATION
    assert free_reason(aten.zeros.default) is None  # a fill writes memory: counted
    assert free_reason(aten.mm.default) is None


def test_register_free_rejects_a_second_registration():
    with pytest.raises(ValueError, match=r"aten\.view already has the rule FREE \(view\)"):
        register_free(aten.view, reason=FreeReason.VIEW)
    with pytest.raises(ValueError, match=r"aten\.mm already has the rule '"):
        register_free(aten.mm, reason=FreeReason.VIEW)
    assert free_reason(aten.view.default) is FreeReason.VIEW and lookup(aten.mm.default) is not FREE


@pytest.mark.parametrize("reason", ["view", None, 1])
def test_register_free_rejects_a_reason_that_is_not_a_free_reason(reason):
    op = torch.ops.aten.is_coalesced
    with pytest.raises(TypeError, match="reason= one of FreeReason.VIEW"):
        register_free(op, reason=reason)
    assert op not in registered_ops()


def test_register_rule_refuses_free():
    with pytest.raises(ValueError, match="use register_free"):
        register_rule(torch.ops.aten.is_coalesced)(FREE)


class LegitBatchNorm(torch.nn.Module):
    """Calls the batch norm overload whose schema declares its running-statistics writes."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(8))
        self.register_buffer("var", torch.ones(8))

    def forward(self, x):
        return torch.ops.aten._native_batch_norm_legit.default(x, None, None, self.mean, self.var, True, 0.1, 1e-5)[0]


@pytest.mark.parametrize(
    "make, op",
    [
        (lambda: torch.nn.BatchNorm2d(8, affine=False), "aten.native_batch_norm.default"),  # writes them undeclared
        (LegitBatchNorm, "aten._native_batch_norm_legit.default"),  # declares them: Tensor(a!) running_mean
    ],
)
def test_training_batch_norm_writes_its_running_statistics(make, op):
    x = torch.randn(2, 8, 4, 4)
    report = fxinspect.analyze(make().train(), x, timing=False)
    (call,) = [c for n in report.nodes for c in n.aten if c.op == op]
    # output 2*8*4*4 floats, saved mean and inverse std 8 each, running mean and var 8 each: 4 bytes per float
    assert call.bytes_written == 4 * (2 * 8 * 4 * 4 + 8 + 8) + 4 * (8 + 8)
    evaluated = fxinspect.analyze(torch.nn.BatchNorm2d(8, affine=False).eval(), x, timing=False)
    (call,) = [c for n in evaluated.nodes for c in n.aten if "batch_norm" in c.op]
    assert call.bytes_written == 4 * 2 * 8 * 4 * 4  # eval: the output only, no statistics written


class StaticCache(torch.nn.Module):
    """A static KV cache: buffers written in place (one from the input, one from nothing it
    makes), then read."""

    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.zeros(1, 2, 16, 4))
        self.register_buffer("pos", torch.zeros((), dtype=torch.long))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.k.index_copy_(2, self.pos + torch.arange(x.shape[2]), x)
        self.pos.add_(x.shape[2])
        self.calls.add_(1)
        return self.k.sum()


@pytest.mark.parametrize("method", ["auto", "symbolic", "export", "eager"])
def test_writes_into_buffers_and_reads_after_them_are_counted_by_every_capture(method):
    model = StaticCache()
    report = fxinspect.analyze(model, torch.randn(1, 2, 2, 4), method=method, timing=False)
    written = {}
    for call in (c for n in report.nodes for c in n.aten):
        written[call.op] = written.get(call.op, 0) + call.bytes_written
    assert written == {
        "aten.arange.default": 2 * 8,  # the two positions, int64
        "aten.add.Tensor": 2 * 8,  # pos + them
        "aten.index_copy_.default": 1 * 2 * 2 * 4 * 4,  # the two positions written in place: x's bytes, not the cache's
        "aten.add_.Tensor": 8 + 8,  # pos += 2 and calls += 1: one int64 each
        "aten.sum.default": 4,  # the cache read after the write
    }
    assert report.totals.flops == 1 * 2 * 16 * 4  # the sum: one add per element of the cache
    assert int(model.pos) == int(model.calls) == 0 and not model.k.any()  # the model is left as it was


def _cost_of(fn, *args):
    mode = CostMode()
    with mode:
        fn(*args)
    return mode


_ROWS, _PAIRS = torch.tensor([3, 1]), torch.tensor([[0, 5]] * 4)  # int64: 2 * 8 B and 8 * 8 B


@pytest.mark.parametrize(
    "write, read, written",
    [
        # a (4, 6) float32 tensor; 2 rows are 2 * 6 floats = 48 B, 8 positions 32 B
        (lambda t: t.index_copy_(0, _ROWS, torch.ones(2, 6)), 16 + 48, 48),
        (lambda t: t.index_add_(0, _ROWS, torch.ones(2, 6)), 16 + 48 + 48, 48),  # + the rows added to
        (lambda t: t.index_fill_(1, _ROWS, 0.5), 16, 2 * 4 * 4),  # 2 columns of 4
        (lambda t: t.scatter_(1, _PAIRS, torch.ones(4, 6)), 64 + 32, 32),  # src: the 8 elements used
        (lambda t: t.scatter_(1, _PAIRS, 2.0), 64, 32),
        (lambda t: t.scatter_(1, _PAIRS, torch.ones(4, 6), reduce="add"), 64 + 32 + 32, 32),
        (lambda t: t.scatter_add_(1, _PAIRS, torch.ones(4, 6)), 64 + 32 + 32, 32),
        (lambda t: t.scatter_reduce_(1, _PAIRS, torch.ones(4, 6), "amax", include_self=False), 64 + 32, 32),
        (lambda t: t.index_put_((_ROWS,), torch.ones(6)), 16 + 24, 48),  # t[rows] = v: 2 whole rows
        (lambda t: t.index_put_((_ROWS, _ROWS), torch.ones(()), accumulate=True), 32 + 4 + 8, 8),  # 2 elements
        (lambda t: t.__setitem__((slice(None), _ROWS), torch.ones(4, 2)), 16 + 32, 32),  # t[:, rows] = v: 4 * 2
        (lambda t: t.index_put_((t > 0,), torch.ones(())), 96 + 24 + 4, 96),  # a mask: every argument, all of t
    ],
    ids=[
        "index_copy_",
        "index_add_",
        "index_fill_",
        "scatter_",
        "scatter_value",
        "scatter_reduce",
        "scatter_add_",
        "scatter_reduce_",
        "index_put_",
        "index_put_accumulate",
        "index_put_columns",
        "index_put_mask",
    ],
)
@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_a_write_in_place_through_an_index_moves_the_positions_it_writes(write, read, written):
    """A static KV cache's ``index_copy_`` writes the new token's keys, not the cache."""
    mode = _cost_of(write, torch.zeros(4, 6))
    (cost,) = [c for f, c in mode.calls if f.overloadpacket.__name__.endswith("_")]  # the one in-place op
    if written == 96:  # a mask: the default, "every tensor argument read, the result written"
        assert (cost.bytes_read, cost.bytes_written) == (None, None)
    else:
        assert (cost.bytes_read, cost.bytes_written) == (read, written)


@pytest.mark.parametrize(
    "fn, args, flops",
    [
        (torch.special.bessel_j0, (torch.rand(4, 5),), 4 * 5),  # special functions: 1 per element
        (torch.special.zeta, (torch.rand(4, 5) + 1, torch.rand(4, 5)), 4 * 5),
        (torch.special.chebyshev_polynomial_t, (torch.rand(6), torch.tensor(3.0)), 6),
        (torch.igamma, (torch.rand(3, 3), torch.rand(3, 3)), 3 * 3),
        (torch.linalg.cross, (torch.rand(4, 3), torch.rand(4, 3)), 3 * 4 * 3),  # 2 products, 1 difference per component
        (torch.dist, (torch.rand(5, 2), torch.rand(5, 2)), 3 * 10),  # difference, power, sum
        (torch.allclose, (torch.rand(8), torch.rand(8)), 5 * 8),  # subtract, two abs, multiply, add
        (
            lambda a, i, s: a.index_reduce(0, i, s, "prod"),
            (torch.ones(3, 2), torch.tensor([0, 2, 0]), torch.rand(3, 2)),
            3 * 2,
        ),  # one combine per source element
        (torch.nn.functional.pdist, (torch.rand(10, 4),), 45 * 4 * 3),  # 10*9/2 pairs, 3 per coordinate
        (torch.rot90, (torch.rand(3, 4),), 0),  # a copy
    ],
)
def test_arithmetic_found_in_the_op_database_is_counted(fn, args, flops):
    mode = _cost_of(fn, *args)
    assert mode.uncounted == set() and mode.flops == flops


def test_the_matmul_path_of_cdist_counts_its_augmented_matmul():
    x1, x2 = torch.rand(30, 8), torch.rand(40, 8)  # more than 25 rows: cdist takes the matmul path
    mode = _cost_of(torch.cdist, x1, x2)
    (cost,) = [c for f, c in mode.calls if str(f) == "aten._euclidean_dist.default"]
    macs = 30 * 40 * (8 + 2)  # rows augmented with their squared norm and a one
    assert mode.uncounted == set() and cost.macs == macs and mode.macs == macs  # the views around it are free
    # matmul, squared norms of both inputs, the -2 scaling of x1, clamp and sqrt per distance
    assert cost.flops == 2 * macs + 2 * (30 * 8 + 40 * 8) + 30 * 8 + 2 * 30 * 40


@pytest.mark.parametrize("op", ["_is_all_true", "_linalg_check_errors"])
def test_validation_ops_are_free_checks(op):
    assert free_reason(getattr(aten, op).default) is FreeReason.CHECK


def test_packed_sequences_do_no_arithmetic_but_are_counted():
    lstm = torch.nn.LSTM(4, 3, batch_first=True)

    class Packed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lstm

        def forward(self, x, lengths):
            packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
            out, _ = self.lstm(packed)
            return torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]

    report = fxinspect.analyze(Packed(), (torch.randn(2, 5, 4), torch.tensor([5, 3])), timing=False)
    ops = {c.op: c for n in report.nodes for c in n.aten}
    assert ops["aten._pack_padded_sequence.default"].flops == 0  # a layout change, its bytes counted
    assert ops["aten._pack_padded_sequence.default"].bytes_written > 0
    assert not report.uncounted and not report.totals.partial
