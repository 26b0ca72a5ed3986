"""The recorder interface and the one run (fxinspect.run.recorders, fxinspect.run.passes.one_run)."""

from __future__ import annotations

import pytest
import torch

import fxinspect
from fxinspect.run.passes import PassResult
from fxinspect.run.passes.backward import BackwardRecorder
from fxinspect.run.passes.count import CountRecorder
from fxinspect.run.passes.memory import MemoryRecorder
from fxinspect.run.passes.one_run import run_once
from fxinspect.run.recorders import Recorder, default_loss, loss_for


class Seen(Recorder):
    """Every hook call, in order; per node its output elements and the aten ops it issued."""

    def __init__(self):
        self.node, self.befores, self.afters = None, [], []
        self.elements, self.ops, self.backward_ops, self.losses, self.finished = {}, {}, [], [], 0

    def before(self, name):
        self.node = name
        self.befores.append(name)

    def after(self, name, out):
        self.afters.append(name)
        self.elements[name] = out.numel()
        self.node = None

    def op(self, func, args, kwargs, out):
        self.ops.setdefault(self.node, []).append(str(func))

    def backward_op(self, func, args, kwargs, out):
        self.backward_ops.append(str(func))

    def differentiating(self, loss):
        self.losses.append(loss)

    def differentiated(self):
        self.finished += 1

    def result(self, run):
        return PassResult(nodes={n: {"output_elements": k} for n, k in self.elements.items()})


def _mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    return model, fxinspect.instrument(model, torch.randn(5, 3))


@pytest.mark.parametrize("beside", [[], ["count"], ["count", "memory"]])
def test_a_recorder_sees_every_op_node_once_per_run_and_its_ops(beside):
    model, program = _mlp()
    for _ in range(2):  # a fresh recorder per run: each sees the run's nodes once
        seen = Seen()
        others = {"count": lambda: CountRecorder(program), "memory": lambda: MemoryRecorder(program)}
        result = run_once(program, [seen, *(others[k]() for k in beside)])
        assert seen.befores == seen.afters == list(program.probe_points) == ["_0", "_1", "_2"]
        # outputs 5x4, 5x4, 5x2: 20 + 20 + 10
        assert sum(r["output_elements"] for r in result.nodes.values() if "output_elements" in r) == 50
        # a linear is aten.t + aten.addmm, a ReLU aten.relu + the aten.detach of the output
        # autograd keeps for its backward (none under the memory model's saved-tensor
        # hooks, which take the output itself): 2 + 2 (or 1) + 2 ops, each seen once,
        # whether the counting mode leads the dispatch (and calls the hook) or a plain one does
        relu = 1 if "memory" in beside else 2
        assert {n: len(ops) for n, ops in seen.ops.items()} == {"_0": 2, "_1": relu, "_2": 2}
        if "count" in beside:  # the leader priced exactly the ops the hook saw
            assert [sum(c.calls for c in result.nodes[n]["aten"]) for n in seen.ops] == [2, relu, 2]
        assert seen.losses == [] and seen.finished == 0
        assert result.recorded[0] is Seen
    if "count" in beside:  # the counting leader prices the same ops: 5*3*4 + 5*4*2 MACs
        assert result.nodes["_0"]["macs"] + result.nodes["_2"]["macs"] == 100


@pytest.mark.parametrize("lead", ["gradients", "memory"])
def test_a_recorder_sees_the_loss_and_every_backward_op(lead):
    model, program = _mlp()
    seen = Seen()
    leader = BackwardRecorder(program, None) if lead == "gradients" else MemoryRecorder(program)
    result = run_once(program, [seen, leader], default_loss)
    assert len(seen.losses) == 1 and seen.losses[0].dim() == 0 and seen.finished == 1
    # the input needs no gradient: the second linear's addmm gives its input's gradient and
    # its weight's (2 mm), the first only its weight's (1 mm)
    assert seen.backward_ops.count("aten.mm.default") == 3
    if lead == "gradients":
        assert result.nodes["_0"]["backward_macs"] == 5 * 3 * 4  # the first weight's gradient
    else:  # (weights 3*4+4 + 4*2+2 floats), a step after zero_grad(): the model's .grad left as they were
        assert result.report["memory"].gradients == (3 * 4 + 4 + 4 * 2 + 2) * 4
        assert all(p.grad is None for p in model.parameters())


def test_the_loss_is_worked_out_in_one_place():
    def mine(out):
        return out.sum()

    assert loss_for(False, mine) is None and loss_for(False) is None
    # the user's loss, wrapped only so that on a virtual run labels on meta stand for host ones
    assert loss_for(True) is default_loss and loss_for(True, mine).__wrapped__ is mine
    assert loss_for(True, mine)(torch.ones(2, 3)).item() == 6.0
