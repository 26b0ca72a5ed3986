"""The explorer draws report.plot's boxes and edges, with no edge back and none behind a
box, each edge labelled with what it carries; driven in headless Chromium."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
import torchvision
from test_diagram_truth import Loop, TupleBlocks, TwoPurposes, UsesHelper
from test_explorer import _open, browser  # noqa: F401 (the browser fixture)

import fxinspect
from fxinspect import formatting as fmt


class _Res(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, h):
        return h + self.fc(h)


class _Mid(torch.nn.Module):
    """As a diffusers UNet's mid block: ``resnets`` and ``attentions`` (two ModuleLists)
    run interleaved, resnets.0, attentions.0, resnets.1: the ``resnets`` box's ops are
    not contiguous."""

    def __init__(self):
        super().__init__()
        self.resnets = torch.nn.ModuleList([_Res(), _Res()])
        self.attentions = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Softmax(-1))])

    def forward(self, h):
        h = self.resnets[0](h)
        for attention, resnet in zip(self.attentions, self.resnets[1:]):
            h = resnet(attention(h))
        return h


class _Interleaved(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.mid, self.out = torch.nn.Linear(4, 8), _Mid(), torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.out(self.mid(self.inp(x)))


class _ResidualMLP(torch.nn.Module):
    """Three different residual blocks (no fold): each block's skip edge passes beside it."""

    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(8, 16)
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, w), torch.nn.GELU(), torch.nn.Linear(w, 16))
            for w in (32, 48, 64)
        )
        self.out = torch.nn.Linear(16, 2)

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


class _Kept(torch.nn.Module):
    """A loop of blocks with glue (``* 0.5``) whose every output is kept and summed after
    the loop: edges leave every member, the last one's from after the run."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()) for _ in range(3))
        self.out = torch.nn.Linear(8, 2)

    def forward(self, x):
        kept = []
        for block in self.blocks:
            x = block(x) * 0.5
            kept.append(x)
        return self.out(torch.stack(kept).sum(0))


def _report(name):
    torch.manual_seed(0)
    options = {}
    if name == "loop":  # ``small`` called three times
        model, x = Loop(), torch.randn(2, 4)
    elif name == "helper":  # ``helper``'s method runs after ``body``: one call in two parts
        model, x, options = UsesHelper(), torch.randn(2, 4), {"method": "eager"}
    elif name == "glue":  # a ``[0]`` and a product between the blocks of a folded run
        model, x = TupleBlocks(), torch.randn(2, 8)
    elif name == "two purposes":  # the model's own ops: two groups that feed different boxes
        model, x = TwoPurposes(), torch.randn(2, 4)
    elif name == "fasterrcnn":
        model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None)
        x = [torch.rand(3, 128, 128)]
    elif name == "interleaved":
        model, x = _Interleaved(), torch.randn(2, 4)
    elif name == "kept":
        model, x = _Kept(), torch.randn(2, 8)
    elif name == "nested":  # two stacks of looped blocks with glue: a folded run in a folded run
        model, x = torch.nn.Sequential(TupleBlocks(), TupleBlocks()), torch.randn(2, 8)
    elif name == "mlp":
        model, x = _ResidualMLP(), torch.randn(2, 8)
    elif name == "densenet121":
        model, x = torchvision.models.densenet121(), torch.randn(1, 3, 32, 32)
    else:
        model, x = getattr(torchvision.models, name)(), torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        return fxinspect.analyze(model.eval(), (x,), timing=False, memory=False, **options)


def _who(members, key, title):
    """A box's identity on both sides: its first op node (the first member's, for a
    folded run), or the input's name, or ``output``."""
    return members[0] if members else title


def _plot_graph(report, depth):
    g = report.to_networkx(by="diagram", depth=depth)
    who = {
        k: _who(g.nodes[k]["members"], k, "output" if g.nodes[k]["kind"] == "output" else g.nodes[k]["title"])
        for k in g
    }
    return set(who.values()), {(who[a], who[b]) for a, b in g.edges}


def _drawn(page):
    """The boxes drawn (their keys and node names) and the edges drawn between them."""
    boxes = {b["key"]: b["nodes"] for b in page.evaluate("window.fxinspect.drawn()")}
    keys = page.eval_on_selector_all(".box", "els => els.map(e => e.dataset.key)")
    assert sorted(keys) == sorted(boxes)  # (drawn() tells of the boxes in the SVG)
    edges = page.eval_on_selector_all(".edge", "els => els.map(e => [e.dataset.from, e.dataset.to])")
    return boxes, [tuple(e) for e in edges]


def _page_graph(page):
    boxes, edges = _drawn(page)
    who = {k: _who(nodes, k, "output" if k == "out" else k[3:]) for k, nodes in boxes.items()}
    return set(who.values()), {(who[a], who[b]) for a, b in edges}


@pytest.mark.parametrize(
    "name",
    [
        "loop",
        "helper",
        "interleaved",
        "glue",
        "two purposes",
        "resnet18",
        pytest.param("fasterrcnn", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize("depth", [1, 2])
def test_the_boxes_and_edges_are_plots(browser, tmp_path, name, depth):  # noqa: F811
    report = _report(name)
    page, errors = _open(browser, report, tmp_path)
    page.evaluate(f"window.fxinspect.openTo({depth})")
    boxes, edges = _page_graph(page)
    want_boxes, want_edges = _plot_graph(report, depth)
    assert boxes == want_boxes and edges == want_edges and errors == []
    assert nx.is_directed_acyclic_graph(nx.DiGraph(list(edges)))


@pytest.mark.parametrize("name, depth", [("glue", 3), ("kept", 3), ("nested", 3), ("nested", 4)])
def test_an_open_run_draws_plots_boxes_and_edges_whichever_member_it_shows(browser, tmp_path, name, depth):  # noqa: F811
    # report.plot draws a run's members as one: an edge leaving the run starts at the box
    # of the node it leaves from (the last member's ``add``, not the glue before it), the
    # glue between members is one box after the member, an edge into the next repeat is
    # the loop the fold stands for
    report = _report(name)
    page, errors = _open(browser, report, tmp_path)
    page.evaluate(f"window.fxinspect.openTo({depth})")
    boxes, edges = _page_graph(page)
    assert (boxes, edges) == _plot_graph(report, depth)
    # stepped to their last members (no glue after it), the runs draw the same picture
    stepper = page.locator('[data-part="runs"] button[data-step="1"]:not([disabled])')
    while stepper.count():
        stepper.first.click()
    assert page.locator("[data-shown]").count() >= 1 and page.locator('[data-step="1"]:not([disabled])').count() == 0
    keys, stepped = _drawn(page)
    drawn = nx.DiGraph(stepped)
    drawn.add_nodes_from(keys)
    assert nx.is_isomorphic(drawn, nx.DiGraph(report.to_networkx(by="diagram", depth=depth))) and errors == []


def test_a_call_in_two_stretches_is_two_boxes_that_open_together(browser, tmp_path):  # noqa: F811
    report = _report("interleaved")
    page, errors = _open(browser, report, tmp_path)
    page.click('[data-path="mid"]')
    parts = page.eval_on_selector_all('[data-path="mid.resnets"]', "els => els.map(e => e.textContent)")
    # resnets.0, then attentions.0, then resnets.1: two parts of the one ModuleList's box
    assert len(parts) == 2 and "mid.resnets (part 1)" in parts[0] and "mid.resnets (part 2)" in parts[1]
    assert page.locator(".edge.back").count() == 0
    page.click('[data-path="mid.resnets"][data-piece="2"]')  # a part opens the whole: both resnets
    assert {"mid.resnets.0", "mid.resnets.1"} <= set(
        page.eval_on_selector_all("[data-path]", "els => els.map(e => e.dataset.path)")
    )
    assert errors == []


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_v2", "densenet121", "shufflenet_v2_x0_5"])
def test_feed_forward_models_draw_no_edge_back_at_any_depth(browser, tmp_path, name):  # noqa: F811
    report = _report(name)
    page, errors = _open(browser, report, tmp_path)
    deepest = max(p.count(".") + 1 for p in report.modules if p)
    for depth in range(1, deepest + 2):
        page.evaluate(f"window.fxinspect.openTo({depth})")
        _, edges = _drawn(page)
        assert nx.is_directed_acyclic_graph(nx.DiGraph(edges)), depth
        assert page.locator(".edge.back").count() == 0
    page.evaluate("window.fxinspect.expandAll()")
    assert nx.is_directed_acyclic_graph(nx.DiGraph(_drawn(page)[1])) and errors == []


_CROSSINGS = """() => {
  // every edge sampled along its path, against every box it neither starts nor ends at,
  // in the drawing's own coordinates (both inside g.view)
  const rects = new Map();
  for (const g of document.querySelectorAll(".box")) {
    const m = /translate\\(([-\\d.e]+),([-\\d.e]+)\\)/.exec(g.getAttribute("transform"));
    const r = g.querySelector("rect");
    rects.set(g.dataset.key, [Number(m[1]), Number(m[2]), Number(r.getAttribute("width")), Number(r.getAttribute("height"))]);
  }
  const found = [];
  for (const e of document.querySelectorAll(".edge")) {
    const length = e.getTotalLength();
    for (let s = 0; s <= length; s += 2) {
      const p = e.getPointAtLength(s);
      for (const [key, [x, y, w, h]] of rects) {
        if (key === e.dataset.from || key === e.dataset.to) continue;
        if (p.x > x + 1 && p.x < x + w - 1 && p.y > y + 1 && p.y < y + h - 1) { found.push([e.dataset.from, e.dataset.to, key]); break; }
      }
    }
  }
  return found;
}"""


@pytest.mark.parametrize("name, depth", [("mlp", 2), ("mlp", 3), ("resnet18", 3)])
def test_no_edge_passes_behind_a_box(browser, tmp_path, name, depth):  # noqa: F811
    report = _report(name)
    page, errors = _open(browser, report, tmp_path)
    page.evaluate(f"window.fxinspect.openTo({depth})")
    skips = [e for e in _drawn(page)[1] if e[1].startswith(("n:add", "s:"))]
    assert skips  # (the residual adds are drawn, each read by an edge from above the block)
    assert page.evaluate(_CROSSINGS) == [] and errors == []


def _edge_labels(page) -> list:
    """``[from, to, text]`` of each edge label drawn on ``page``."""
    return page.eval_on_selector_all(
        ".edge-label", "els => els.map(e => [e.dataset.from, e.dataset.to, e.textContent])"
    )


@pytest.mark.parametrize("name", ["mlp", "resnet18"])
def test_each_edge_is_labelled_with_the_shapes_it_carries(browser, tmp_path, name):  # noqa: F811
    report = _report(name)
    page, errors = _open(browser, report, tmp_path)
    page.evaluate("window.fxinspect.openTo(2)")
    boxes, edges = _drawn(page)
    by_name = {n.name: n for n in report.nodes}
    labels = _edge_labels(page)
    assert len(labels) == len(edges)
    inside = {n: k for k, nodes in boxes.items() for n in nodes}
    for a, b, text in labels:
        # the nodes of box a read by box b (or by the output): their outputs' shapes and dtypes
        readers = [by_name[n] for n in boxes[b]] if b != "out" else [n for n in report.nodes if n.op == "output"]
        carried = [by_name[x] for r in readers for x in r.args if inside.get(x) == a or (a == f"in:{x}")]
        texts = list(
            dict.fromkeys(f"{fmt.shapes(tuple(t.shape for t in n.outputs))} {n.outputs[0].dtype}" for n in carried)
        )
        assert text == "; ".join(texts[:2]) + ("; …" if len(texts) > 2 else ""), (a, b)
    assert errors == []


@pytest.mark.parametrize("name", ["mlp", "resnet18"])
def test_the_explorer_labels_each_edge_as_plot_does(browser, tmp_path, name):  # noqa: F811
    report = _report(name)
    page, errors = _open(browser, report, tmp_path)
    page.evaluate("window.fxinspect.openTo(2)")
    boxes, _ = _drawn(page)
    who = {k: _who(nodes, k, "output" if k == "out" else k[3:]) for k, nodes in boxes.items()}
    labels = _edge_labels(page)
    drawn = {(who[a], who[b]): text for a, b, text in labels}
    # plot's labels: to_networkx(by="diagram")'s, from fxinspect.views.edge_labels.edge_label
    g = report.to_networkx(by="diagram", depth=2)
    kind = {k: g.nodes[k]["kind"] for k in g}
    mine = {k: _who(g.nodes[k]["members"], k, "output" if kind[k] == "output" else g.nodes[k]["title"]) for k in g}
    assert drawn == {(mine[a], mine[b]): g.edges[a, b]["label"] for a, b in g.edges}
    assert len(drawn) == len(labels) and errors == []


class _Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 64)
        self.lstm = torch.nn.LSTM(64, 128, num_layers=2, batch_first=True, bidirectional=True)
        self.out = torch.nn.Linear(256, 10)

    def forward(self, x):
        h, _ = self.lstm(self.emb(x))
        return self.out(h)


def test_a_box_shows_the_shape_its_edge_carries(browser, tmp_path):  # noqa: F811
    with torch.no_grad():
        report = fxinspect.analyze(_Tagger().eval(), torch.randint(0, 100, (4, 32)), timing=False, memory=False)
    page, errors = _open(browser, report, tmp_path)
    # the LSTM returns (output 4 x 32 x (2 x 128), (h, c) each 2 layers x 2 directions = 4 x 4 x 128);
    # the model's own getitems pick both, and only [0] is read on, by ``out``
    box = page.locator('.box[data-key^="s:"]')
    assert box.count() == 1 and "→ 4×32×256" in box.text_content()
    label = page.locator(f'.edge-label[data-from="{box.get_attribute("data-key")}"][data-to="m:out"]')
    assert label.text_content() == "4×32×256 float32" and errors == []


# ---------------------------------------------------------------- the same in report.plot


@pytest.mark.parametrize(
    "name, depth",
    # DenseNet: each layer reads every output before it, edges down many layers beside boxes
    # of other widths (191 pieces of edges behind boxes at depth 3 when they ran diagonally)
    [("mlp", 2), ("mlp", 3), ("resnet18", 3), ("densenet121", 3), ("densenet121", None)],
)
def test_no_edge_of_plot_passes_behind_a_box(name, depth):
    from fxinspect.views.boxgraph import boxes
    from fxinspect.views.diagram_layout import arrange

    found, edges = boxes(_report(name), depth)
    layout = arrange(found, edges, lr=False, figures={})
    assert any(len(route) > 2 for route in layout.routes.values())  # (a skip edge, down several layers)
    keys = list(layout.ordered)  # each box's rectangle less 1 pt, as an edge meets a box at its side
    (w, h), (x, y) = (np.array([layout.sizes[k] for k in keys]).T, np.array([layout.pos[k] for k in keys]).T)
    low, high = np.stack([x - w / 2 + 1, y - h / 2 + 1]), np.stack([x + w / 2 - 1, y + h / 2 - 1])
    behind = set()
    for u, v in layout.routes:
        points = layout.edge_points(u, v)
        for start, end in zip(points, points[1:]):  # each straight piece, clipped to every box (Liang-Barsky)
            p, d = np.array(start)[:, None], np.subtract(end, start)[:, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                t0, t1 = (low - p) / d, (high - p) / d
            inside = (low < p) & (p < high)  # (a piece parallel to a side: within that side's span or never)
            enter = np.where(d == 0, np.where(inside, -np.inf, np.inf), np.minimum(t0, t1)).max(axis=0)
            leave = np.where(d == 0, np.where(inside, np.inf, -np.inf), np.maximum(t0, t1)).min(axis=0)
            hit = (np.maximum(enter, 0) < np.minimum(leave, 1)).nonzero()[0]
            behind |= {(u, v, keys[i]) for i in hit if keys[i] not in (u, v)}
    assert behind == set()
