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


_MAX = {
    torch.nn.MaxPool1d: torch.nn.AvgPool1d,
    torch.nn.MaxPool2d: torch.nn.AvgPool2d,
    torch.nn.MaxPool3d: torch.nn.AvgPool3d,
}
_ADAPTIVE_MAX = {
    torch.nn.AdaptiveMaxPool1d: torch.nn.AdaptiveAvgPool1d,
    torch.nn.AdaptiveMaxPool2d: torch.nn.AdaptiveAvgPool2d,
    torch.nn.AdaptiveMaxPool3d: torch.nn.AdaptiveAvgPool3d,
}
_SWITCHES = (torch.nn.ReLU, torch.nn.ReLU6, torch.nn.Hardswish, torch.nn.SiLU, torch.nn.GELU)


def _positive(model: torch.nn.Module) -> torch.nn.Module:
    """A copy that no path switches off: positive weights, average pooling, identities."""
    net = copy.deepcopy(model).double().eval()

    def swap(parent):
        for name, child in parent.named_children():
            if type(child) in _MAX:
                k, s, p = child.kernel_size, child.stride, child.padding
                setattr(parent, name, _MAX[type(child)](k, s, p, ceil_mode=child.ceil_mode))
            elif type(child) in _ADAPTIVE_MAX:
                setattr(parent, name, _ADAPTIVE_MAX[type(child)](child.output_size))
            elif isinstance(child, _SWITCHES):
                setattr(parent, name, torch.nn.Identity())
            else:
                swap(child)

    swap(net)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(p.abs() + 0.01)
        for m in net.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
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


# ShuffleNetV2 (x0.5; its channel split is a chunk, its shuffle a view-transpose-view):
# conv1 3 s2 -> 3, jump 2; maxpool 3 s2 -> 3 + 2 * 2 = 7, jump 4; per stage the first block's
# depthwise 3 s2 adds 2 * jump and doubles it, each other block's depthwise 3 adds 2 * jump
# (the half passed through is within it): stage2 (4 blocks) 7 + 2 * 4 = 15, jump 8,
# + 3 * 2 * 8 = 63; stage3 (8) 63 + 2 * 8 = 79, jump 16, + 7 * 2 * 16 = 303; stage4 (4)
# 303 + 2 * 16 = 335, jump 32, + 3 * 2 * 32 = 527
@pytest.mark.parametrize(
    ("name", "side", "known"),
    [
        ("vgg16", 224, 212),
        ("resnet18", 512, 435),
        ("resnet50", 512, 427),
        ("mobilenet_v2", 512, 491),
        ("shufflenet_v2_x0_5", 576, 527),
    ],
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


def test_shufflenet_gets_its_field_and_the_summary_its_last_stage():
    """Its channel split (``chunk``) once lost the field, and the summary showed stage2's
    15×15 as the model's. 527 and 32: by hand above, and the gradient's reach."""
    model = torchvision.models.shufflenet_v2_x0_5(weights=None)
    size, stride, _, report = _field(model, torch.randn(1, 3, 224, 224), device="meta")
    assert size == "global" and report.modules["conv5"].receptive_field == (527, 527)
    assert report.modules["conv5"].effective_stride == (32, 32)
    assert not any("receptive" in note for note in report.capture.notes)
    (line,) = [line for line in str(report).splitlines() if line.startswith("receptive")]
    assert "527×527" in line and "global from mean" in line


def _pooled(dims: int, adaptive: str) -> torch.nn.Module:
    nn = torch.nn
    conv = getattr(nn, f"Conv{dims}d")
    return nn.Sequential(
        conv(1, 2, 3),  # 3, jump 1
        getattr(nn, f"MaxPool{dims}d")(2),  # 3 + 1 * 1 = 4, jump 2
        getattr(nn, f"AvgPool{dims}d")(3, stride=2, padding=1),  # 4 + 2 * 2 = 8, jump 4, padding 1 * 2 = 2
        getattr(nn, f"Adaptive{adaptive}Pool{dims}d")(4),  # 8 -> 4: window 2, 8 + 1 * 4 = 12, jump 8
        conv(2, 1, 3),  # 12 + 2 * 8 = 28, jump 8
    )


@pytest.mark.parametrize("adaptive", ["Avg", "Max"])
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_pooling_in_one_to_three_dimensions_by_hand_and_by_the_gradient(dims, adaptive):
    """1-D pooling runs as a 2-D kernel on an added dimension of 1 (unsqueeze, pool, squeeze)."""
    model = _pooled(dims, adaptive)
    shape = (32,) * dims  # conv 30, max 15, avg (15 + 2 - 3) // 2 + 1 = 8, adaptive 4, conv 2
    size, stride, padding, _ = _field(model, torch.randn(1, 1, *shape))
    assert (size, stride, padding) == ((28,) * dims, (8,) * dims, (2,) * dims)
    at = (1,) * dims
    assert _seen(_positive(model), shape, at, channels=1) == _expected(size, stride, padding, at, shape)


class _Waveform(torch.nn.Module):
    """A wav2vec-style feature extractor on a raw waveform ``(N, T)``: Conv1d(1, C, 10, 5),
    Conv1d(C, C, 3, 2) ×4, Conv1d(C, C, 2, 2) ×2, a group norm after the first."""

    def __init__(self, channels: int = 8):
        super().__init__()
        specs = [(10, 5)] + [(3, 2)] * 4 + [(2, 2)] * 2
        self.convs = torch.nn.ModuleList(
            torch.nn.Conv1d(1 if i == 0 else channels, channels, k, s, bias=False) for i, (k, s) in enumerate(specs)
        )
        self.norm = torch.nn.GroupNorm(channels, channels)

    def forward(self, wave):
        x = wave[:, None]  # (N, 1, T): the input's one dimension is the signal's
        for i, conv in enumerate(self.convs):
            x = torch.nn.functional.gelu(self.norm(conv(x)) if i == 0 else conv(x))
        return x


def test_a_raw_waveform_unsqueezed_in_the_model_has_wav2vecs_field():
    # r = 10 + (3 - 1) * 5 + (3 - 1) * 10 + (3 - 1) * 20 + (3 - 1) * 40 + (2 - 1) * 80 + (2 - 1) * 160 = 400,
    # stride 5 * 2 ** 6 = 320, no padding (wav2vec 2.0's 25 ms window and 20 ms hop at 16 kHz)
    model = _Waveform()
    size, stride, padding, report = _field(model, torch.randn(2, 16000), device="meta")
    assert (size, stride, padding) == ((400,), (320,), (0,))
    assert report.modules["convs.1"].receptive_field == (20,)  # 10 + (3 - 1) * 5
    assert "400 input positions" in str(report)
    # and where one output position's gradient reaches on a waveform: 400 samples from 320 * i
    net = _positive(model)
    net.norm = torch.nn.Identity()  # (its statistics read every position: no field, by the convention)
    wave = torch.rand(1, 4000, dtype=torch.float64, requires_grad=True)
    net(wave)[0, :, 5].sum().backward()
    hit = wave.grad[0].nonzero().flatten()
    assert (int(hit.min()), int(hit.max())) == (5 * 320, 5 * 320 + 399)


def test_a_vector_of_features_has_no_field_and_leaves_an_images_alone():
    """An ``(N, D)`` input is a signal only when a convolution or pooling reads it: an MLP's
    has no field, and a conditioning vector mixed into an image model changes nothing."""
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    report = fxinspect.analyze(mlp, torch.randn(2, 8), timing=False, memory=False)
    assert all(n.receptive_field is None for n in report.nodes) and "receptive" not in str(report)

    class Conditioned(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 4, 3)  # 3, jump 1
            self.scale = torch.nn.Linear(5, 4)

        def forward(self, image, vector):
            return self.conv(image) * self.scale(vector)[:, :, None, None] + vector.sum()

    size, stride, padding, report = _field(Conditioned(), (torch.randn(2, 1, 8, 8), torch.randn(2, 5)))
    assert (size, stride, padding) == ((3, 3), (1, 1), (0, 0)) and not report.capture.notes

    class Joined(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 1, 3)
            self.head = torch.nn.Linear(36 + 5, 2)

        def forward(self, image, vector):
            joined = torch.cat([self.conv(image).flatten(1), vector], 1)  # 6 × 6 positions, then 5 features
            return self.head(joined.sigmoid())

    size, _, _, report = _field(Joined(), (torch.randn(2, 1, 8, 8), torch.randn(2, 5)))
    assert size == "global" and report.modules["conv"].receptive_field == (3, 3) and not report.capture.notes


@pytest.mark.parametrize(
    ("how", "known"),
    [
        # conv 3 (jump 1, from 0), then the part from column 5 on: from 5, padding (0, -5)
        ("split", ((5, 5), (1, 1), (0, -5))),
        ("chunk", ((5, 5), (1, 1), (0, -7))),  # 14 columns in two chunks of 7: from 7
        ("channels", ((5, 5), (1, 1), (0, 0))),  # chunk, split and unbind of channels: the same field
    ],
)
def test_splits_along_positions_move_the_window_and_along_channels_keep_it(how, known):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(1, 4, 3)
            self.b = torch.nn.Conv2d(2, 1, 3)

        def forward(self, x):
            x = self.a(x)  # 14 × 14
            if how == "split":
                x = x.split([5, 9], dim=3)[1][:, :2]
            elif how == "chunk":
                x = x.chunk(2, dim=-1)[1][:, :2]
            else:
                first, second = x.chunk(2, dim=1)
                x = torch.stack(first.unbind(1), 1) + second.split_with_sizes([1, 1], 1)[1]
            return self.b(x)

    model = Net()
    size, stride, padding, report = _field(model, torch.randn(1, 1, 16, 16))
    assert (size, stride, padding) == known and not report.capture.notes
    assert _seen(_positive(model), (16, 16), (1, 1), channels=1) == _expected(size, stride, padding, (1, 1), (16, 16))


def test_a_field_that_stops_is_named_and_never_shown_as_the_models():
    class Body(torch.nn.Module):
        def forward(self, x):
            return torch.cat([x, x], 3)  # joined along a spatial dimension: no one window says it

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(1, 2, 3)
            self.body = Body()
            self.head = torch.nn.Conv2d(2, 2, 3)

        def forward(self, x):
            return self.head(self.body(self.stem(x)))

    size, _, _, report = _field(Net(), torch.randn(1, 1, 16, 16))
    assert size is None and report.modules["stem"].receptive_field == (3, 3)
    (note,) = [n for n in report.capture.notes if "receptive" in n]
    assert "stops at cat (node cat, module body)" in note and "convolution" not in note  # not what follows
    (line,) = [line for line in str(report).splitlines() if line.startswith("receptive")]
    assert "unknown at the output" in line and "cat" in line and "3×3" not in line


@pytest.mark.parametrize(
    "reorder", [lambda x: x.flip(3), lambda x: x.roll(2, 2), lambda x: x.roll(1)], ids=["flip", "roll", "roll-flat"]
)
def test_positions_reordered_along_a_spatial_dimension_stop_the_field(reorder):
    """flip and roll keep the shape: once passed on as a pointwise op's, a wrong window."""
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 1, 3), torch.nn.Identity())
    model[1].forward = reorder
    size, _, _, report = _field(model, torch.randn(1, 1, 8, 8))
    assert size is None and any("stops at flip" in n or "stops at roll" in n for n in report.capture.notes)
    channels = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Identity())
    channels[1].forward = lambda x: x.flip(1).roll(1, 1)  # channels reordered: the same field
    assert _field(channels, torch.randn(1, 1, 8, 8))[0] == (3, 3)


class _Flat(torch.nn.Module):
    """A flat input ``(N, C·H·W)`` (or channels last, ``(N, H·W·C)``) viewed as an image."""

    def __init__(self, channels: int, side: int, last: bool):
        super().__init__()
        self.shape, self.last = (channels, side), last
        self.a = torch.nn.Conv2d(channels, 4, 5)  # 5, jump 1
        self.pool = torch.nn.MaxPool2d(2)  # 5 + 1 = 6, jump 2
        self.b = torch.nn.Conv2d(4, 2, 3)  # 6 + 2 * 2 = 10, jump 2

    def forward(self, flat):
        c, s = self.shape
        image = flat.view(-1, s, s, c).permute(0, 3, 1, 2) if self.last else flat.view(-1, c, s, s)
        return self.b(self.pool(self.a(image)))


@pytest.mark.parametrize(("channels", "last"), [(1, False), (3, False), (3, True)])
def test_a_flat_input_viewed_as_an_image_is_counted_in_the_images_positions(channels, last):
    side = 28
    model = _Flat(channels, side, last)
    size, stride, padding, report = _field(model, torch.randn(2, channels * side * side))
    assert (size, stride, padding) == ((10, 10), (2, 2), (0, 0))
    assert any("flat input's positions" in note and "28×28" in note for note in report.capture.notes)
    # the gradient of output (3, 4), on the input read back as the image
    flat = torch.rand(1, channels * side * side, dtype=torch.float64, requires_grad=True)
    _positive(model)(flat)[0, :, 3, 4].sum().backward()
    grad = flat.grad.view(side, side, channels).permute(2, 0, 1) if last else flat.grad.view(channels, side, side)
    touched = grad.abs().sum(0) != 0
    rows, cols = touched.any(1).nonzero().flatten(), touched.any(0).nonzero().flatten()
    assert (int(rows.min()), int(rows.max()), int(cols.min()), int(cols.max())) == (6, 6 + 9, 8, 8 + 9)
