"""``watch`` does each thing once: what a logged step gathers, and what the steps between cost."""

from __future__ import annotations

import copy

import pytest
import torch
from reference import count_binned
from torch.utils._python_dispatch import TorchDispatchMode

import fxinspect
from fxinspect.training.binning import SmallBatch, log2_histogram
from fxinspect.training.checks import EVERY, HELD, FiniteChecks
from fxinspect.training.fingerprints import ParameterSamples


class _Ops(TorchDispatchMode):
    """The aten ops run inside the block, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def _step(model, x, opt):
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()


@pytest.mark.parametrize("width", [8, HELD + 1], ids=["small output", "large output"])
def test_a_step_between_logged_ones_runs_no_op_but_a_detach_unless_its_output_is_large(width):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, width))
    twin = copy.deepcopy(model)
    x = torch.randn(1, 4)
    watcher = fxinspect.watch(model, every=10)
    runs = []
    for m in (model, twin):
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        _step(m, x, opt)  # step 0: logged
        with _Ops() as ops:
            _step(m, x, opt)  # step 1: not logged
        runs.append(ops.names)
    watcher.remove()
    watched, plain = runs
    extra = list(watched)
    for name in plain:
        extra.remove(name)
    if width <= HELD:  # the output held (detached, not to hold its graph), its gradient held as it is
        assert extra == ["aten.detach.default"]
    else:  # 1 x (HELD + 1) values: summed as they come, the output and its gradient
        assert sorted(extra) == ["aten.detach.default", "aten.sum.default", "aten.sum.default"]
    assert watcher.checks.nonfinite() == []


def test_held_and_summed_checks_find_each_nan_at_its_exact_step_and_place():
    checks = FiniteChecks()
    bad = {
        37: ("small", "output"),
        150: ("large", "output"),
        90: ("small", "output gradient"),
        3: ("large", "output gradient"),
    }
    for step in range(2 * EVERY + 70):  # the held ones checked every EVERY tensors, the rest when asked
        for size in ("small", "large"):
            x = torch.ones(4 if size == "small" else HELD + 5, requires_grad=True)
            out = x * 2
            if bad.get(step) == (size, "output"):
                out.data[1] = float("nan")  # (through .data: the graph does not see it)
            checks.output(step, out)
            seed = torch.ones_like(out)
            if bad.get(step) == (size, "output gradient"):
                seed[-1] = float("inf")
            out.backward(seed)
    assert checks.nonfinite() == [(3, "output gradient"), (37, "output"), (90, "output gradient"), (150, "output")]


def test_small_batches_count_zeros_only_where_they_are():
    """The zeros share the lowest field with the subnormals: they are counted apart only
    when a tensor of the batch has values there, and each tensor gets its own."""
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        torch.manual_seed(0)
        plain = torch.randn(50, dtype=dtype) + 8.0  # no zero, no subnormal
        zeros = torch.tensor([0.0, -0.0, 0.0, 1.0, -2.0, torch.finfo(dtype).tiny / 4], dtype=dtype)
        other = -torch.rand(30, dtype=dtype) - 0.5
        for tensors in ([plain, other], [plain, zeros, other]):
            batch = SmallBatch()
            entries = [batch.add(t, copy=False) for t in tensors]
            batch.bin()
            for t, entry in zip(tensors, entries):
                found = entry.read()
                assert found == log2_histogram(t)
                assert found.zeros == int((t == 0).sum())  # 3 in zeros (-0.0 is a zero), 0 elsewhere


def _grads(*params):
    return torch.cat([p.grad.reshape(-1).clone() for p in params])


def test_parameter_gradients_are_logged_as_the_backward_ends_before_a_clipping():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    watcher = fxinspect.watch(model, every=1, log=("params_grad",))
    model(torch.randn(16, 4)).pow(2).sum().backward()
    unclipped = _grads(model[0].weight, model[0].bias)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)  # written in place, after the backward
    watcher.remove()
    logged = watcher.histogram("0", "params_grad", 0)
    assert logged == log2_histogram(unclipped) != log2_histogram(_grads(model[0].weight, model[0].bias))


class _Branches(torch.nn.Module):
    """``a`` is trained; ``b`` runs but its output is detached: no gradient reaches it."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)

    def forward(self, x, use_b=True):
        return self.a(x) + (self.b(x) if use_b else self.b(x).detach())


def test_a_gradient_the_backward_did_not_write_is_not_logged():
    torch.manual_seed(0)
    model = _Branches()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    watcher = fxinspect.watch(model, every=1, log=("params_grad",))
    for use_b in (True, False, True):
        opt.zero_grad(set_to_none=False)  # b's gradient stays, as zeros, where step 1 writes none
        model(torch.randn(8, 4), use_b).sum().backward()
        opt.step()
    watcher.remove()
    assert watcher.steps("a", "params_grad") == [0, 1, 2]
    assert watcher.steps("b", "params_grad") == [0, 2]


class _Twice(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = torch.nn.Linear(5, 5)

    def forward(self, x):
        return self.shared(torch.relu(self.shared(x)))


def test_a_module_called_twice_logs_its_parameters_once_and_both_outputs():
    model = _Twice()
    x = torch.randn(3, 5)
    watcher = fxinspect.watch(model, every=1)
    model(x).sum().backward()
    watcher.remove()
    assert watcher.histogram("shared", "params", 0).total == 5 * 5 + 5  # once, not per call
    assert watcher.histogram("shared", "params_grad", 0).total == 5 * 5 + 5
    assert watcher.histogram("shared", "io", 0).total == 2 * 3 * 5  # both calls' outputs
    assert watcher.histogram("shared", "io_grad", 0).total == 2 * 3  # a norm per sample, per call


def test_a_second_backward_in_a_step_logs_the_gradients_as_they_end():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    watcher = fxinspect.watch(model, every=1, log=("params_grad",))
    out = model(torch.randn(6, 4))
    out.sum().backward(retain_graph=True)
    out.pow(3).sum().backward()  # accumulated into the same gradients
    watcher.remove()
    total = _grads(model[0].weight, model[0].bias)
    assert watcher.histogram("0", "params_grad", 0) == log2_histogram(total)  # not the first's merged in


def test_parameter_samples_compare_each_module_with_its_own_last_logged_step():
    one = torch.nn.Parameter(torch.ones(3))  # a module of one small parameter: its sample is a copy
    big = torch.nn.Parameter(torch.randn(10_000))
    samples = ParameterSamples()
    assert samples.fingerprints(0, {"one": [one], "big": [big]}) == {
        "one": "first logged at step 0",
        "big": "first logged at step 0",
    }
    with torch.no_grad():
        one.add_(1.0)
    assert samples.fingerprints(1, {"one": [one]}) == {"one": "changed by step 1"}  # big did not run
    found = samples.fingerprints(2, {"one": [one], "big": [big]})  # neither changed since its last
    assert found == {"one": 6.0, "big": pytest.approx(float(big.detach().abs().double().sum()))}
    with torch.no_grad():
        big[2].add_(1.0)  # inside the strided sample (every other value: 10,000 // 4,096 = 2)
    assert samples.fingerprints(3, {"one": [one], "big": [big]})["big"] == "changed by step 3"
    with torch.no_grad():
        big[1].add_(1.0)  # outside it: the sample is unchanged, the sum of |p| tells
    before = samples.fingerprints(4, {"big": [big]})["big"]
    with torch.no_grad():
        big[3].add_(1.0)
    after = samples.fingerprints(5, {"big": [big]})["big"]
    assert isinstance(before, float) and isinstance(after, float) and after != before


def test_a_gradient_several_modules_hold_is_normed_once(monkeypatch):
    binned = count_binned(monkeypatch)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(inplace=True))
    with torch.no_grad():
        model[0].bias.fill_(-100.0)  # every output negative: the ReLU passes no gradient back
    watcher = fxinspect.watch(model, every=1, log=("io_grad",))
    model(torch.randn(5, 4)).sum().backward()
    watcher.remove()
    # the ReLU wrote the layer's output in place: the layer's gradient (before the ReLU) and
    # the ReLU's (after it, the model's output too): two norms of 5 samples, not three
    assert binned == [5, 5]
    assert watcher.histogram("", "io_grad", 0) == watcher.histogram("1", "io_grad", 0)
    assert watcher.histogram("0", "io_grad", 0).zeros == 5 and watcher.histogram("1", "io_grad", 0).zeros == 0


class _WithAside(torch.nn.Module):
    """``aside`` is not called by the forward: the loop calls it after, in the same step."""

    def __init__(self):
        super().__init__()
        self.body, self.aside = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.body(x)


def test_a_module_called_outside_the_forward_logs_its_parameters_once():
    model = _WithAside()
    watcher = fxinspect.watch(model, every=1, log=("params", "params_grad"))
    out = model(torch.randn(3, 4))
    (out.sum() + model.aside(out).sum()).backward()  # aside's parameters binned as it runs
    watcher.remove()
    assert watcher.histogram("aside", "params", 0).total == 4 * 2 + 2  # not again as the backward ends
    assert watcher.histogram("aside", "params_grad", 0).total == 4 * 2 + 2
    assert watcher.histogram("body", "params", 0).total == 4 * 4 + 4


def test_an_output_that_views_a_larger_tensor_is_summed_not_held():
    checks = FiniteChecks()
    big = torch.zeros(4 * HELD)
    big[3] = float("nan")
    checks.output(0, big[:8])  # a view: holding it would hold all of big
    checks.output(1, torch.ones(8))  # held
    assert [t.numel() for _, _, t in checks._held] == [8]
    assert checks.nonfinite() == [(0, "output")]
