"""``fxinspect.inspect`` around the user's own training step."""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
import torchvision

import fxinspect


def _step(model, x, y, optimizer):
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def test_a_resnet18_training_step_counts_as_analyze_and_ends_as_without_fxinspect():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).train()
    twin = copy.deepcopy(model)
    x, y = torch.randn(2, 3, 224, 224), torch.tensor([3, 7])
    opt, twin_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)

    torch.manual_seed(1)
    with fxinspect.inspect(model) as ins:
        loss = _step(model, x, y, opt)
    torch.manual_seed(1)
    twin_loss = _step(twin, x, y, twin_opt)

    assert torch.equal(loss, twin_loss)
    for (name, p), q in zip(model.state_dict().items(), twin.state_dict().values()):
        assert torch.equal(p, q), name  # parameters after the step, running statistics too
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(model.parameters(), twin.parameters()))

    r = ins.report
    reference = fxinspect.analyze(
        twin,
        x,
        timing=False,
        memory=False,
        backward=True,
        loss_fn=lambda out: torch.nn.functional.cross_entropy(out, y),
    )
    assert (r.totals.flops, r.totals.macs) == (reference.totals.flops, reference.totals.macs)
    assert r.totals.backward_flops == reference.totals.backward_flops  # the loss's backward is outside the nodes
    assert r.totals.backward_macs == reference.totals.backward_macs > 0
    assert {m: r.modules[m].backward_flops for m in r.modules} == {
        m: reference.modules[m].backward_flops for m in reference.modules
    }
    assert r.node("fc").grad_outputs[0].shape == (2, 1000)
    assert any(c.op.startswith("aten._log_softmax") for c in r.unattributed)  # the user's loss: listed apart
    assert "forward" not in vars(model)  # the patch is gone


def test_nothing_called_or_an_error_inside_the_block():
    model = torch.nn.Linear(4, 2)
    with fxinspect.inspect(model) as ins:
        pass
    with pytest.raises(fxinspect.InputError, match="not called inside"):
        _ = ins.report
    assert "forward" not in vars(model)
    with pytest.raises(ZeroDivisionError):  # the user's own exception, as theirs
        with fxinspect.inspect(model) as ins:
            model(torch.randn(3, 4)).sum().backward()
            _ = 1 / 0
    assert "forward" not in vars(model) and model(torch.ones(1, 4)).shape == (1, 2)
    assert torch._C._len_torch_dispatch_stack() == 0  # the counting mode is off again


def test_only_a_forward_gives_no_backward_figures():
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    with torch.no_grad(), fxinspect.inspect(model) as ins:
        out = model(torch.randn(2, 8))
    assert out.shape == (2, 4) and ins.report.totals.macs == 2 * 8 * 4
    assert ins.report.totals.backward_flops is None


def test_a_second_call_in_the_block_runs_the_model_as_usual_hooks_once():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    calls = []
    # (symbolic capture runs the hook once more, on a Proxy: only tensors are the user's calls)
    handle = model.register_forward_hook(
        lambda m, a, out: calls.append(out.shape) if isinstance(out, torch.Tensor) else None
    )
    x = torch.randn(2, 4)
    with fxinspect.inspect(model) as ins:
        first, second = model(x), model(x)
    handle.remove()
    assert torch.equal(first, second) and calls == [(2, 3), (2, 3)]  # each call's hooks ran once
    assert ins.report.totals.macs == 2 * 4 * 3  # the first call only: 2*4*3


def _lazy_net() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.LazyConv2d(4, 3),
        torch.nn.LazyBatchNorm2d(),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.LazyLinear(5),
    ).train()


def test_a_lazy_model_is_materialised_by_its_first_call_inside_inspect_as_without_fxinspect():
    torch.manual_seed(0)
    model, twin, reference = _lazy_net(), _lazy_net(), _lazy_net()
    twin.load_state_dict(model.state_dict())
    reference.load_state_dict(model.state_dict())
    x, y = torch.randn(2, 3, 6, 6), torch.tensor([1, 4])

    def step(m):  # the user's step, with an optimizer made before the first call
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    torch.manual_seed(1)
    with fxinspect.inspect(model) as ins:
        loss = step(model)
    after_inspect = torch.get_rng_state()
    torch.manual_seed(1)
    twin_loss = step(twin)

    # the user's model ends as the same step without fxinspect leaves it: materialised by
    # that call (same classes, same drawn initial values), stepped, the RNG where it was
    assert [type(m) for m in model.modules()] == [type(m) for m in twin.modules()]
    assert type(model[0]) is torch.nn.Conv2d and type(model[4]) is torch.nn.Linear
    assert torch.equal(loss, twin_loss) and torch.equal(after_inspect, torch.get_rng_state())
    for (name, p), q in zip(model.state_dict().items(), twin.state_dict().values()):
        assert torch.equal(p, q), name
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(model.parameters(), twin.parameters()))
    assert not model._forward_pre_hooks and not model[0]._forward_pre_hooks  # the lazy hooks are gone
    assert any("materialised in your model" in note for note in ins.report.capture.notes)

    # ... and the report is analyze's on the materialised model
    with torch.no_grad():
        reference(x)  # materialise it (its values do not change a count)
    expected = fxinspect.analyze(
        reference,
        x,
        timing=False,
        memory=False,
        backward=True,
        loss_fn=lambda out: torch.nn.functional.cross_entropy(out, y),
    )
    r = ins.report
    figures = ("flops", "macs", "bytes_read", "bytes_written", "backward_flops", "backward_macs", "params")
    assert {p: [getattr(r.modules[p], f) for f in figures] for p in r.modules} == {
        p: [getattr(expected.modules[p], f) for f in figures] for p in expected.modules
    }
    shapes = [(n.name, [(t.shape, t.dtype) for t in n.outputs]) for n in r.nodes]
    assert shapes == [(n.name, [(t.shape, t.dtype) for t in n.outputs]) for n in expected.nodes]
    assert r.modules["4"].macs == 2 * 4 * 4 * 4 * 5  # batch 2, 4*4*4 features in, 5 out


def test_the_loss_and_its_backward_are_listed_outside_the_nodes_and_the_totals_add_up():
    from fxinspect.run.dispatch import CountingMode

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    with fxinspect.inspect(model) as ins:
        ((model(x) - y) ** 2).mean().backward()
    r = ins.report
    outside = {c.op: c.flops for c in r.unattributed}
    # the loss's forward on 16 outputs: a subtraction, a square, a mean, 16 FLOPs each
    assert outside == {"aten.sub.Tensor": 16, "aten.pow.Tensor_Scalar": 16, "aten.mean.default": 16,
                       "aten.ones_like.default": 0}  # fmt: skip
    backward_outside = {c.op for c in r.backward_unattributed}
    assert {"aten.expand.default", "aten.div.Scalar", "aten.pow.Tensor_Scalar"} <= backward_outside
    summary = str(r)
    assert "outside fwd" in summary and "outside bwd" in summary

    # nothing dropped: the nodes' totals plus what ran outside them equal every op of the
    # same step counted at once (the same rules, no attribution)
    model.zero_grad(set_to_none=True)
    whole = CountingMode()
    with whole:
        ((model(x) - y) ** 2).mean().backward()
    everything = sum(c.flops for costs in whole.costs.values() for c in costs.values())
    listed = sum(c.flops for c in (*r.unattributed, *r.backward_unattributed))
    assert r.totals.flops + r.totals.backward_flops + listed == everything
    assert r.totals.flops == 2 * 16 * (8 * 4 + 4 * 1) + 16 * 4 + 16 * 1 + 16 * 4  # matmuls, bias adds, relu


class _Counters(torch.nn.Module):
    """Buffers updated in place from nothing the input makes: a step counter, an EMA."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("ema", torch.zeros(4))

    def forward(self, x):
        self.steps.add_(1)
        self.ema.mul_(0.9).add_(self.fc.weight.detach().mean(0), alpha=0.1)
        return self.fc(x)


@pytest.mark.parametrize("make", ["counters", "efficientnet_b0"])
def test_a_step_inside_inspect_ends_with_the_models_own_buffer_writes(make):
    import timm

    torch.manual_seed(0)
    if make == "counters":
        mine, x = _Counters().train(), torch.randn(2, 4)
    else:  # timm's BatchNormAct2d counts its batches in its own forward, traced through
        mine, x = timm.create_model("efficientnet_b0", pretrained=False).train(), torch.randn(2, 3, 32, 32)
    theirs = copy.deepcopy(mine)
    for model, inspected in ((mine, False), (theirs, True)):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        with fxinspect.inspect(model) if inspected else contextlib.nullcontext():
            model(x).sum().backward()
            optimizer.step()
    for (name, a), (_, b) in zip(mine.state_dict().items(), theirs.state_dict().items()):
        assert torch.equal(a, b), name
    if make == "counters":
        assert int(theirs.steps) == 1  # written once, as the plain call wrote it
    # analyze still leaves the model as it was, and counts the buffers' writes (traced, not run while tracing)
    before = copy.deepcopy(theirs.state_dict())
    report = fxinspect.analyze(theirs, x, timing=False, memory=False)
    assert all(torch.equal(before[k], v) for k, v in theirs.state_dict().items())
    assert not any("buffers written while tracing" in n for n in report.capture.notes)
    written = {}
    for call in (c for n in report.nodes for c in n.aten if c.op in ("aten.add_.Tensor", "aten.mul_.Tensor")):
        calls, nbytes = written.get(call.op, (0, 0))
        written[call.op] = (calls + call.calls, nbytes + call.bytes_written)
    if make == "counters":  # steps += 1: one int64; ema *= 0.9, then += ...: 4 floats each
        assert written == {"aten.add_.Tensor": (2, 8 + 4 * 4), "aten.mul_.Tensor": (1, 4 * 4)}
    else:  # each BatchNormAct2d adds 1 to its int64 num_batches_tracked
        norms = sum(1 for m in theirs.modules() if type(m).__name__ == "BatchNormAct2d")
        assert norms == 49 and written["aten.add_.Tensor"] == (norms, 8 * norms)


class _AuxInner(torch.nn.Module):
    """A block that keeps an auxiliary loss and its input on itself, as MoE routers do."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        self.seen = x  # an input of the graph, not an op's output
        y = self.fc(x)
        self.aux_loss = y.pow(2).mean()
        self.losses = []  # a new list each call, filled below
        self.losses.append({"max": y.amax(), "inputs": (x, self.fc.weight)})
        return y


class _Aux(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block, self.head = _AuxInner(), torch.nn.Linear(4, 2)
        self.aux_loss = None  # rebound by every forward

    def forward(self, x):
        y = self.block(x)
        self.aux_loss = y.abs().mean()
        self.head.scale = y.std()  # set on a leaf module it did not run in
        return self.head(y)


@pytest.mark.parametrize("method", ["symbolic", "export", "eager"])
def test_the_step_reads_what_the_forward_set_on_self_and_the_model_ends_as_a_plain_step_leaves_it(method):
    torch.manual_seed(0)
    mine, x = _Aux(), torch.randn(3, 4)
    theirs = copy.deepcopy(mine)
    for model, inspected in ((mine, False), (theirs, True)):
        with fxinspect.inspect(model, method=method) if inspected else contextlib.nullcontext() as ins:
            out = model(x)
            (out.sum() + model.aux_loss + model.block.aux_loss + model.head.scale).backward()
    assert ins.report.capture.method == method
    for (path, a), b in zip(mine.named_modules(), theirs.modules()):
        assert sorted(vars(a)) == sorted(vars(b)), path  # the same attributes as the plain step left
        for key in ("aux_loss", "scale", "losses"):
            if key in vars(a):
                mine_leaves, spec = torch.utils._pytree.tree_flatten(vars(a)[key])
                their_leaves, their_spec = torch.utils._pytree.tree_flatten(vars(b)[key])
                assert spec == their_spec and all(map(torch.equal, mine_leaves, their_leaves)), (path, key)
    # the input and the weight themselves, as the plain forward bound them
    assert theirs.block.seen is x and theirs.block.losses[0]["inputs"][1] is theirs.block.fc.weight
    for (name, p), q in zip(mine.named_parameters(), theirs.parameters()):
        assert torch.equal(p.grad, q.grad), name  # the aux losses' backward reached the weights
    # their ops ran in the program, as the model's: the user's step adds and sums only
    assert not any("pow" in c.op or "std" in c.op for c in ins.report.unattributed)
    # analyze runs the forward on its own: nothing it set outlives it
    fresh = _Aux()
    fxinspect.analyze(fresh, x, method=method, timing=False, memory=False)
    assert fresh.aux_loss is None and "aux_loss" not in vars(fresh.block) and "scale" not in vars(fresh.head)


class _Counted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.calls, self.history = torch.nn.Linear(4, 2), 0, []

    def forward(self, x):
        self.calls += 1  # a Python number: no node of the graph computes it
        self.history.append(x.mean())  # a list changed in place, not bound
        return self.fc(x)


@pytest.mark.parametrize("method", ["symbolic", "export", "eager"])
def test_an_attribute_the_program_does_not_compute_is_named_in_the_notes(method):
    model = _Counted()
    with fxinspect.inspect(model, method=method) as ins:
        model(torch.randn(3, 4)).sum().backward()
    assert model.calls == 0 and model.history == []  # the capture's calls are undone; the program cannot redo them
    assert any("does not compute (calls, history)" in n for n in ins.report.capture.notes)
