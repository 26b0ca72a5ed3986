"""Symbolic tier: module attribution, leaves, automatic leaves, calls, codegen."""

from __future__ import annotations

import collections

import pytest
import torch

import fxinspect
from fxinspect.capture import capture, module_of
from fxinspect.run.codegen import compile_graph


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.fc(x)) + x


class Untraceable(torch.nn.Module):
    """Control flow on a tensor value: symbolic tracing cannot follow it."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        if x.sum() > 0:
            return self.fc(x)
        return -x


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.odd = Untraceable()
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        x = self.block(self.block(x))  # one module called twice
        return self.head(self.odd(x))


def test_every_op_node_is_tagged_with_its_module_and_class():
    cap = capture(Block(), (torch.randn(2, 8),), {})
    tags = [(n.name, module_of(n)) for n in cap.graph_module.graph.nodes if n.op.startswith("call")]
    assert tags == [("fc", ("fc", "Linear")), ("relu", ("", "Block")), ("add", ("", "Block"))]


def test_repeated_module_counts_two_calls_and_twice_the_macs():
    report = fxinspect.analyze(Net(), torch.ones(2, 8), timing=False)
    assert report.modules["block"].calls == 2 and report.modules["block.fc"].calls == 2
    assert report.modules["head"].calls == 1
    assert report.modules["block.fc"].macs == 2 * (2 * 8 * 8)  # two calls of a 2x8 @ 8x8 = 256


def test_auto_prefers_a_full_breakdown_over_hidden_leaves():
    report = fxinspect.analyze(Net(), torch.ones(2, 8), timing=False)
    assert report.capture.method != "symbolic"
    assert "had to make ['odd'] leaves" in dict(report.capture.failures)["symbolic"]
    assert report.modules["odd.fc"].macs == 2 * 8 * 8  # broken down this time: 128
    assert report.totals.macs == 2 * (2 * 8 * 8) + 2 * 8 * 8 + 2 * 8 * 2  # block twice, odd.fc, head = 416


def test_untraceable_submodule_becomes_a_leaf_with_a_note():
    report = fxinspect.analyze(Net(), torch.ones(2, 8), method="symbolic", timing=False)
    assert report.capture.method == "symbolic"
    assert any("made 'odd' (Untraceable) a leaf" in note for note in report.capture.notes)
    odd = [n for n in report.nodes if n.module_path == "odd"]
    assert [n.op for n in odd] == ["call_module"]
    assert odd[0].macs == 2 * 8 * 8  # its Linear ran inside the leaf and is still counted: 128
    # modules inside a leaf get no nodes of their own; their work is in the leaf's node
    assert report.modules["odd.fc"].nodes == () and report.modules["odd"].macs == 128
    assert report.modules["odd.fc"].counted_in == "odd" and report.modules["odd"].counted_in is None
    table = report.table()
    assert "odd.fc" not in table and "1 module inside leaf modules (odd) not broken down" in table


@pytest.mark.parametrize("leaf", [Block, "block", "instance"])
def test_user_leaf_modules_by_class_path_or_instance(leaf):
    net = Net()
    leaf = net.block if leaf == "instance" else leaf
    report = fxinspect.analyze(net, torch.ones(2, 8), leaf_modules=[leaf, "odd"], timing=False)
    block_nodes = [n for n in report.nodes if n.module_path == "block"]
    assert [n.op for n in block_nodes] == ["call_module", "call_module"]
    assert report.modules["block"].macs == 2 * (2 * 8 * 8)  # = 256, counted inside the leaf


def test_compiled_program_matches_the_graph_module():
    cap = capture(Net(), (torch.ones(2, 8),), {}, leaf_modules=["odd"])
    program = compile_graph(cap.graph_module)
    x = torch.randn(2, 8)
    assert torch.equal(program(x)[0], cap.graph_module(x)[0])
    assert "= None" in program.source  # values are freed after their last use


def test_wrappers_are_unwrapped():
    model = torch.nn.DataParallel(torch.nn.Linear(4, 2))
    report = fxinspect.analyze(model, torch.randn(3, 4), timing=False)
    assert report.modules[""].type == "Linear" and report.totals.macs == 3 * 4 * 2  # = 24
    assert "unwrapped DataParallel" in report.capture.notes


class Mixed(torch.nn.Module):
    """Arguments of every kind the tracer's fast paths lower: scalars, dtypes,
    tuples, lists, dicts, slices, a buffer, a parameter and a tensor constant."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.scale = torch.nn.Parameter(torch.ones(8))
        self.register_buffer("shift", torch.zeros(8))

    def forward(self, x, extra):
        y = self.fc(x) * self.scale + self.shift
        parts = torch.split(y, [4, 4], dim=-1)
        z = torch.cat([parts[1], parts[0]], dim=-1).to(torch.float32)
        z = z[:, 1:] + torch.tensor(2.0)
        return {"z": torch.nn.functional.pad(z, (0, 1), value=0.5), "w": extra["w"].view(-1, 2)}


@pytest.mark.parametrize("make", [Net, Mixed])
def test_fast_tracing_paths_give_the_graph_fx_gives(make, monkeypatch):
    # the speed-ups of capture/fast_trace.py (argument lowering, no per-node SymInt
    # scan, shared module-stack snapshots) must give exactly the graph plain fx gives
    from fxinspect.capture import symbolic

    model = make()
    inputs = (torch.ones(2, 8),) if make is Net else (torch.ones(2, 8), {"w": torch.ones(4)})
    fast = capture(model, inputs, {}, method="symbolic", leaf_modules=["odd"])
    monkeypatch.setattr(symbolic, "GRAPH_INTERNALS_KNOWN", False)
    monkeypatch.setattr(symbolic, "ModuleStack", collections.OrderedDict)
    monkeypatch.setattr(symbolic.ModuleTracer, "create_arg", torch.fx.Tracer.create_arg)
    monkeypatch.setattr(symbolic, "make_node", torch.fx.proxy.TracerBase.create_node)
    monkeypatch.setattr(symbolic, "make_proxy", torch.fx.proxy.TracerBase.create_proxy)
    plain = capture(model, inputs, {}, method="symbolic", leaf_modules=["odd"])
    assert type(fast.graph_module.graph) is torch.fx.Graph
    assert fast.graph_module.code == plain.graph_module.code
    tags = [(n.name, module_of(n), n.meta.get("nn_module_stack")) for n in fast.graph_module.graph.nodes]
    assert tags == [(n.name, module_of(n), n.meta.get("nn_module_stack")) for n in plain.graph_module.graph.nodes]
    assert len(tags) > 5


def test_submodules_of_a_model_that_runs_as_one_op_are_marked_not_zero():
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=2).eval()
    with torch.no_grad():
        report = fxinspect.analyze(encoder, torch.randn(2, 5, 16), timing=False)
    inside = [p for p, m in report.modules.items() if p]
    assert inside and all(report.modules[p].counted_in == "" for p in inside)  # inside the root's one op
    assert report.modules[""].counted_in is None
    table = report.table()
    assert "layers" not in table.split("total")[0]  # no rows of zeros for the layers
    assert f"{len(inside)} modules inside leaf modules (the root module) not broken down" in table


class WarmUp(torch.nn.Module):
    """Branches on a buffer's value (a warm-up counter), then counts the step in place."""

    def __init__(self, steps):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("steps", torch.tensor(steps))

    def forward(self, x):
        y = self.fc(x)
        if self.steps < 10:
            y = y * 0.5
        self.steps.add_(1)
        return y


@pytest.mark.parametrize("steps, warm", [(0, True), (10, False)])
@pytest.mark.parametrize("method", ["auto", "eager"])
def test_a_branch_on_a_buffer_is_taken_as_the_call_takes_it_and_its_ops_are_counted(method, steps, warm):
    report = fxinspect.analyze(WarmUp(steps), torch.randn(2, 4), method=method, timing=False)
    assert report.capture.method.value == ("symbolic" if method == "auto" else "eager")
    # linear 2x4 @ 4x4: 2*2*4*4 + 8 bias adds; the warm-up's multiply: 8 elements
    assert report.totals.flops == 2 * 2 * 4 * 4 + 8 + (8 if warm else 0)
    # written: linear's 2x4 floats, steps < 10 (one bool), the multiply's 2x4 floats, steps += 1 (one int64)
    assert report.totals.bytes_written == 2 * 4 * 4 + 1 + (2 * 4 * 4 if warm else 0) + 8
