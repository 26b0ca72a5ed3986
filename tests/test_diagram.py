"""``report.plot``: boxes folded by structure, a layout without overlaps, colours from the figures."""

from __future__ import annotations

import itertools

import pytest
import torch
import torchvision
from matplotlib.patches import FancyBboxPatch

import fxinspect
from fxinspect.views.diagram import boxes
from fxinspect.views.folding import Folds


@pytest.fixture(scope="module")
def resnet18():
    return fxinspect.analyze(
        torchvision.models.resnet18(weights=None), torch.randn(1, 3, 64, 64), timing=False, memory=False
    )


def _rectangles(fig):
    ax = fig.axes[0]
    return [p.get_extents() for p in ax.patches if isinstance(p, FancyBboxPatch)]


def test_repeated_blocks_fold_by_structure_whatever_their_names(resnet18):
    folds = Folds(resnet18)
    # layer1's two BasicBlocks are identical; layer2.0 has a downsample, layer2.1 does not
    assert folds.display("layer1.1.conv2") == "layer1.0–1.conv2" and folds.repeats("layer1.1.conv2") == 2
    assert folds.display("layer2.1") == "layer2.1" and folds.repeats("layer2.1") == 1

    class Named(torch.nn.Module):  # blocks named like torchvision's ViT encoder
        def __init__(self):
            super().__init__()
            for i in range(3):
                self.add_module(f"encoder_layer_{i}", torch.nn.Linear(4, 4))

        def forward(self, x):
            for i in range(3):
                x = getattr(self, f"encoder_layer_{i}")(x)
            return x

    r = fxinspect.analyze(Named(), torch.randn(2, 4), timing=False, memory=False)
    assert Folds(r).display("encoder_layer_2") == "encoder_layer_0–2"
    found, _ = boxes(r, depth=1)
    folded = found["encoder_layer_0–2"]
    assert folded.repeats == 3 and len(folded.nodes) == 3
    table = r.table()  # tables fold by the same structure: one row for the three layers
    row = next(line for line in table.splitlines() if "encoder_layer_0–2" in line)
    assert "3 × Linear" in row and "encoder_layer_1" not in table
    assert "encoder_layer_1" in r.table(fold=False)


def test_folded_boxes_sum_their_blocks_and_a_layered_gpt2_stays_small():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=4, n_embd=64, n_head=4, vocab_size=512, n_positions=64)
    r = fxinspect.analyze(
        GPT2LMHeadModel(config), {"input_ids": torch.randint(0, 512, (1, 16))}, timing=False, memory=False
    )
    found, edges = boxes(r, depth=2)
    assert len(found) <= 30
    blocks = found["transformer.h.0–3"]  # the ModuleList of 4 identical blocks shows the block, folded
    assert blocks.repeats == 4 and blocks.type == "GPT2Block"
    assert sum(n.flops for n in blocks.nodes) == sum(r.modules[f"transformer.h.{i}"].flops for i in range(4))
    # every op is in exactly one box: the boxes' FLOPs add up to the model's
    assert sum(n.flops for b in found.values() for n in b.nodes) == r.totals.flops
    assert ("transformer.h.0–3", "transformer.ln_f") in edges


def test_the_drawing_has_no_overlapping_boxes_and_saves_the_same_bytes(resnet18, tmp_path):
    for depth, direction in ((2, "TB"), (None, "LR")):
        fig = resnet18.plot(depth=depth, direction=direction)
        rects = _rectangles(fig)
        assert len(rects) == len(boxes(resnet18, depth)[0])
        for a, b in itertools.combinations(rects, 2):
            overlap = min(a.x1, b.x1) - max(a.x0, b.x0), min(a.y1, b.y1) - max(a.y0, b.y0)
            assert overlap[0] <= 0 or overlap[1] <= 0, (a, b)
    for suffix in ("png", "svg", "pdf"):
        resnet18.plot(tmp_path / f"a.{suffix}", depth=2)
        resnet18.plot(tmp_path / f"b.{suffix}", depth=2)
        assert (tmp_path / f"a.{suffix}").read_bytes() == (tmp_path / f"b.{suffix}").read_bytes(), suffix


def test_colours_follow_the_figure_and_the_nan_root_cause_is_framed():
    class Bad(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.log(self.fc(x) - 100)  # log of negatives: NaN made here

    r = fxinspect.analyze(Bad(), torch.randn(2, 4), timing=False, memory=False)
    fig = r.plot(depth=None, color_by="nonfinite")
    ax = fig.axes[0]
    framed = [p for p in ax.patches if isinstance(p, FancyBboxPatch) and p.get_linewidth() > 2]
    assert len(framed) == 1 and r.nonfinite.root_cause == "log"
    assert "NaN/Inf values per box" in [t.get_text() for t in fig.axes[1].texts]
    with pytest.raises(ValueError, match="color_by"):
        r.plot(color_by="colour")
    with pytest.raises(ValueError, match="direction"):
        r.plot(direction="up")


def test_breakdown_bars_add_up_to_the_total(resnet18, tmp_path):
    from fxinspect.views.breakdown import breakdown

    parts = breakdown(resnet18, "flops", by="module", depth=2, top=4)
    assert len(parts) == 5 and parts[-1][0].startswith("other (")
    assert sum(v for _, v in parts) == resnet18.totals.flops
    assert [v for _, v in parts[:4]] == sorted((v for _, v in parts[:4]), reverse=True)
    assert any(
        label.startswith("layer1.0–1  BasicBlock ×2") for label, _ in breakdown(resnet18, "flops", depth=2, top=20)
    )
    ops = dict(breakdown(resnet18, "bytes", by="op", top=50))
    assert sum(ops.values()) == resnet18.totals.bytes_read + resnet18.totals.bytes_written
    assert 0 not in ops.values()  # an op type that costs nothing has no bar
    fig = resnet18.plot_breakdown("macs", tmp_path / "macs.svg", top=3)
    assert (tmp_path / "macs.svg").exists() and "MACs" in fig.axes[0].get_xlabel()
    with pytest.raises(ValueError, match="no latency figures"):
        resnet18.plot_breakdown("latency")  # timing did not run: unknown, not zero
    with pytest.raises(ValueError, match="metric"):
        breakdown(resnet18, "speed")


class _OwnOps(torch.nn.Module):
    """A child, then own ops: two cheap ones before a costly normalisation."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        y = y.reshape(y.shape[0], 8)  # free
        return torch.nn.functional.layer_norm(y + 1.0, (8,))


class _Wrapper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = _OwnOps()

    def forward(self, x):
        return self.block(x)


def test_boxes_are_named_after_their_costliest_op_and_show_the_coloured_figure():
    report = fxinspect.analyze(_Wrapper(), torch.randn(4, 8), timing=False)
    found, _ = boxes(report, 2)
    own = [b for b in found.values() if b.nodes and b.nodes[0].module_path == "block"]
    # its own ops run getattr, getitem (y.shape[0]), reshape, add, layer_norm: named after
    # the one that costs, not "getattr, getitem, reshape, …"
    assert [b.title for b in own] == ["layer_norm +4 more"]
    fig = report.plot(depth=2, color_by="flops")
    texts = [t.get_text() for t in fig.axes[0].texts]
    fc = report.modules["block.fc"].flops  # 2*4*8*8 + 4*8 bias adds = 544
    assert fc == 544 and "544 FLOPs" in texts
    with pytest.raises(ValueError, match=r"color_by='latency'.*timing=True"):
        report.plot(color_by="latency")  # timing did not run: said, not a grey picture


def test_the_colour_bar_marks_round_values_in_the_figures_unit():
    from matplotlib.colors import LogNorm, Normalize

    from fxinspect.views.colouring import scale_ticks

    assert scale_ticks(LogNorm(2e3, 5e8)) == [1e4, 1e5, 1e6, 1e7, 1e8]  # the decades inside the range
    assert scale_ticks(LogNorm(1, 1e12)) == [1, 1e3, 1e6, 1e9, 1e12]  # 13 decades: every third, at most 6
    assert scale_ticks(Normalize(0, 10)) == [0, 2, 4, 6, 8, 10]
    assert scale_ticks(LogNorm(150, 900)) == [150, 900]  # no decade inside: the ends
    model = torch.nn.Sequential(torch.nn.Linear(64, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 8))
    fig = fxinspect.analyze(model, torch.randn(4, 64), timing=False, memory=False).plot(depth=1)
    marks = [t.get_text() for t in fig.axes[1].texts]
    # FLOPs per box: 0 (Linear 64->4096: 2*4*64*4096 + 4*4096 = 2,113,536), 1 (ReLU: 16,384),
    # 2 (4096->8: 2*4*4096*8 + 32 = 262,176): a log scale over 16.4 K .. 2.11 M
    assert marks == ["100 K", "1 M", "FLOPs per box"]


def test_png_and_svg_files_paint_what_the_matplotlib_figure_draws(resnet18, tmp_path):
    """PNG and SVG are painted without matplotlib (a tenth of its time): the same words,
    the same boxes in the same places and colours, the same size as the Figure's."""
    import html
    import re

    import numpy as np
    from PIL import Image

    fig = resnet18.plot(depth=2)
    assert resnet18.plot(tmp_path / "d.svg", depth=2) is None and resnet18.plot(tmp_path / "d.png", depth=2) is None
    svg = (tmp_path / "d.svg").read_text()
    # every text: the boxes' labels, the heading, the colour bar's marks and its label
    drawn = sorted(t.get_text() for ax in fig.axes for t in ax.texts) + [fig._suptitle.get_text()]
    painted = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    assert sorted(painted) == sorted(drawn)
    # the boxes: the Figure's rectangles (pixels from the bottom at dpi 100) in points from the top
    height = fig.get_figheight() * 72
    expected = sorted(
        (round(r.x0 * 0.72, 0), round(height - r.y1 * 0.72, 0), round(r.width * 0.72, 0), round(r.height * 0.72, 0))
        for r in _rectangles(fig)
    )
    found = sorted(
        tuple(round(float(v), 0) for v in m)
        for m in re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)" rx="4"', svg)
    )
    assert len(found) == len(expected) == len(boxes(resnet18, 2)[0])
    assert all(max(abs(a - b) for a, b in zip(f, e)) <= 1 for f, e in zip(found, expected)), (found, expected)
    # the PNG: the Figure's size in pixels; inside each box, 2 pt below its top edge, its fill
    fig.savefig(tmp_path / "m.png")
    ours = np.asarray(Image.open(tmp_path / "d.png").convert("RGB"), dtype=float)
    theirs = np.asarray(Image.open(tmp_path / "m.png").convert("RGB"), dtype=float)
    assert abs(ours.shape[0] - theirs.shape[0]) <= 1 and abs(ours.shape[1] - theirs.shape[1]) <= 1
    for patch in (p for p in fig.axes[0].patches if isinstance(p, FancyBboxPatch)):
        r = patch.get_extents()
        x, y = round((r.x0 + r.x1) / 2), round(theirs.shape[0] - r.y1 + 3)
        fill = np.array(patch.get_facecolor()[:3]) * 255
        assert np.abs(ours[y, x] - fill).max() <= 2 and np.abs(theirs[y, x] - fill).max() <= 2, (x, y)
