"""The backward pass: per-node backward costs, exact against FlopCounterMode (corrected
as in tests/reference.py), gradient shapes, and the model's gradients left alone."""

from __future__ import annotations

import pytest
import torch
import torchvision
from reference import reference_backward_flops

import fxinspect


def test_a_linear_layer_by_hand():
    model, x = torch.nn.Linear(3, 2), torch.randn(4, 3, requires_grad=True)
    report = fxinspect.analyze(model, x, timing=False, backward=True)
    (node,) = [n for n in report.nodes if n.is_op]
    # grad input: (4, 2) @ (2, 3); grad weight: (2, 4) @ (4, 3): 4*2*3 MACs each
    assert node.backward_macs == 2 * 4 * 2 * 3
    assert node.backward_flops == 2 * node.backward_macs + 4 * 2  # + the bias gradient: a sum over 4 rows of 2
    assert [g.shape for g in node.grad_outputs] == [(4, 2)]
    assert report.totals.backward_macs == report.modules[""].backward_macs == node.backward_macs


def _small_vit():
    return torchvision.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10
    )


MODELS = {
    # name: (model, input); grouped (depthwise) convolutions and CPU attention included
    "resnet18": (lambda: torchvision.models.resnet18(weights=None, num_classes=10), (2, 3, 64, 64)),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(weights=None, num_classes=10), (2, 3, 64, 64)),
    "small_vit": (_small_vit, (2, 3, 32, 32)),
}


@pytest.mark.parametrize("name", MODELS)
def test_backward_macs_equal_corrected_flop_counter_total_and_per_module(name):
    torch.manual_seed(0)
    make, shape = MODELS[name]
    model, x = make().train(), torch.randn(*shape)
    report = fxinspect.analyze(model, x, timing=False, backward=True)
    total, per_module = reference_backward_flops(model, (x,))
    assert 2 * report.totals.backward_macs == total
    assert per_module and {p: 2 * report.modules[p].backward_macs for p in per_module} == per_module
    assert report.totals.backward_macs == sum(n.backward_macs for n in report.nodes if n.is_op)
    for node in report.nodes:  # every gradient has the shape of the output it belongs to
        if node.grad_outputs:
            floating = [m for m in node.outputs if m.dtype.startswith(("float", "bfloat"))]
            assert [g.shape for g in node.grad_outputs] == [m.shape for m in floating], node.name


def test_the_models_gradients_and_state_are_left_as_they_were():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)).train()
    model[0].weight.grad = torch.ones(4, 4)  # a gradient the user already has
    running = model[1].running_mean.clone()
    fxinspect.analyze(model, torch.randn(8, 4), timing=False, backward=True)
    assert torch.equal(model[0].weight.grad, torch.ones(4, 4)) and model[2].weight.grad is None
    assert torch.equal(model[1].running_mean, running)


def test_a_custom_loss_and_no_backward_figures_without_a_backward():
    model, x = torch.nn.Linear(3, 2), torch.randn(4, 3)
    report = fxinspect.analyze(model, x, timing=False, backward=True, loss_fn=lambda out: out[:, 0].sum())
    (node,) = [n for n in report.nodes if n.is_op]
    assert node.backward_macs == 4 * 3 * 2  # the weight gradient only: x does not require grad
    plain = fxinspect.analyze(model, x, timing=False)
    assert plain.totals.backward_flops is None and all(n.backward_flops is None for n in plain.nodes)
    assert all(n.grad_outputs is None for n in plain.nodes)


def test_backward_without_anything_to_differentiate_is_an_input_error():
    model = torch.nn.Linear(3, 2).requires_grad_(False)
    with pytest.raises(fxinspect.InputError, match="requires grad"):
        fxinspect.analyze(model, torch.randn(4, 3), timing=False, backward=True)
    assert all(p.requires_grad is False for p in model.parameters())


def scaling_backward(name: str, factor: float) -> type:
    """A custom autograd Function: the identity forward (a copy), a backward that
    multiplies the gradient by ``factor`` (one multiply per element)."""

    def forward(ctx, x):
        return x.clone()

    def backward(ctx, grad):
        return grad * factor

    return type(
        name, (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    )


NaNInBackward = scaling_backward("NaNInBackward", float("nan"))
Doubled = scaling_backward("Doubled", 2.0)


class Net(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function
        self.fc1, self.fc2, self.fc3 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 2)

    def forward(self, x):
        x = self.fc2(torch.relu(self.fc1(x)))
        return self.fc3(torch.relu(self.function.apply(x)))


def test_a_nan_made_in_backward_is_traced_to_its_node():
    report = fxinspect.analyze(Net(NaNInBackward), torch.randn(3, 4), timing=False, backward=True)
    found = report.grad_nonfinite
    function = next(n for n in report.nodes if n.target.endswith("NaNInBackward.apply"))
    assert found.root_cause == function.name and str(found.kind) == "nan"
    assert all(m.stats.finite for m in found.inputs)  # the gradient reaching it was finite
    assert found.downstream == ("fc2", "relu", "fc1")  # what lies upstream of it, in backward order
    assert "grad non-finite" in str(report)
    clean = fxinspect.analyze(Net(Doubled), torch.randn(3, 4), timing=False, backward=True)
    assert clean.grad_nonfinite is None


def test_a_custom_function_keeps_its_own_backward():
    report = fxinspect.analyze(Net(Doubled), torch.randn(3, 4), timing=False, backward=True)
    (node,) = [n for n in report.nodes if n.target.endswith("Doubled.apply")]
    assert node.backward_flops == 3 * 8  # its backward: grad * 2, one multiply per element of (3, 8)
    assert node.flops == 0 and node.outputs[0].shape == (3, 8)  # its forward: a copy


def test_reading_large_gradients_is_not_counted_as_backward_work():
    # a (8, 64) output gradient has 512 elements: its statistics are reduced as it arrives
    model, x = torch.nn.Linear(64, 64), torch.randn(8, 64, requires_grad=True)
    report = fxinspect.analyze(model, x, timing=False, backward=True)
    (node,) = [n for n in report.nodes if n.is_op]
    macs = 8 * 64 * 64 + 64 * 8 * 64  # grad input (8, 64) @ (64, 64); grad weight (64, 8) @ (8, 64)
    assert node.backward_macs == macs
    assert node.backward_flops == 2 * macs + 8 * 64  # + the bias gradient: a sum of 8 rows of 64
    assert node.grad_outputs[0].stats is not None and node.grad_outputs[0].stats.finite


def test_backward_latency_per_node_adds_up_within_the_timed_backward():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    before = [p.detach().clone() for p in model.parameters()]
    r = fxinspect.analyze(model, torch.randn(32, 64), backward=True, warmup=1, repeats=3)
    t = r.timing
    ops = [n for n in r.nodes if n.is_op]
    assert all(n.backward_latency > 0 for n in ops)  # each made autograd nodes: each was timed
    assert all(n.latency_iqr is not None and n.latency_iqr >= 0 for n in ops) and t.plain_forward_iqr >= 0
    # the node times are medians of spans of the timed backwards, summed as declared (a sum of
    # medians is not bounded by the median of the sums: on a busy machine it can exceed it)
    assert t.backward_node_sum > 0 and t.backward > 0 and t.plain_backward > 0
    assert r.totals.backward_latency == pytest.approx(sum(n.backward_latency for n in ops))
    assert r.modules["0"].backward_latency == r.node("_0").backward_latency
    assert "bwd latency" in r.table() and "per backward" in str(r)
    assert all(p.grad is None for p in model.parameters())  # timing left no gradients behind
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))
    untimed = fxinspect.analyze(model, torch.randn(32, 64), backward=True, timing=False)
    assert untimed.totals.backward_latency is None and "bwd latency" not in untimed.table()


def test_throughput_of_the_forward_and_of_a_training_step_with_their_spread():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    t = fxinspect.analyze(model, torch.randn(32, 64), backward=True, warmup=1, repeats=7).timing
    assert t.plain_forward_p10 <= t.plain_forward <= t.plain_forward_p90
    assert t.training_step_p10 <= t.training_step <= t.training_step_p90
    # a step is its forward, loss and backward, each timed as the others are: above the backward alone
    assert t.training_step > t.plain_backward > 0
    assert t.inputs_per_second == pytest.approx(32 / t.plain_forward)  # the batch's 32 inputs
    assert t.training_inputs_per_second == pytest.approx(32 / t.training_step)
    forward_only = fxinspect.analyze(model, torch.randn(32, 64), warmup=1, repeats=3)
    assert forward_only.timing.training_step is None and forward_only.timing.training_inputs_per_second is None
    assert "inputs/s at batch 32" in forward_only.summary() and "training " not in forward_only.summary()
    back = fxinspect.Report.from_json(fxinspect.analyze(model, torch.randn(32, 64), backward=True, repeats=3).to_json())
    assert back.timing.training_step is not None and back.timing.training_step_p90 >= back.timing.training_step


class _SqrtAtZero(torch.nn.Module):
    """``sqrt`` of a ReLU's output: its backward divides by 2*sqrt(0) where the ReLU
    cut, turning finite gradients into Inf/NaN; another reader of the same tensor comes
    first or last in the forward, differentiable or not."""

    def __init__(self, form: str):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.form = form

    def forward(self, x):
        h = torch.relu(self.fc(x))
        if self.form == "where":  # a comparison reads h first, and makes no gradient
            return torch.where(h > 0, torch.sqrt(h), 0)
        if self.form == "mul first":  # a differentiable reader first, with finite gradients
            return h * 2 + torch.sqrt(h)
        return torch.sqrt(h) + h * 2


@pytest.mark.parametrize("form", ["where", "mul first", "sqrt first"])
def test_the_gradient_root_cause_is_the_backward_that_made_nan_whatever_the_statement_order(form):
    torch.manual_seed(0)
    model, x = _SqrtAtZero(form), torch.randn(8, 4)
    assert (torch.relu(model.fc(x)) == 0).any()  # some zeros for sqrt's backward to divide by
    r = fxinspect.analyze(model, x, backward=True, timing=False, memory=False)
    assert r.grad_nonfinite.root_cause == "sqrt" and r.grad_nonfinite.downstream[0] == "relu"
    with fxinspect.inspect(model) as ins:  # the same in your own step
        model(x).sum().backward()
    assert ins.report.grad_nonfinite.root_cause == "sqrt"


class Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn, self.head = torch.nn.LSTM(16, 32, batch_first=True), torch.nn.Linear(32, 5)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


def test_an_lstm_whose_final_states_get_no_gradient_in_every_tier():
    """The LSTM's aten op returns its final states too; nothing uses them, so autograd
    calls their hooks with no gradient (None), which the eager tier's backward read."""
    torch.manual_seed(0)
    model, x = Tagger().train(), torch.randn(4, 12, 16)
    eager = fxinspect.analyze(model, x, timing=False, backward=True, method="eager")
    symbolic = fxinspect.analyze(model, x, timing=False, backward=True, method="symbolic")
    _, per_module = reference_backward_flops(model, (x,))
    # the head's backward: grad input 48x5 @ 5x32 and grad weight 5x48 @ 48x32, 7680 MACs each
    assert 2 * eager.modules["head"].backward_macs == per_module["head"] == 2 * 2 * 7680
    # FlopCounterMode has no formula for the LSTM's backward: the symbolic tier is the truth
    for path in ("", "rnn", "head"):
        a, b = eager.modules[path], symbolic.modules[path]
        assert (a.backward_flops, a.backward_macs) == (b.backward_flops, b.backward_macs)
    assert eager.modules["rnn"].backward_macs > 0 and eager.grad_nonfinite is None
    (lstm,) = [n for n in eager.nodes if "rnn_layer" in n.target or "lstm" in n.target]
    assert lstm.grad_outputs[0].shape == (12, 4, 32)  # the output's gradient; the states' never came
