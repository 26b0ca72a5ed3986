"""The storage tracker's bookkeeping (every free in order where it happened, none after the
run) and what a process pays to run it: no ``torch._dynamo`` import unless the run may need it."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import fxinspect
from fxinspect.run.lazy_dynamo import may_reach_dynamo
from fxinspect.run.memory.storages import StorageTracker

F32 = 4


def test_every_free_enters_the_timeline_where_it_happened_and_none_after_the_run():
    torch.manual_seed(0)
    fc1, relu, fc2 = torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)
    x = torch.randn(2, 4)
    params = [*fc1.parameters(), *fc2.parameters()]
    tracker = StorageTracker([*params, x], import_dynamo=False)
    hidden, out = 2 * 8 * F32, 2 * 2 * F32  # 64 and 16 bytes
    with torch.no_grad(), tracker:
        tracker.node = "fc1"
        h = fc1(x)  # + 64: 64
        tracker.node = "relu"
        r = relu(h)  # + 64: 128, the peak
        del h  # - 64: 64 (freed between two ops)
        tracker.node = "fc2"
        y = fc2(r)  # + 16: 80
        del r  # - 64: 16
        assert tracker.live == out
    assert [live for _, live in tracker.timeline] == [0, hidden, 2 * hidden, hidden, hidden + out, out]
    assert (tracker.events, tracker.peak, tracker.peak_node) == (5, 2 * hidden, "relu")
    assert [(e.node, e.nbytes, e.born, e.died) for e in tracker.allocations] == [
        ("fc1", hidden, 1, 3),
        ("relu", hidden, 2, 5),
        ("fc2", out, 4, None),
    ]
    assert [e.node for e in tracker.alive_at_peak()] == ["fc1", "relu"]
    assert tracker.allocation(y).node == "fc2" and tracker.allocation(x) is None  # (x: resident)
    # each event at the op count when it happened (2 ops per Linear: the weight's transpose
    # and addmm; relu 1)
    ops = [op for op, _ in tracker.timeline]
    assert ops == [0, 2, 3, 3, 5, 5] and tracker.ops == 5
    tracker.stop()
    del y  # dropped after the run: not the run's memory
    assert [live for _, live in tracker.timeline][-1] == out and tracker.live == out and tracker.events == 5


_MODELS = {
    "layers": "torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))",
    "leaf": "Leaf()",
}
_DEFINE = """
class Leaf(torch.nn.Module):
    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(torch.relu, x, use_reentrant=False)
"""


@pytest.mark.parametrize(
    ("model", "options", "expected"),
    [
        ("layers", {}, False),
        ("layers", {"backward": True}, False),
        ("layers", {"backward": True, "loss_fn": lambda y: y.square().sum()}, True),  # the user's code
        ("leaf", {"leaf_modules": ["Leaf"]}, True),  # a module of the user's, run as one node
        ("layers", {"device": "meta"}, True),  # fake tensors' dispatch is guarded
    ],
)
def test_which_runs_may_reach_torch_code_guarded_against_dynamo(model, options, expected):
    namespace = {"torch": torch}
    exec(_DEFINE, namespace)
    made = eval(_MODELS[model], namespace)
    leaves = [namespace[c] for c in options.pop("leaf_modules", [])]
    loss_fn = options.pop("loss_fn", None)
    if options.pop("device", None) == "meta":
        made = made.to("meta")
    x = torch.randn(2, 4, device=next(made.parameters(), torch.empty(0)).device)
    program = fxinspect.instrument(made, x, leaf_modules=leaves)
    default = None if loss_fn is None else loss_fn
    assert may_reach_dynamo(program, default) is expected


def test_a_layer_with_a_hook_may_reach_dynamo():
    model = torch.nn.Sequential(torch.nn.Linear(4, 2))
    program = fxinspect.instrument(model, torch.randn(1, 4))
    assert may_reach_dynamo(program) is False
    handle = model[0].register_forward_hook(lambda m, i, o: None)  # (the user's code runs in the node)
    try:
        assert may_reach_dynamo(program) is True
    finally:
        handle.remove()


_FIRST_ANALYSIS = """
import sys, torch, fxinspect
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
r = fxinspect.analyze(model, torch.randn(2, 8), method="symbolic", backward=True)
print(r.capture.method, "torch._dynamo" in sys.modules, r.memory.held_after_backward)
"""


def test_import_and_a_symbolic_analysis_do_not_import_torch_dynamo():
    """torch._dynamo costs about 2 s to import: a symbolic capture, its counting run with the
    memory model, the backward and the timing passes of torch's own layers need none of it."""
    done = subprocess.run([sys.executable, "-c", _FIRST_ANALYSIS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # held after the backward: the output 2x2 and the loss (4 B), the gradients of
    # 8*32+32 + 32*2+2 weights (4 B each): 16 + 4 + 1416 bytes
    assert done.stdout.split() == ["symbolic", "False", "1436"]


_FIRST_AND_SECOND_CHECKPOINTED = """
import sys, torch, fxinspect
from torch.utils.checkpoint import checkpoint
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
    def forward(self, x):
        return checkpoint(lambda t: torch.relu(self.fc(t)), x, use_reentrant=False)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), Block(), torch.nn.Linear(8, 2))
runs = [fxinspect.analyze(model, torch.randn(2, 8), method="symbolic", leaf_modules=[Block], backward=True, timing=False).memory for _ in range(2)]
print("torch._dynamo" in sys.modules, runs[0].timeline == runs[1].timeline, runs[0].held_after_backward == runs[1].held_after_backward)
"""


def test_a_first_run_that_reaches_guarded_code_imports_dynamo_before_it():
    """torch.utils.checkpoint is guarded against dynamo: the memory model imports it before
    the run, where its import would keep the run's frames (and their tensors) alive."""
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_AND_SECOND_CHECKPOINTED], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]
