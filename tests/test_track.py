"""``fxinspect.track``: module outputs and their gradients, as plain hooks see them."""

from __future__ import annotations

import copy
import types

import pytest
import torch
import torchvision

import fxinspect


def _out_of_place_block(self, x):
    out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
    identity = self.downsample(x) if self.downsample is not None else x
    return self.relu(out + identity)  # torchvision's block writes `out += identity` in place


def test_resnet18_layer1_outputs_and_gradients_equal_what_module_hooks_see():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).train()
    reference = copy.deepcopy(model)
    # full backward hooks refuse in-place ops: the reference computes the same values without them
    for m in reference.modules():
        if isinstance(m, torch.nn.ReLU):
            m.inplace = False
        if isinstance(m, torchvision.models.resnet.BasicBlock):
            m.forward = types.MethodType(_out_of_place_block, m)
    x = torch.randn(2, 3, 64, 64)

    seen_out, seen_grad, calls = [], {}, {}
    for name, m in reference.named_modules():
        if "layer1" in name:

            def forward_hook(mod, args, out, name=name):
                call = calls[name] = calls.get(name, -1) + 1
                seen_out.append((name, call, out.detach().clone()))

            def backward_hook(mod, grad_in, grad_out, name=name):
                key = (name, sum(1 for k in seen_grad if k[0] == name))
                seen_grad[key] = grad_out[0].detach().clone()

            m.register_forward_hook(forward_hook)
            m.register_full_backward_hook(backward_hook)
    torch.manual_seed(1)
    reference(x).sum().backward()

    torch.manual_seed(1)
    with fxinspect.track(model, include=r"layer1") as tracker:
        model(x).sum().backward()

    outputs = [s for s in tracker.stashes if s.kind == "output"]
    assert [(s.name, s.call) for s in outputs] == [(n, c) for n, c, _ in seen_out]  # the same calls, in order
    assert all(torch.equal(s.value, v) for s, (_, _, v) in zip(outputs, seen_out))
    grads = {(s.name, s.call): s.value for s in tracker.stashes if s.kind == "grad"}
    # backward hooks count calls in backward order: the last forward call is the first one back
    by_name: dict[str, list] = {}
    for (name, _call), value in sorted(grads.items()):
        by_name.setdefault(name, []).append(value)
    for (name, back), value in seen_grad.items():
        assert torch.allclose(by_name[name][len(by_name[name]) - 1 - back], value), (name, back)
    assert len(grads) == len(seen_grad)
    assert {s.name for s in tracker.stashes} == {n for n, _, _ in seen_out}  # layer1 only
    assert not model._forward_hooks and not model.layer1[0]._forward_hooks  # all hooks removed


def test_stash_value_custom_stash_steps_and_frame():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(inplace=True))
    tracker = fxinspect.track(model, include=r"^\d$", stash_value=lambda t: float(t.std())).register()
    for _ in range(2):
        model(torch.randn(3, 4)).sum().backward()
    tracker.remove()
    model(torch.randn(3, 4))  # not tracked any more
    assert [(s.name, s.kind, s.step) for s in tracker.stashes] == [
        ("0", "output", 0),
        ("1", "output", 0),
        ("1", "grad", 0),
        ("0", "grad", 0),
        ("0", "output", 1),
        ("1", "output", 1),
        ("1", "grad", 1),
        ("0", "grad", 1),
    ]
    assert all(isinstance(s.value, float) for s in tracker.stashes)
    frame = tracker.to_frame()
    assert list(frame.columns) == ["name", "type", "kind", "step", "call", "value"] and len(frame) == 8
    events = fxinspect.track(model, include="0", grad=False, stash=lambda e: e.args[0].shape)
    with events:
        model(torch.randn(5, 4))
    assert [s.value for s in events.stashes] == [torch.Size([5, 4])]
    with pytest.raises(fxinspect.InputError, match="regular expression"):
        fxinspect.track(model, include="(")


def test_op_level_stashes_through_the_instrumented_program():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = torch.relu(self.fc(x))
            return (h * 2 + x).sum(dim=1)

    model = Net()
    x = torch.randn(3, 4)
    expected = torch.relu(model.fc(x)) * 2
    with fxinspect.track(model, include=r"^(relu|mul)$", ops=True) as tracker:
        out = model(x)
        out.sum().backward()
    assert torch.equal(out, (expected + x).sum(dim=1))  # the program answered the call, unchanged
    assert [(s.name, s.type, s.kind) for s in tracker.stashes] == [
        ("relu", "relu", "output"),
        ("mul", "mul", "output"),
        ("mul", "mul", "grad"),
        ("relu", "relu", "grad"),
    ]
    assert torch.equal(tracker.stashes[1].value, expected)
    assert torch.equal(tracker.stashes[3].value, torch.full((3, 4), 2.0))  # d(sum(2h + x))/dh
    assert model.fc.weight.grad is not None and "forward" not in vars(model)  # the user's gradients; unpatched
