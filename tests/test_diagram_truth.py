"""Diagrams that tell the truth: a box per call, folds only of blocks that repeat along
the dataflow, and no cycle in the picture of a feed-forward model at any depth."""

from __future__ import annotations

import networkx as nx
import pytest
import torch
import torchvision

import fxinspect


class Loop(torch.nn.Module):
    """``inp`` once, ``small`` three times in a residual loop, ``out`` once: three Linears
    of one shape that play three roles."""

    def __init__(self):
        super().__init__()
        self.inp, self.small, self.out = (torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        h = self.inp(x)
        for _ in range(3):
            h = h + self.small(h)
        return self.out(h)


def _analyze(model, *inputs, **options):
    return fxinspect.analyze(model, inputs, timing=False, memory=False, **options)


def _row_names(report) -> list[str]:
    """The names of a module table's rows, down to the rule above the totals."""
    lines = report.table(columns=["name"], width=None).splitlines()
    return [line.strip() for line in lines[2 : lines.index(lines[1], 2)]]


def _chain(g: nx.DiGraph) -> list[str]:
    """The titles of the boxes of ``g`` in its one topological order (checked unique)."""
    order = list(nx.topological_sort(g))
    assert all(g.has_edge(a, b) for a, b in zip(order, order[1:])), "the boxes are not one chain"
    return [g.nodes[k]["title"] for k in order]


@pytest.mark.parametrize("method", ["symbolic", "export", "eager"])
def test_a_module_called_three_times_is_three_boxes_in_a_chain(method):
    r = _analyze(Loop(), torch.randn(2, 4), method=method)
    assert r.modules["small"].calls == 3
    # each op node knows which call of ``small`` ran it
    calls = sorted({n.call for n in r.nodes if n.module_path == "small"})
    assert calls == [(0,), (1,), (2,)]
    g = r.to_networkx(by="diagram", depth=1)
    titles = _chain(g)
    small = [t for t in titles if t.startswith("small")]
    assert small == ["small (call 1 of 3)", "small (call 2 of 3)", "small (call 3 of 3)"]
    assert titles[1] == "inp" and titles[-2] == "out"  # the three Linears are not folded into one
    # each call's box holds that call's FLOPs only: 2*4*4 + 4 bias adds per row, 2 rows
    for key in g:
        if g.nodes[key]["title"].startswith("small"):
            assert g.nodes[key]["flops"] == 2 * (2 * 4 * 4 + 4) and g.nodes[key]["repeats"] == 1
    table = r.table(columns=["name", "type", "calls"])
    assert "inp–" not in table and " 3 × Linear" not in table


class TwoNorms(torch.nn.Module):
    """A pre-norm block: the same LayerNorm type twice, in two roles (as Llama's
    ``input_layernorm`` and ``post_attention_layernorm``)."""

    def __init__(self, d=8):
        super().__init__()
        self.attn = torch.nn.Linear(d, d)
        self.mlp = torch.nn.Linear(d, d)
        self.norm_before_attn = torch.nn.LayerNorm(d)
        self.norm_before_mlp = torch.nn.LayerNorm(d)

    def forward(self, x):
        x = x + self.attn(self.norm_before_attn(x))
        return x + self.mlp(self.norm_before_mlp(x))


def test_siblings_that_play_different_roles_never_fold():
    r = _analyze(torch.nn.Sequential(TwoNorms(), TwoNorms()), torch.randn(2, 8))
    table = r.table(columns=["name", "type"])
    assert "0–1" in table  # the two blocks repeat, each feeding the next
    assert "norm_before_attn" in table and "norm_before_mlp" in table  # the norms do not
    g = r.to_networkx(by="diagram", depth=2)
    titles = _chain(g)  # one path: the order norm -> attn -> add -> norm -> mlp -> add reads
    assert [t.split(".")[-1] for t in titles[1:7]] == [
        "norm_before_attn",
        "attn",
        "add",
        "norm_before_mlp",
        "mlp",
        "add",
    ]
    assert all(g.nodes[k]["repeats"] == 2 for k in g if g.nodes[k]["kind"] == "module")
    # unfolded on request: every block its own boxes, every row its own module
    unfolded = r.to_networkx(by="diagram", depth=2, fold=False)
    assert len(unfolded) == 2 + 2 * 6 and all(unfolded.nodes[k]["repeats"] == 1 for k in unfolded)
    assert "0–1" not in r.table(fold=False) and "0–1" not in r.plot(depth=2, fold=False)._suptitle.get_text()


class Attention(torch.nn.Module):
    """Four projections of one shape: the value projection feeds the output projection,
    but through attention on the query's and key's work: two roles, no repeat."""

    def __init__(self, d=8):
        super().__init__()
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        return self.o(torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v)


def test_projections_joined_by_attention_do_not_fold():
    r = _analyze(Attention(), torch.randn(2, 5, 8))
    assert _row_names(r) == ["q", "k", "v", "o"]


def test_torch_transformer_encoder_folds_its_layers_not_norm1_and_norm2():
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
    r = _analyze(torch.nn.Sequential(torch.nn.TransformerEncoder(layer, 3)), torch.randn(2, 5, 16), method="export")
    names = _row_names(r)
    assert "0.layers.0–2" in names and "0.layers.0–2.norm1" in names and "0.layers.0–2.norm2" in names


class Interrupted(torch.nn.Module):
    """Two identical blocks of one ModuleList with another module between them (a UNet's
    mid block: resnet, attention, resnet)."""

    def __init__(self):
        super().__init__()
        self.resnets = torch.nn.ModuleList([torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)])
        self.attention = torch.nn.Linear(8, 8)

    def forward(self, x):
        x = self.resnets[0](x)
        x = self.attention(x)
        return self.resnets[1](x)


class Heads(torch.nn.Module):
    """Four identical heads of one ModuleList, side by side on the same input."""

    def __init__(self):
        super().__init__()
        self.heads = torch.nn.ModuleList([torch.nn.Linear(8, 1) for _ in range(4)])

    def forward(self, x):
        return torch.cat([h(x) for h in self.heads], dim=-1)


def test_a_run_folds_only_when_nothing_else_runs_between_its_members():
    r = _analyze(Interrupted(), torch.randn(2, 8))
    titles = _chain(r.to_networkx(by="diagram", depth=2))
    assert titles[1:4] == ["resnets.0", "attention", "resnets.1"]
    # the entries of a ModuleList run one after the other fold, though none feeds the next
    g = _analyze(Heads(), torch.randn(2, 8)).to_networkx(by="diagram", depth=2)
    assert [g.nodes[k]["title"] for k in g if g.nodes[k]["kind"] == "module"] == ["heads.0–3", "cat"]
    assert g.nodes["heads.0–3"]["repeats"] == 4 and g.nodes["heads.0–3"]["flops"] == 4 * 2 * (2 * 8 + 1)


class TupleBlocks(torch.nn.Module):
    """Blocks that return tuples: the loop that runs them picks ``[0]`` between calls."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)
            self.act = torch.nn.GELU()

        def forward(self, x):
            return (x + self.act(self.fc(x)), x)

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([self.Block() for _ in range(4)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)[0] * 0.5
        return x


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_the_ops_between_repeats_join_the_fold_and_leave_no_cycle(depth):
    r = _analyze(TupleBlocks(), torch.randn(2, 8))
    g = r.to_networkx(by="diagram", depth=depth)
    assert nx.is_directed_acyclic_graph(g)
    assert sum(g.nodes[k]["flops"] for k in g) == r.totals.flops  # every op in one box
    folded = [k for k in g if g.nodes[k]["repeats"] > 1]
    if depth == 2:  # the run is one box: per block fc, gelu, add; the 3 muls between blocks
        assert folded == ["blocks.0–3"] and len(g.nodes["blocks.0–3"]["members"]) == 4 * 3 + 3
    if depth == 3:  # drawn once inside: fc, gelu, the block's add, then the ops between blocks
        titles = [g.nodes[k]["title"] or k for k in folded]
        assert len(titles) == len(set(titles)) == 4, titles


class Helper(torch.nn.Module):
    """A module whose method the parent calls after everything else (as Faster R-CNN's
    ``transform.postprocess``): its ops run in two stretches, in one counted call."""

    def forward(self, x):
        return x * 2

    def post(self, x):
        return x - 1


class UsesHelper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.helper = Helper()
        self.body = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.helper.post(self.body(self.helper(x)))


def test_a_call_in_two_stretches_is_two_parts():
    # (the eager tier finds the method's module from its frames; symbolic tracing charges
    # a plain method's ops to the module that called it)
    g = _analyze(UsesHelper(), torch.randn(2, 4), method="eager").to_networkx(by="diagram", depth=1)
    assert _chain(g)[1:4] == ["helper (part 1)", "body", "helper (part 2)"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50", "vit_b_16", "gpt2", "fasterrcnn"])
def test_real_feed_forward_models_draw_no_cycle_at_any_depth(name):
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=64, n_head=4, vocab_size=512)).eval()
        inputs = (torch.randint(0, 512, (1, 16)),)
    elif name == "fasterrcnn":
        model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None)
        inputs = ([torch.rand(3, 128, 128)],)
        model.eval()
    else:
        model = getattr(torchvision.models, name)(weights=None)
        inputs = (torch.randn(1, 3, 224 if name == "vit_b_16" else 64, 224 if name == "vit_b_16" else 64),)
    with torch.no_grad():
        r = fxinspect.analyze(model, inputs, timing=False, memory=False)
    for depth in (1, 2, 3, 4, None):
        g = r.to_networkx(by="diagram", depth=depth)
        assert nx.is_directed_acyclic_graph(g), (depth, next(nx.simple_cycles(g)))
        assert sum(g.nodes[k]["flops"] for k in g) == r.totals.flops
        titles = [
            g.nodes[k]["title"] for k in g if g.nodes[k]["kind"] == "module" and not g.nodes[k]["type"].endswith(" ops")
        ]
        assert len(titles) == len(set(titles)), depth  # no box drawn twice


class TwoPurposes(torch.nn.Module):
    """Own ops of two purposes side by side, before the child that uses both: the
    input's scaling and a mask built from nothing the input holds."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = x * 2
        mask = x.new_ones(4, 4).tril()
        return self.fc(h) @ mask


def test_own_ops_of_different_purposes_are_boxes_of_their_own():
    r = _analyze(TwoPurposes(), torch.randn(2, 4))
    g = r.to_networkx(by="diagram", depth=1)
    assert nx.is_directed_acyclic_graph(g)
    own = {g.nodes[k]["title"]: k for k in g if g.nodes[k]["type"] == "TwoPurposes ops"}
    assert set(own) == {"mul", "tril +1 more", "matmul"}  # not one "mul +2 more" box
    assert g.has_edge(own["mul"], "fc") and g.has_edge(own["tril +1 more"], own["matmul"])
    assert sum(g.nodes[k]["flops"] for k in g) == r.totals.flops


class PositionedBlocks(torch.nn.Module):
    """Three identical Linear+Tanh blocks after a learned position term, then a product
    with a weight's transpose: at op level, two folded boxes and two constant ops."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(
            *[torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh()) for _ in range(3)]
        )
        self.pos = torch.nn.Parameter(torch.randn(8, 4))
        self.proj = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        h = self.blocks(x + self.pos[torch.arange(8)])
        return h @ self.proj.t()


def test_the_op_level_picture_folds_repeats_and_draws_constants_inside_their_users():
    r = _analyze(PositionedBlocks(), torch.randn(2, 8, 4))
    g = r.to_networkx(by="diagram", depth=None)
    # pos[arange] and proj.t() compute from weights alone: inside the add and the matmul,
    # without boxes or edges of their own; the three blocks' ops are two boxes
    assert _chain(g) == ["x", "add", "blocks_0_0", "blocks_0_1", "matmul", "output"]
    assert g.nodes["add"]["constants"] == ("getitem",) and g.nodes["matmul"]["constants"] == ("t",)
    linear = g.nodes["blocks_0_0"]
    assert linear["repeats"] == 3 and linear["members"] == ("blocks_0_0", "blocks_1_0", "blocks_2_0")
    # each Linear: 2*8 rows x 4 x 4 MACs = 256; three of them
    assert (linear["macs"], linear["flops"]) == (3 * 256, 3 * (2 * 256 + 64))  # (+ the bias add: 64 elements)
    assert sum(g.nodes[k]["flops"] for k in g) == r.totals.flops
    unfolded = r.to_networkx(by="diagram", depth=None, fold=False)
    assert len(unfolded) == len(g) + 4 and all(unfolded.nodes[k]["repeats"] == 1 for k in unfolded)
    heading = r.plot(depth=None).texts[0].get_text()
    assert heading == "PositionedBlocks: every op, repeated blocks folded; 2 constant ops drawn inside their users"
