"""One count whatever the machine: the same model gives the same FLOPs on CPU, on
``device="meta"`` and on CUDA, and whatever the memory layout of its input.

The aten ops a model issues depend on both: ``F.dropout`` runs ``bernoulli_`` + ``div_``
+ ``mul`` on CPU but ``native_dropout`` on CUDA, ``F.linear`` runs ``addmm`` on a
contiguous input but ``bmm`` + ``add`` on a non-contiguous 3-D one, ``F.rms_norm`` is a
decomposition on CPU and ``_fused_rms_norm`` on CUDA. The rules price each path to the
same figure (see ``fxinspect/rules/__init__.py``); these tests hold them to it.

"Simulated CUDA" runs the model on fake tensors whose device is ``cuda``: torch's own
dispatch logic picks the CUDA path (``native_dropout``, ``_fused_rms_norm``) without a
GPU. A real CUDA run is tested too when a GPU is present.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import fxinspect

CUDA = torch.cuda.is_available()


def flops(model: nn.Module, x: torch.Tensor, **kwargs) -> int:
    return fxinspect.analyze(model, x, **kwargs).totals.flops


def on_simulated_cuda(model: nn.Module, x: torch.Tensor) -> tuple[nn.Module, torch.Tensor]:
    """Fake copies of ``model`` and ``x`` on ``cuda``: no GPU needed, CUDA's dispatch."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)

    def fake(t: torch.Tensor) -> torch.Tensor:
        with mode:
            out = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="cuda")
        return nn.Parameter(out, t.requires_grad) if isinstance(t, nn.Parameter) else out

    memo = {id(t): fake(t) for t in [*model.parameters(), *model.buffers()]}
    return copy.deepcopy(model, memo), fake(x)


class OpNames(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "aten":
            self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


r = torch.randn

# id: (model, input, expected flops with the arithmetic)
DEVICE_CASES = {
    # 4 * 8 elements, 1 multiply each (CPU: bernoulli_, div_ of the mask -- free --, mul)
    "dropout": (lambda: nn.Dropout(0.5), lambda: r(4, 8), 4 * 8),  # 32
    "dropout_inplace": (lambda: nn.Dropout(0.5, inplace=True), lambda: r(4, 8), 4 * 8),  # 32
    "dropout_p1": (lambda: nn.Dropout(1.0), lambda: r(4, 8), 4 * 8),  # zeros, then the multiply: 32
    # the (2, 3, 1, 1) mask broadcast over 2 * 3 * 4 * 4 elements: 1 multiply each
    "dropout2d": (lambda: nn.Dropout2d(0.5), lambda: r(2, 3, 4, 4), 2 * 3 * 4 * 4),  # 96
    # the mask's four scalar steps free; x * mask, then + b: 2 per element
    "alpha_dropout": (lambda: nn.AlphaDropout(0.5), lambda: r(4, 8), 2 * 4 * 8),  # 64
    # 2 * (4 * 8 * 6) MACs + 4 * 6 bias adds
    "linear": (lambda: nn.Linear(8, 6), lambda: r(4, 8), 2 * 4 * 8 * 6 + 4 * 6),  # 408
    # a transposed 3-D input: bmm + add; 2 * (8 * 8 * 6) + 8 * 6
    "linear_3d_transposed": (lambda: nn.Linear(8, 6), lambda: r(4, 2, 8).transpose(0, 1), 2 * 8 * 8 * 6 + 8 * 6),  # 816
    # out (1, 4, 3, 3) = 36 elements, 3 * 3 * 3 = 27 MACs each, + 36 bias adds
    "conv_bias": (lambda: nn.Conv2d(3, 4, 3), lambda: r(1, 3, 5, 5), 2 * 36 * 27 + 36),  # 1980
    # per element: square + sum (2), * rstd (1), * weight (1); per row: + eps, rsqrt (2)
    "rms_norm": (lambda: nn.RMSNorm(8), lambda: r(4, 8), 4 * 8 * 4 + 2 * 4),  # 136
    "rms_norm_no_affine": (lambda: nn.RMSNorm(8, elementwise_affine=False), lambda: r(4, 8), 4 * 8 * 3 + 2 * 4),  # 104
    # training: stats 3 + normalise 2 + affine 2 = 7 per element (cuDNN's kernel on CUDA)
    "batch_norm": (lambda: nn.BatchNorm2d(3), lambda: r(2, 3, 4, 4), 7 * 2 * 3 * 4 * 4),  # 672
}


@pytest.mark.parametrize("make_model, make_input, expected", DEVICE_CASES.values(), ids=DEVICE_CASES.keys())
def test_same_flops_on_cpu_meta_and_cuda(make_model, make_input, expected):
    torch.manual_seed(0)
    model, x = make_model().train(), make_input()
    cpu = flops(model, x)
    meta = flops(model, x, device="meta")
    simulated = flops(*on_simulated_cuda(model, x))
    assert cpu == meta == simulated == expected


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("make_model, make_input, expected", DEVICE_CASES.values(), ids=DEVICE_CASES.keys())
def test_same_flops_on_real_cuda(make_model, make_input, expected):
    model, x = make_model().train().cuda(), make_input().cuda()
    assert flops(model, x) == expected


@pytest.mark.parametrize(
    "run, x, cpu_ops, cuda_ops",
    [
        (
            lambda x: torch.nn.functional.dropout(x, 0.5, True),
            r(4, 8),
            ["bernoulli_", "div_", "mul"],
            ["native_dropout"],
        ),
        (
            lambda x: torch.nn.functional.rms_norm(x, (8,)),
            r(4, 8),
            ["pow", "mean", "add_", "rsqrt", "mul"],
            ["_fused_rms_norm"],
        ),
    ],
    ids=["dropout", "rms_norm"],
)
def test_the_paths_really_differ(run, x, cpu_ops, cuda_ops):
    """The invariance above is not vacuous: CPU and CUDA issue different aten ops."""
    seen = {}
    for device, tensor in (("cpu", x), ("cuda", on_simulated_cuda(nn.Identity(), x)[1])):
        with OpNames() as names:
            run(tensor)
        seen[device] = [n for n in names.names if n not in ("empty_like",)]
    assert seen == {"cpu": cpu_ops, "cuda": cuda_ops}


# id: (input, expected flops of nn.Linear(8, 6) with the arithmetic): every layout of
# the same 16 rows of 8 features gives 2 * 16 * 8 * 6 MACs-as-flops + 16 * 6 bias adds.
LINEAR_ROWS_16 = 2 * 16 * 8 * 6 + 16 * 6  # 1632
LAYOUTS = {  # id: (input, whether the bias add is fused into addmm, else a separate add)
    "contiguous_2d": (lambda: r(16, 8), True),
    "transposed_2d": (lambda: r(8, 16).t(), True),
    "contiguous_3d": (lambda: r(2, 8, 8), True),
    "transposed_3d": (lambda: r(8, 2, 8).transpose(0, 1), False),
    "feature_first_3d": (lambda: r(2, 8, 8).transpose(1, 2), False),
    "transposed_4d": (lambda: r(4, 2, 2, 8).transpose(0, 1), False),
    "expanded_3d": (lambda: r(1, 8, 8).expand(2, 8, 8), False),
}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("make_input, fused", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_linear_same_flops_whatever_the_layout(make_input, fused, bias):
    torch.manual_seed(0)
    linear, x = nn.Linear(8, 6, bias=bias), make_input()
    if bias:  # the layout does pick the path
        with OpNames() as names:
            linear(x)
        assert ("addmm" in names.names, "add" in names.names) == (fused, not fused)
    expected = LINEAR_ROWS_16 if bias else LINEAR_ROWS_16 - 16 * 6
    assert flops(linear, x) == flops(linear, x, device="meta") == expected
    assert flops(*on_simulated_cuda(linear, x)) == expected
    # MACs stay FlopCounterMode's: 2 * MACs == its total, bias or not.
    report = fxinspect.analyze(linear, x)
    with FlopCounterMode(display=False) as counter:
        linear(x)
    assert 2 * report.totals.macs == counter.get_total_flops() == 2 * 16 * 8 * 6


@pytest.mark.parametrize(
    "make_model, make_input, expected",
    [
        (lambda: nn.Conv2d(3, 4, 3), lambda: r(2, 3, 6, 6).to(memory_format=torch.channels_last), 2 * 128 * 27 + 128),
        (lambda: nn.LayerNorm(8), lambda: r(8, 4).t(), 7 * 32),  # stats 3, normalise 2, affine 2
        (lambda: nn.Dropout(0.5), lambda: r(8, 4).t(), 32),
        (lambda: nn.Softmax(-1), lambda: r(8, 4).t(), 5 * 32),
    ],
    ids=["conv_channels_last", "layer_norm_transposed", "dropout_transposed", "softmax_transposed"],
)
def test_same_flops_contiguous_or_not(make_model, make_input, expected):
    torch.manual_seed(0)
    model, x = make_model().train(), make_input()
    assert not x.is_contiguous()
    assert flops(model, x) == flops(model, x.contiguous()) == flops(model, x, device="meta") == expected


def test_only_mask_arithmetic_is_free():
    """Scaling a drawn mask is free; anything that touches data counts."""
    x = torch.randn(4, 8)

    def hand_made_dropout(x):
        mask = torch.empty_like(x).bernoulli_(0.5)
        mask = mask.div_(0.5) * 2.0  # mask arithmetic: free
        return x * mask + mask  # 32 multiplies + 32 adds

    class M(nn.Module):
        def forward(self, x):
            return hand_made_dropout(x), x / 0.5  # an in-place-free scalar div of data: 32

    assert flops(M(), x) == 32 + 32 + 32


class Distances(torch.nn.Module):
    def forward(self, a, b):
        return torch.cdist(a, b)


def test_cdist_is_counted_as_its_kernel_computes_and_the_reference_says_so():
    m, n, d = 30, 40, 7  # p = 2 on more than 25 rows: the matmul path, rows padded with 2 columns
    report = fxinspect.analyze(Distances(), (torch.randn(m, d), torch.randn(n, d)), timing=False, memory=False)
    assert report.totals.macs == m * n * (d + 2)  # not the closed form m * n * d
    small = fxinspect.analyze(Distances(), (torch.randn(5, d), torch.randn(6, d)), timing=False, memory=False)
    assert (small.totals.macs, small.totals.flops) == (0, 3 * 5 * 6 * d)  # the direct kernel
    reference = (Path(__file__).resolve().parents[1] / "docs" / "reference.md").read_text()
    assert "m·n·(d+2) MACs" in reference and "m·n·d" in reference
