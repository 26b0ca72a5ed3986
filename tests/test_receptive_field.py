"""Receptive fields: by hand on small chains and branches, and against the gradient.

The empirical check: on a copy of the network with positive weights (max pooling made
average pooling, activations made identities, so no path is switched off), the input
positions where the gradient of one output position is non-zero are exactly the
field's positions that lie inside the input.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torchvision

import fxinspect


def _field(model, x, device=None):
    report = fxinspect.analyze(model, x, timing=False, memory=False, check_finite=False, device=device)
    root = report.modules[""]
    return root.receptive_field, root.effective_stride, root.effective_padding, report


def test_a_chain_and_a_join_by_hand():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(1, 4, 3)  # 3, jump 1, padding 0
            self.pool = torch.nn.MaxPool2d(2)  # 3 + (2 - 1) * 1 = 4, jump 2
            self.a = torch.nn.Conv2d(4, 4, 3, padding=1)  # 4 + 2 * 2 = 8, padding 0 + 1 * 2 = 2
            self.b = torch.nn.Conv2d(4, 4, 5, padding=2)  # 4 + 4 * 2 = 12, padding 0 + 2 * 2 = 4

        def forward(self, x):
            x = self.pool(self.stem(x))
            return self.a(x) + self.b(x)  # the union: from -4 to -4 + 12, and -2 + 8 within it

    size, stride, padding, report = _field(Net(), torch.randn(1, 1, 32, 32))
    assert (size, stride, padding) == ((12, 12), (2, 2), (4, 4))
    assert report.modules["a"].receptive_field == (8, 8) and report.modules["b"].receptive_field == (12, 12)
    assert report.modules["pool"].effective_stride == (2, 2)
    assert "receptive" in str(report) and "12×12" in report.table()
    back = fxinspect.Report.from_json(report.to_json())
    assert back.modules["b"].receptive_field == (12, 12) and back.modules[""].effective_padding == (4, 4)


def test_a_sequence_of_features_has_no_field():
    """A rank-3 input no convolution or pooling reads is (N, T, D), not a signal."""
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    report = fxinspect.analyze(layer, torch.randn(2, 5, 16), timing=False, memory=False)
    assert all(n.receptive_field is None for n in report.nodes) and "receptive" not in str(report)


def test_padding_upsampling_a_strided_slice_and_a_global_end_by_hand():
    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 1, 3, stride=2)  # 3, jump 2
            self.up = torch.nn.Upsample(scale_factor=2)  # nearest: the same 3, jump 2 / 2 = 1
            self.head = torch.nn.Linear(1, 1)

        def forward(self, x):
            x = torch.nn.functional.pad(x, (1, 1, 2, 2))  # 2 rows before, 1 column: padding (2, 1)
            x = self.up(self.conv(x))[:, :, ::3, :]  # rows strided by 3: jump 3 on the first dimension
            return x, self.head(x.mean((2, 3), keepdim=True).flatten(1))  # a mean over positions: global

    report = fxinspect.analyze(Chain(), torch.randn(1, 1, 33, 33), timing=False, memory=False)
    assert report.modules["conv"].effective_padding == (2, 1)
    assert report.modules["up"].receptive_field == (3, 3) and report.modules["up"].effective_stride == (1, 1)
    (sliced,) = [n for n in report.nodes if n.label == "getitem" and n.receptive_field is not None]
    assert (sliced.receptive_field, sliced.effective_stride, sliced.effective_padding) == ((3, 3), (3, 1), (2, 1))
    assert report.modules["head"].receptive_field == "global"


def _positive(model: torch.nn.Module) -> torch.nn.Module:
    """A copy that no path switches off: positive weights, average pooling, identities."""
    net = copy.deepcopy(model).double().eval()

    def swap(parent):
        for name, child in parent.named_children():
            if isinstance(child, torch.nn.MaxPool2d):
                k, s, p = child.kernel_size, child.stride, child.padding
                setattr(parent, name, torch.nn.AvgPool2d(k, s, p, ceil_mode=child.ceil_mode))
            elif isinstance(child, (torch.nn.ReLU, torch.nn.ReLU6, torch.nn.Hardswish, torch.nn.SiLU)):
                setattr(parent, name, torch.nn.Identity())
            else:
                swap(child)

    swap(net)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(p.abs() + 0.01)
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.zero_()
                m.running_var.fill_(1.0)
    return net


def _seen(net: torch.nn.Module, size: tuple[int, ...], at: tuple[int, ...], channels: int = 3) -> list[tuple[int, int]]:
    """Per spatial dimension, the first and last input position whose gradient from the
    output position ``at`` is non-zero."""
    x = torch.rand(1, channels, *size, dtype=torch.float64, requires_grad=True)
    out = net(x)
    out[(slice(None), slice(None), *at)].sum().backward()
    touched = x.grad[0].abs().sum(0) != 0
    spans = []
    for d in range(len(size)):
        rest = tuple(i for i in range(len(size)) if i != d)
        hit = touched.any(dim=rest).nonzero().flatten() if rest else touched.nonzero().flatten()
        spans.append((int(hit.min()), int(hit.max())))
    return spans


def _expected(size, stride, padding, at, extent) -> list[tuple[int, int]]:
    """The field's positions of output ``at`` that lie inside an input of ``extent``."""
    out = []
    for r, j, p, i, n in zip(size, stride, padding, at, extent):
        first = i * j - p
        out.append((max(0, math.ceil(first)), min(n - 1, math.floor(first + r - 1))))
    return out


def _features(name: str) -> torch.nn.Module:
    if name == "vgg16":
        return torchvision.models.vgg16(weights=None).features
    if name == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(weights=None).features
    model = getattr(torchvision.models, name)(weights=None)
    return torch.nn.Sequential(*list(model.children())[:-2])  # up to the last spatial stage


@pytest.mark.parametrize(
    ("name", "side", "known"),
    [("vgg16", 224, 212), ("resnet18", 512, 435), ("resnet50", 512, 427), ("mobilenet_v2", 512, 491)],
)
def test_torchvision_fields_equal_the_gradients_reach(name, side, known):
    model = _features(name)
    size, stride, padding, _ = _field(model, torch.randn(1, 3, side, side), device="meta")
    assert size == (known, known) and stride == (32, 32)  # (VGG-16's 212: Araujo et al. 2019)
    centre = (side // 32 // 2, side // 32 // 2)
    assert _seen(_positive(model), (side, side), centre) == _expected(size, stride, padding, centre, (side, side))


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_dilated_and_transposed_chains_equal_the_gradients_reach(dims):
    conv = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}[dims]
    up = {1: torch.nn.ConvTranspose1d, 2: torch.nn.ConvTranspose2d, 3: torch.nn.ConvTranspose3d}[dims]
    model = torch.nn.Sequential(
        conv(1, 2, 3, dilation=2),  # 5
        conv(2, 2, 3, stride=2, padding=1),  # 5 + 2 = 7, jump 2
        conv(2, 2, 3, dilation=3),  # 7 + 6 * 2 = 19
        up(2, 1, 4, stride=2, padding=1),  # jump 1
    )
    side = 40 if dims < 3 else 24
    shape = (side,) * dims
    size, stride, padding, _ = _field(model, torch.randn(1, 1, *shape))
    with torch.no_grad():
        at = tuple(n // 2 for n in model(torch.zeros(1, 1, *shape)).shape[2:])  # the output's centre
    assert _seen(_positive(model), shape, at, channels=1) == _expected(size, stride, padding, at, shape)


def test_a_join_of_branches_at_different_strides_is_said():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 1, 3, padding=1)  # 3, stride 1, padding 1

        def forward(self, x):
            x = self.conv(x)
            return x[:, :, :8, :8] + x[:, :, ::2, ::2]  # 8×8 each: stride 1 and stride 2, both from -1

    report = fxinspect.analyze(Net(), torch.randn(1, 1, 16, 16), timing=False, memory=False)
    root = report.modules[""]
    assert (root.receptive_field, root.effective_stride, root.effective_padding) == ((3, 3), (2, 2), (1, 1))
    assert any("add have different effective strides" in note for note in report.capture.notes)


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
@pytest.mark.parametrize("scale", [2, 3])
def test_upsampling_keeps_the_exact_size_and_each_start_within_one_input_stride(mode, scale):
    """An upsampled output reads from ``floor(o / s)`` on (nearest; shifted by half a pixel
    for linear and cubic): not linear in ``o``. The size is exact, output 0's start is
    exact, later starts are those of the mean stride, off by less than one input stride."""
    kw = {} if mode == "nearest" else {"align_corners": False}
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 1, 3, stride=2),  # 3, stride 2
        torch.nn.Upsample(scale_factor=scale, mode=mode, **kw),  # reads 1, 2 or 4 positions: +0, +2, +6
        torch.nn.Conv2d(1, 1, 3),  # + 2 * (2 / scale)
    )
    side = 61
    size, stride, padding, _ = _field(model, torch.randn(1, 1, side, side))
    assert size[0] == math.ceil(3 + {"nearest": 0, "bilinear": 2, "bicubic": 6}[mode] + 2 * 2 / scale)
    assert stride[0] == pytest.approx(2 / scale)
    net = _positive(model)
    with torch.no_grad():
        n = model(torch.zeros(1, 1, side, side)).shape[2]
    spans = [_seen(net, (side, side), (o, o), channels=1)[0] for o in range(n)]
    inside = [(o, lo, hi) for o, (lo, hi) in enumerate(spans) if lo > 0 and hi < side - 1]
    assert max(hi - lo + 1 for _, lo, hi in inside) == size[0]
    assert all(abs(lo - (o * stride[0] - padding[0])) < 2 for o, lo, _ in inside)  # (the input stride is 2)
