"""``analyze`` inside ``torch.autocast``: the weights' low-precision copies autocast caches
are in the estimate, and the analysis leaves the cache as a fresh region has it."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import fxinspect
from fxinspect.records.memory import Phase
from fxinspect.run.memory.allocator import AllocatorWatch
from fxinspect.run.passes.timing import TimingPass

ON_CPU = pytest.mark.skipif(torch.cuda.is_available(), reason="the allocator figures here are the CPU's")
BF16 = 2


def _mlp() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(512, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 10),
    )


def _eager_peak(model: torch.nn.Module, x: torch.Tensor, training: bool) -> int:
    """The allocator's peak growth over the model's own call (and backward), in the
    autocast region the caller is in."""
    watch = AllocatorWatch(torch.device("cpu"))
    with watch:
        out = model(x)
        if training:
            watch.begin_backward()
            out.float().sum().backward()
        del out
    for p in model.parameters():
        p.grad = None
    return watch.peak


@ON_CPU
@pytest.mark.parametrize("method", ["symbolic", "export", "eager"])
@pytest.mark.parametrize("training", [False, True], ids=["forward (no_grad)", "training"])
def test_autocasts_cached_weights_are_estimated_and_the_cache_is_left_cold(training, method):
    model, x = _mlp(), torch.randn(8, 512)
    grad = torch.enable_grad() if training else torch.no_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16), grad:
        fresh = _eager_peak(model, x, training)  # the truth: a call in a region of its own
    with torch.autocast("cpu", dtype=torch.bfloat16), grad:
        m = fxinspect.analyze(model, x, method=method, timing=False, backward=training, measure_memory=True).memory
        after = _eager_peak(model, x, training)  # the user's next call, in the same region
    # the analysis cast nothing for the user's code, and measured the model as a fresh call
    assert after == m.measured_eager_peak == fresh
    # every weight and bias is cast once to bfloat16 and cached until the run ends:
    # (512*1024 + 1024 + 1024*1024 + 1024 + 1024*10 + 10) * 2 bytes = 3,170,324
    cast = sum(t.nbytes for t in m.alive_at_peak if _is_a_cast_parameter(t, model))
    assert cast == (512 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10) * BF16 == 3_170_324
    # (the rest of the gap is the bfloat16 matmul's scratch, which the tensor model does not see)
    assert abs(m.peak / fresh - 1) < 0.03


def _is_a_cast_parameter(t, model) -> bool:
    """A bfloat16 tensor the forward of a Linear made with one of its parameters' shapes."""
    layer = model.get_submodule(t.module_path) if t.module_path else None
    shapes = {tuple(p.shape) for p in layer.parameters()} if isinstance(layer, torch.nn.Linear) else set()
    return t.phase is Phase.FORWARD and t.dtype == "torch.bfloat16" and tuple(t.shape) in shapes


class _CastsOfParameters(TorchDispatchMode):
    """Counts the casts of the given tensors (autocast's, made below it as ``_to_copy``)."""

    def __init__(self, params):
        super().__init__()
        self.ids, self.casts = {id(p) for p in params}, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._to_copy.default and id(args[0]) in self.ids:
            self.casts += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "training step"])
def test_each_timed_run_casts_the_weights_as_a_step_in_its_own_region_does(backward):
    model, x = torch.nn.Linear(8, 8), torch.randn(2, 8)  # weight and bias: two casts a run
    program = fxinspect.instrument(model, x)
    counter = _CastsOfParameters(list(model.parameters()))
    with torch.autocast("cpu", dtype=torch.bfloat16), counter:
        TimingPass(warmup=2, repeats=3, backward=backward).run(program)
    # the forward's warm-up runs share one region's casts (2); each of its 3 repeats runs
    # the plain and the timed program, each cold: 3 * 2 runs of 2 casts. The backward's
    # steps (plain and timed, in its 2 warm-ups and 3 repeats) are each cold: 5 * 2 more
    steps = 5 * 2 if backward else 0
    assert counter.casts == 2 + 2 * (3 * 2) + 2 * steps
