"""A custom ``torch.autograd.Function`` keeps its own backward, or no backward is run.

The export and eager tiers trace through such a Function (export differentiates its
forward's ops; eager records them with grad off), so their programs compute the model's
values with other gradients. A backward is never run on such a capture: ``auto`` takes
one that keeps the Function, a forced tier raises, a forward-only analysis notes it.
"""

from __future__ import annotations

import copy

import pytest
import torch
from test_backward import Doubled, Net

import fxinspect
from fxinspect.errors import CaptureError


class Rows(torch.nn.Module):
    """Untraceable symbolically (``range`` of a traced size), plain for export and eager."""

    def forward(self, x):
        return torch.stack([x[i] for i in range(x.shape[0])])


class Wrapped(torch.nn.Module):
    """``Net(Doubled)`` as submodule ``inner``, behind a module symbolic tracing must make a leaf."""

    def __init__(self):
        super().__init__()
        self.rows, self.inner = Rows(), Net(Doubled)

    def forward(self, x):
        return self.inner(self.rows(x))


def _plain_grads(model: torch.nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """The gradients of a plain step (the model's own autograd: the truth)."""
    plain = copy.deepcopy(model)
    plain(x).square().sum().backward()
    return {name: p.grad for name, p in plain.named_parameters()}


@pytest.mark.parametrize("method", ["export", "eager"])
def test_a_forced_tier_that_loses_the_function_refuses_a_backward(method):
    model = Wrapped()
    with pytest.raises(CaptureError) as info:
        fxinspect.analyze(model, torch.randn(3, 4), timing=False, backward=True, method=method)
    said = str(info.value)
    assert f"the {method} tier" in said and "Doubled (in module 'inner')" in said and "method='symbolic'" in said
    assert all(p.grad is None for p in model.parameters())


def test_auto_takes_the_capture_that_keeps_the_function_for_a_backward():
    # symbolic must make `rows` a leaf; export captures all, so auto took export before, whose
    # backward differentiated Doubled's clone (grad * 1) instead of running grad * 2
    report = fxinspect.analyze(Wrapped(), torch.randn(3, 4), timing=False, backward=True)
    assert report.capture.method == "symbolic"
    (node,) = [n for n in report.nodes if n.target.endswith("Doubled.apply")]
    assert node.backward_flops == 3 * 8  # its backward: grad * 2, one multiply per element of (3, 8)
    assert any("custom autograd.Function Doubled (in module 'inner')" in r for _, r in report.capture.failures)


@pytest.mark.parametrize("method", ["export", "eager"])
def test_a_forward_only_analysis_runs_with_a_note(method):
    x = torch.randn(3, 4)
    report = fxinspect.analyze(Net(Doubled), x, timing=False, method=method)
    # fc1 3*4*8, fc2 3*8*8, fc3 3*8*2 MACs (the Function's clone and the relus: no MACs)
    assert report.totals.macs == 3 * 4 * 8 + 3 * 8 * 8 + 3 * 8 * 2
    (note,) = [n for n in report.capture.notes if "autograd.Function" in n]
    assert note.startswith(f"{method}: custom autograd.Function Doubled (in the root module) traced through")


@pytest.mark.parametrize("method", ["export", "eager", "auto"])
def test_inspect_never_gives_wrong_gradients(method):
    model, x = Wrapped(), torch.randn(3, 4)
    truth = _plain_grads(model, x)
    if method != "auto":  # export's gradients lack the x2 below the Function; eager's are None
        with pytest.raises(CaptureError, match="Doubled"):
            with fxinspect.inspect(model, method=method):
                model(x).square().sum().backward()
        assert all(p.grad is None for p in model.parameters())
        return
    with fxinspect.inspect(model, method=method) as ins:
        model(x).square().sum().backward()
    assert ins.report.capture.method == "symbolic"
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, truth[name], msg=name)


@pytest.mark.parametrize("method", ["export", "eager"])
def test_inspect_without_grad_is_not_refused(method):
    # under no_grad the Function has no backward to lose: nothing to refuse, nothing to note
    model, x = Net(Doubled), torch.randn(3, 4)
    with torch.no_grad(), fxinspect.inspect(model, method=method) as ins:
        out = model(x)
    torch.testing.assert_close(out, Net.forward(model, x))  # the model's own forward: the same values
    assert ins.report.capture.method == method
    assert not any("autograd.Function" in n for n in ins.report.capture.notes)


class RowsThenDoubled(Net):
    """``range`` of a traced size in the root's own forward: symbolic tracing fails at the root."""

    def forward(self, x):
        return super().forward(torch.stack([x[i] for i in range(x.shape[0])]))


def test_auto_refuses_a_backward_when_no_tier_keeps_the_function():
    with pytest.raises(CaptureError) as info:
        fxinspect.analyze(RowsThenDoubled(Doubled), torch.randn(3, 4), timing=False, backward=True)
    said = str(info.value)
    assert "Doubled (in the root module)" in said and "symbolic:" in said  # symbolic's own failure, listed
    # forward only, the same model is analysed (export, with the note)
    report = fxinspect.analyze(RowsThenDoubled(Doubled), torch.randn(3, 4), timing=False)
    assert report.capture.method == "export" and any("Doubled" in n for n in report.capture.notes)


class OnAConstant(torch.nn.Module):
    """A Function applied to a tensor made in the forward: no proxy, so symbolic tracing calls it."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x) + Doubled.apply(torch.ones(2))


def test_symbolic_calls_a_function_applied_outside_the_trace():
    # torch 2.14's Function.apply is a C classmethod: the trace's own apply must call it as one
    model, x = OnAConstant(), torch.randn(3, 2)
    program = fxinspect.instrument(model, x, method="symbolic")
    torch.testing.assert_close(program(x), model(x))
