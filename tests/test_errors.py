"""Bad input and the model's own errors: one clear error, raised once, as the user's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import fxinspect


@pytest.mark.parametrize(
    "given, says",
    [
        (None, "missing a required argument: 'input'"),
        ((), "missing a required argument: 'input'"),
        (np.ones((2, 3), dtype=np.float32), "numpy.ndarray of shape (2, 3)"),
        ("abc", "str 'abc'"),
        ((torch.ones(2, 3), torch.ones(2)), "too many positional arguments"),
        ({"x": torch.ones(2, 3)}, "given: x=tensor 2×3 f32"),
    ],
    ids=["None", "empty", "numpy", "string", "two-tensors", "wrong-keyword"],
)
def test_bad_inputs_get_an_input_error_naming_them(given, says):
    model = torch.nn.Linear(3, 2)
    with pytest.raises(fxinspect.InputError) as info:
        fxinspect.analyze(model, given, timing=False)
    assert says in str(info.value)
    assert "tensor" in str(info.value)  # and what is accepted


FORWARD_CALLS: list[int] = []  # outside the model: analyze restores the model's own attributes


class Picky(torch.nn.Module):
    """Raises its own error after a layer ran, and counts its forward calls."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, x):
        FORWARD_CALLS.append(1)
        x = self.fc(x)
        raise ValueError("mine")


@pytest.mark.parametrize("method", ["auto", "symbolic", "export", "eager"])
def test_the_models_own_error_reaches_the_user_once(method):
    FORWARD_CALLS.clear()
    model = Picky()
    with pytest.raises(ValueError) as info:
        fxinspect.analyze(model, torch.randn(2, 3), method=method, timing=False)
    assert type(info.value) is ValueError and str(info.value) == "mine"
    # the tier's attempt and the plain call that shows the error is the model's own (a
    # tracer's failure in the model's code would not survive it); never once per tier
    assert len(FORWARD_CALLS) == 2
    assert any("root module" in note for note in info.value.__notes__)


class Inner(torch.nn.Module):
    def forward(self, x):
        if x.shape[-1] != 4:
            raise ValueError(f"need 4 features, got {x.shape[-1]}")
        return x


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x) * 2


def test_the_models_error_names_the_module_it_came_from():
    with pytest.raises(ValueError, match="need 4 features, got 3") as info:
        fxinspect.analyze(Outer(), torch.randn(2, 3), timing=False)
    assert any("module 'inner'" in note for note in info.value.__notes__)


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # symbolic tracing and export cannot follow this; eager can
            return x * 2
        return x - 1


def test_tiers_that_cannot_capture_fall_back_quietly(capfd):
    report = fxinspect.analyze(DataDependent(), torch.ones(4, 3), timing=False)
    assert report.capture.method == "eager"
    assert [str(tier) for tier, _ in report.capture.failures] == ["symbolic", "export"]
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # what export printed is in the notes, not the terminal
    assert any(note.startswith("export tier said:") for note in report.capture.notes)


class TakesOneDict(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, batch):
        return self.fc(batch["x"])


def test_a_dict_meant_as_the_one_argument_gets_a_hint_to_wrap_it():
    batch = {"x": torch.randn(3, 4)}
    with pytest.raises(fxinspect.InputError, match=r"as the one argument 'batch', give it in a tuple"):
        fxinspect.analyze(TakesOneDict(), batch, timing=False)
    assert fxinspect.analyze(TakesOneDict(), (batch,), timing=False).totals.macs == 3 * 4 * 2


def test_the_reference_snippet_for_a_custom_op_rule_runs_as_copied(tmp_path):
    reference = (Path(__file__).resolve().parents[1] / "docs" / "reference.md").read_text()
    snippet = next(block for block in reference.split("```python\n")[1:] if "register_rule" in block).split("```")[0]
    script = tmp_path / "snippet.py"
    script.write_text(snippet)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["128", "()"]  # 4 FLOPs for each of the 4 * 8 outputs; nothing uncounted


class ModifiesASavedTensor(torch.nn.Module):
    """Modifies in place a tensor autograd saved for the backward: eager refuses the backward."""

    def __init__(self, how):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.how = how

    def forward(self, x):
        y = self.fc(x)
        if self.how == "own output through a view":  # sigmoid saves its output
            z = y.sigmoid()
            z.view(-1).mul_(2)
            return z
        if self.how == "an input through a slice":  # mul saves its inputs
            z = y * y
            y[:, :2].zero_()
            return z + y
        if self.how == "no_grad write, view of a view":  # tanh saves its output; exp too
            z = torch.tanh(y).t()
            w = z.exp()
            with torch.no_grad():
                w.t()[0].add_(1)
            return w
        if self.how == "a saved view whose base is written":  # mm saves a.t(), a view of a
            a = y.clone()
            z = torch.mm(a, a.t())
            a[0].fill_(1)  # eager names the view's node as autograd remade it: AsStrided, not T
            return z.sum() + a.sum()
        raise AssertionError(self.how)


REFUSED_IN = {  # how -> the node whose backward reads the modified tensor
    "own output through a view": "sigmoid",
    "an input through a slice": "mul",
    "no_grad write, view of a view": "exp",
    "a saved view whose base is written": "mm",
}


@pytest.mark.parametrize("how", REFUSED_IN)
@pytest.mark.parametrize(
    "options",
    [{}, {"device": "meta"}, {"memory": False}, {"measure_memory": True}, {"method": "export"}, {"method": "eager"}],
    ids=["one-run", "meta", "no-memory", "measured", "export", "eager"],
)
def test_a_backward_eager_refuses_is_refused_with_its_own_error(how, options):
    torch.manual_seed(0)
    model, x = ModifiesASavedTensor(how), torch.randn(2, 4)
    with pytest.raises(RuntimeError) as eager:
        model(x).sum().backward()
    model.zero_grad(set_to_none=True)
    with pytest.raises(RuntimeError) as info:
        fxinspect.analyze(model, x, backward=True, timing=False, **options)
    # the user's own error: autograd's type and message, word for word (tensor, its node,
    # versions), with where it happened added as a note
    assert type(info.value) is RuntimeError
    assert str(info.value) == str(eager.value)
    if options.get("memory", True) and not options.get("measure_memory"):  # (the memory model's run found it)
        assert f"fxinspect: in the backward of node {REFUSED_IN[how]!r}" in info.value.__notes__
    assert all(p.grad is None for p in model.parameters())
