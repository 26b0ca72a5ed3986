"""The instrumented program: interpreted once (counting) and compiled (timing), the same
probes at the same points, and passes that plug in by node name."""

from __future__ import annotations

import sys
import weakref
from pathlib import Path

import pytest
import torch

import fxinspect
from fxinspect.capture import capture
from fxinspect.run.assemble import report_fields
from fxinspect.run.graphs import op_nodes
from fxinspect.run.passes import Probe
from fxinspect.run.passes.count import CountPass
from fxinspect.run.program import InstrumentedProgram

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from architecture import OutputElements, TwoBlocks, merged


class Mixed(torch.nn.Module):
    """Nodes in lists, dicts, slices and keyword arguments; a value used late; a
    node whose value nobody reads; nested outputs."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.register_buffer("shift", torch.ones(8))

    def forward(self, x, extra):
        y = self.fc(x) + self.shift
        n = x.shape[1] // 2
        parts = torch.split(y, [n, n], dim=-1)
        z = torch.cat([parts[1], parts[0]], dim=-1)
        z = z[:, 1 : n + 2]
        torch.relu(z)  # never read
        w = torch.nn.functional.pad(z, (0, 1), value=0.5) * extra["w"].sum()
        return {"z": w, "pair": (y, extra["w"].view(-1, 2))}


def _captures():
    model, inputs = Mixed(), (torch.randn(2, 8), {"w": torch.randn(4)})
    for method in ("symbolic", "export", "eager"):
        yield method, model, capture(model, inputs, {}, method=method)


@pytest.mark.parametrize("method, model, cap", list(_captures()), ids=lambda v: v if isinstance(v, str) else "")
def test_interpreted_and_compiled_programs_compute_what_the_graph_computes(method, model, cap):
    tensors = cap.inputs.tensors
    expected = cap.graph_module(*tensors)
    program = InstrumentedProgram(cap)
    runs: dict[bool, list] = {False: [], True: []}
    outputs = {}
    for compiled in (False, True):
        seen = runs[compiled]
        probe = Probe(
            before=lambda name, seen=seen: seen.append(("before", name)),
            after=lambda name, out, seen=seen: seen.append(("after", name, type(out))),
        )
        outputs[compiled] = program.run(tensors, probe, compiled=compiled)
    names = [n.name for n in op_nodes(cap.graph_module.graph)]
    assert [e[1] for e in runs[False] if e[0] == "before"] == names  # every op node once, in graph order
    assert runs[False][::2] == [("before", n) for n in names]  # before, then after, around each op node
    assert runs[True] == runs[False]  # the compiled program probes the same points with the same outputs
    for got in outputs.values():
        assert len(got) == len(expected)
        assert all(torch.equal(a, b) for a, b in zip(got, expected))


def test_interpreted_program_frees_each_value_after_its_last_use():
    cap = capture(Mixed(), (torch.randn(2, 8), {"w": torch.randn(4)}), {}, method="symbolic")
    graph_ops = op_nodes(cap.graph_module.graph)
    last_use = {}
    for i, node in enumerate(graph_ops):
        for used in node.all_input_nodes:
            if used in graph_ops:
                last_use[graph_ops.index(used)] = i
    refs: dict[int, weakref.ref] = {}
    alive_too_long = []
    index = {n.name: i for i, n in enumerate(graph_ops)}

    def before(name):
        i = index[name]
        live = [t for t in (r() for r in refs.values()) if t is not None]
        bases = {id(t._base) for t in live if t._base is not None}  # a view keeps its base
        for j, ref in refs.items():  # values whose last reader ran before node i
            t = ref()
            if t is not None and last_use.get(j, j) < i and not _is_output(j) and id(t) not in bases:
                alive_too_long.append((graph_ops[j].name, graph_ops[i].name))

    def after(name, out):
        if isinstance(out, torch.Tensor):
            refs[index[name]] = weakref.ref(out)

    output_names = {n.name for n in cap.graph_module.graph.find_nodes(op="output")[0].all_input_nodes}

    def _is_output(j: int) -> bool:
        return graph_ops[j].name in output_names

    with torch.no_grad():  # (autograd would keep saved operands alive, rightly)
        InstrumentedProgram(cap).run(cap.inputs.tensors, Probe(before, after))
    assert len(refs) > 5 and alive_too_long == []


def test_arguments_are_rebuilt_with_node_values_in_plain_containers():
    import collections

    import torch.fx as fx
    from torch.fx.immutable_collections import immutable_dict, immutable_list

    from fxinspect.run.interpret import _value

    Pair = collections.namedtuple("Pair", "a b")
    x = fx.Graph().placeholder("x")
    env = {x: 5}
    got = _value(immutable_list([x, immutable_dict({"k": (x, slice(x, None))}), Pair(x, 2), torch.Size([4, 3])]), env)
    assert got == [5, {"k": (5, slice(5, None, None))}, Pair(5, 2), torch.Size([4, 3])]
    assert type(got) is list and type(got[1]) is dict and type(got[2]) is Pair and type(got[3]) is torch.Size


def test_a_pass_written_outside_the_package_plugs_in_by_node_name():
    model, x = TwoBlocks(), torch.randn(5, 6)
    program = fxinspect.instrument(model, x)
    result = OutputElements().run(program)
    elements = {name: values["output_elements"] for name, values in result.nodes.items()}
    hooked = {}  # the same figures from forward hooks, by module path
    handles = [
        m.register_forward_hook(lambda m, i, o, p=p: hooked.__setitem__(p, o.numel()))
        for p, m in model.named_modules()
        if p
    ]
    model(x)
    for h in handles:
        h.remove()
    assert set(elements) == set(program.probe_points)
    by_module = {n.name: n.meta["fxinspect_module"][0] for n in op_nodes(program.graph) if n.op == "call_module"}
    assert {by_module[k]: v for k, v in elements.items() if k in by_module} == {
        "a.0": 5 * 4,
        "a.1": 5 * 4,
        "b": 5 * 3,
    }  # batch 5 times the features
    assert elements["sum_1"] == 3  # sum over the batch leaves the 3 outputs


def test_a_pass_filling_a_declared_figure_is_merged_by_name_and_summed():
    model, x = TwoBlocks(), torch.randn(5, 6)
    report = merged(model, x)  # the counting pass and FixedLatency, as docs/architecture.md shows
    ops = [n for n in report.nodes if n.is_op]
    assert len(ops) == 4 and all(n.latency == 1e-3 for n in ops)  # Linear, ReLU, Linear, sum
    assert report.modules["a"].latency == pytest.approx(2e-3)  # its Linear and ReLU
    assert report.totals.latency == pytest.approx(4e-3) and report.modules[""].latency == pytest.approx(4e-3)
    assert report.totals.macs == 5 * 6 * 4 + 5 * 4 * 3  # the counting pass's figures merged beside it


def test_the_printed_program_shows_probes_around_every_op():
    program = fxinspect.instrument(TwoBlocks(), torch.randn(5, 6))
    lines = [line.strip() for line in program.code.splitlines()]
    for name in program.probe_points:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{name} = "))
        assert lines[at - 1] == f"before({name!r})" and lines[at + 1] == f"after({name!r}, {name})"
    assert str(program) == program.code


class RunsAnOpBetweenNodes(InstrumentedProgram):
    """A program that does arithmetic outside every node (as a buggy probe might)."""

    def run(self, inputs, probe=None, compiled=False):
        torch.ones(3) * 2.0  # under the counting mode, while no node runs: 3 multiplies
        return super().run(inputs, probe or Probe(), compiled)


def test_ops_outside_every_node_are_reported_not_dropped():
    model, x = TwoBlocks(), torch.randn(5, 6)
    program = RunsAnOpBetweenNodes(fxinspect.instrument(model, x).capture)
    report = fxinspect.Report(**report_fields(model, program, [CountPass().run(program)], virtual=False))
    assert [(c.op, c.calls, c.flops) for c in report.unattributed] == [
        ("aten.ones.default", 1, 0),
        ("aten.mul.Tensor", 1, 3),
    ]  # a fill, then 3 multiplies
    assert report.totals.flops == sum(n.flops for n in report.nodes if n.is_op)  # the nodes' own figures
    assert "outside fwd" in report.summary() and "aten.mul.Tensor" in report.summary()
