"""plot's edges name the shape and dtype of what they carry, readable: never on a box or
on another label, in the Figure, the PNG and the SVG alike."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image

import fxinspect
from fxinspect.cli import main
from fxinspect.views.boxgraph import box_graph
from fxinspect.views.diagram_layout import arrange
from fxinspect.views.edge_labels import edge_label

IN, OUT = "<placeholder:input_1>", "<output:output>"
# batch 1: Linear(4, 8) reads 1×4 and gives 1×8, ReLU keeps 1×8, Linear(8, 2) gives 1×2
MLP = {(IN, "0"): "1×4 float32", ("0", "1"): "1×8 float32", ("1", "2"): "1×8 float32", ("2", OUT): "1×2 float32"}


def _analyze(model, *inputs):
    torch.manual_seed(0)
    with torch.no_grad():
        return fxinspect.analyze(model.eval(), inputs, timing=False, memory=False)


@pytest.fixture(scope="module")
def mlp():
    return _analyze(
        torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)), torch.randn(1, 4)
    )


@pytest.fixture(scope="module")
def resnet18():
    return _analyze(torchvision.models.resnet18(), torch.randn(1, 3, 64, 64))


@pytest.fixture(scope="module")
def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=16, bos_token_id=0, eos_token_id=0)
    return _analyze(GPT2LMHeadModel(config), torch.randint(0, 100, (1, 8)))


class _Three(torch.nn.Module):
    def forward(self, x):
        return x[:, :1], x[:, :2], x * 2


class _Sum(torch.nn.Module):
    def forward(self, a, b, c):
        return a.sum() + b.sum() + c.sum()


class _Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.three, self.sum = _Three(), _Sum()

    def forward(self, x):
        return self.sum(*self.three(x))


def test_each_edge_of_a_small_model_names_the_shape_and_dtype_it_carries(mlp, tmp_path):
    g = mlp.to_networkx(by="diagram", depth=1)
    assert {e: g.edges[e]["label"] for e in g.edges} == MLP
    assert g.edges["0", "1"]["carries"] == ("_0",)  # the first Linear's output
    texts = [t.get_text() for t in mlp.plot(depth=1, color_by=None).axes[0].texts]
    assert sorted(t for t in texts if "float32" in t) == sorted(MLP.values())
    bare = [t.get_text() for t in mlp.plot(depth=1, color_by=None, edge_labels=False).axes[0].texts]
    assert not any("float32" in t for t in bare) and len(bare) == len(texts) - len(MLP)
    mlp.plot(tmp_path / "d.svg", depth=1, color_by=None)
    svg = (tmp_path / "d.svg").read_text(encoding="utf-8")
    drawn = re.findall(r'<text [^>]*font-size="7.0"[^>]*fill="#555555"[^>]*>([^<]*)</text>', svg)
    assert sorted(drawn) == sorted(MLP.values())  # FONT - 2, grey


def test_an_edge_names_each_output_it_carries_two_at_most_and_the_dtype_of_token_ids():
    # _Three gives x[:, :1] (1×1), x[:, :2] (1×2) and x * 2 (1×4): _Sum reads all three
    g = _analyze(_Pair(), torch.randn(1, 4)).to_networkx(by="diagram", depth=1)
    assert g.edges["three", "sum"]["label"] == "1×1 float32; 1×2 float32; …"
    assert len(g.edges["three", "sum"]["carries"]) == 3
    # token ids: int64 into the embedding, which gives 1×5×4 floats
    g = _analyze(torch.nn.Sequential(torch.nn.Embedding(10, 4)), torch.randint(0, 10, (1, 5))).to_networkx(
        by="diagram", depth=1
    )
    assert [g.edges[e]["label"] for e in g.edges] == ["1×5 int64", "1×5×4 float32"]


def test_the_png_draws_each_label_where_the_svg_does(mlp, tmp_path):
    mlp.plot(tmp_path / "d.svg", depth=1, color_by=None)
    svg = (tmp_path / "d.svg").read_text(encoding="utf-8")
    spots = [(float(x), float(y)) for x, y in re.findall(r'<text x="([\d.]+)" y="([\d.]+)" font-size="7.0"', svg)]
    assert len(spots) == len(MLP)
    for labels in (True, False):
        mlp.plot(tmp_path / "d.png", depth=1, color_by=None, dpi=72, edge_labels=labels)  # 1 px a point
        pixels = np.asarray(Image.open(tmp_path / "d.png").convert("L"))
        for x, y in spots:
            # left of the edge, which runs straight down the middle here: the label's text, or white
            left = pixels[round(y) - 3 : round(y) + 3, round(x) - 20 : round(x) - 4]
            assert (left.min() < 160) == labels, (x, y, labels)


def _layout(report, depth, lr=False):
    graph = box_graph(report, depth)
    texts = {e: edge_label(carried) for e, carried in graph.carries.items()}
    return graph, arrange(graph.found, graph.edges, lr=lr, figures={}, edge_texts=texts)


def graph_label(graph, edge):
    return edge_label(graph.carries[edge])


def _overlap(a, b):
    return min(a[2], b[2]) - max(a[0], b[0]) > 0 and min(a[3], b[3]) - max(a[1], b[1]) > 0


@pytest.mark.parametrize(
    "name, depth, lr",
    [("resnet18", 1, False), ("resnet18", 2, False), ("resnet18", 3, False), ("resnet18", 2, True)]
    + [("gpt2", 2, False), ("gpt2", 2, True), ("gpt2", None, False)],
)
def test_no_label_lies_on_a_box_or_on_another_label_and_each_lies_on_its_edge(request, name, depth, lr):
    graph, layout = _layout(request.getfixturevalue(name), depth, lr)
    order = {k: box.order for k, box in graph.found.items()}
    # every edge down the layers has its label (an edge back up, drawn aside, has none)
    named = [e for label in layout.edge_labels for e in label.edges]
    assert sorted(named) == sorted((u, v) for u, v in graph.edges if order[u] < order[v])
    for label in layout.edge_labels:  # one label for edges of one source that carry the same
        assert {u for u, _ in label.edges} == {label.edges[0][0]}
        assert {graph_label(graph, e) for e in label.edges} == {label.text}
        for e in label.edges:  # on its edges: each bends through it
            assert label.centre in layout.routes[e][1:-1]
    boxes = {}
    for k in layout.ordered:
        (w, h), (x, y) = layout.sizes[k], layout.pos[k]
        boxes[k] = (x - w / 2, y - h / 2, x + w / 2, y + h / 2)
    labels = [label.rectangle() for label in layout.edge_labels]
    assert [(r, k) for r in labels for k, b in boxes.items() if _overlap(r, b)] == []
    assert [(a, b) for i, a in enumerate(labels) for b in labels[i + 1 :] if _overlap(a, b)] == []
    # and still no edge behind a box (its rectangle less 1 pt, as the edge meets it at its side)
    behind = set()
    for u, v in layout.routes:
        points = layout.edge_points(u, v)
        for (x0, y0), (x1, y1) in zip(points, points[1:]):
            for t in (i / 50 for i in range(51)):
                x, y = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
                behind |= {
                    (u, v, k)
                    for k, (a, b, c, d) in boxes.items()
                    if k not in (u, v) and a + 1 < x < c - 1 and b + 1 < y < d - 1
                }
    assert behind == set()


class _Dense(torch.nn.Module):
    """A dense block: each layer reads every output before it, so each box's output goes
    to every box after it, most of them down several layers."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4 * (i + 1), 4) for i in range(4))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(torch.cat(features, -1)))
        return torch.cat(features, -1)


def test_a_boxs_edges_that_carry_the_same_share_one_label_and_the_lanes_keep_their_width():
    graph, layout = _layout(_analyze(_Dense(), torch.randn(2, 4)), 2)
    bare = arrange(graph.found, graph.edges, lr=False, figures={})
    sources = {u for label in layout.edge_labels for u, _ in label.edges}
    assert len(layout.edge_labels) == len(sources)  # each box's outputs are one tensor: one label a box
    # x (2×4) and each layer's 2×4 go to every cat after them; a cat feeds one layer
    fans = {label.edges[0][0]: len(label.edges) for label in layout.edge_labels if len(label.edges) > 1}
    assert fans == {"<placeholder:x>": 5, "layers.0": 4, "layers.1": 3, "layers.2": 2}
    assert {label.text for label in layout.edge_labels if label.edges[0][0] in fans} == {"2×4 float32"}
    # the boxes stand where they stood without labels, left to right (as one shift at most)
    shift = {round(layout.pos[k][0] - bare.pos[k][0], 6) for k in layout.ordered}
    assert len(shift) == 1


def test_the_cli_draws_edge_labels_unless_told_not_to(tmp_path, capsys):
    argv = ["torch.nn:Linear", "--args", "[4, 2]", "--input-shape", "3,4", "--no-timing", "--no-memory"]
    assert main([*argv, "--svg", str(tmp_path / "a.svg")]) == 0
    assert main([*argv, "--svg", str(tmp_path / "b.svg"), "--no-edge-labels"]) == 0
    capsys.readouterr()
    # Linear(4, 2) on 3 rows: 3×4 in, 3×2 out
    assert ">3×4 float32</text>" in (tmp_path / "a.svg").read_text(encoding="utf-8")
    assert "float32</text>" not in (tmp_path / "b.svg").read_text(encoding="utf-8")
