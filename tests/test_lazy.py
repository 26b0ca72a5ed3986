"""Lazy modules: the figures of the materialised model; the user's model left lazy and
behaving on its first call exactly as an untouched copy does."""

from __future__ import annotations

import copy

import pytest
import torch

import fxinspect


class MaterialisesInForward(torch.nn.Module):
    """Holds an UninitializedParameter and materialises it on its first call."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.UninitializedParameter()

    def forward(self, x):
        if isinstance(self.weight, torch.nn.parameter.UninitializedParameter):
            self.weight.materialize((x.shape[-1], 5))
            torch.nn.init.normal_(self.weight)
        return x @ self.weight


CASES = {
    # name: (model factory, input, params, macs)
    "LazyLinear": (lambda: torch.nn.Sequential(torch.nn.LazyLinear(4)), torch.randn(2, 3), 3 * 4 + 4, 2 * 3 * 4),
    "LazyConv2d": (
        lambda: torch.nn.Sequential(torch.nn.LazyConv2d(8, 3), torch.nn.ReLU()),
        torch.randn(1, 2, 6, 6),
        8 * 2 * 3 * 3 + 8,
        8 * 4 * 4 * 2 * 3 * 3,
    ),  # out channels * 4x4 outputs * in channels * 3x3
    "UninitializedParameter": (MaterialisesInForward, torch.randn(2, 7), 7 * 5, 2 * 7 * 5),
}


def _lazy(model: torch.nn.Module) -> bool:
    return any(torch.nn.parameter.is_lazy(p) for p in model.parameters())


@pytest.mark.parametrize("name", CASES)
def test_lazy_models_are_analysed_materialised_and_left_lazy(name):
    factory, x, params, macs = CASES[name]
    torch.manual_seed(0)
    model = factory()
    untouched = copy.deepcopy(model)
    report = fxinspect.analyze(model, x, timing=False)
    assert (report.totals.params, report.totals.macs) == (params, macs)
    assert any("still lazy" in note for note in report.capture.notes)
    assert _lazy(model) and type(model) is type(untouched)
    assert [type(m) for m in model.modules()] == [type(m) for m in untouched.modules()]
    # the first real call: the same parameters materialised, the same output, same seed
    torch.manual_seed(1)
    out = model(x)
    torch.manual_seed(1)
    expected = untouched(x)
    assert torch.equal(out, expected)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), untouched.parameters()))


def test_analysing_a_lazy_model_leaves_the_global_random_stream_alone():
    model, x = CASES["LazyLinear"][0](), torch.randn(2, 3)
    state = torch.get_rng_state()
    fxinspect.analyze(model, x, timing=False)
    assert torch.equal(state, torch.get_rng_state())  # materialising the copy drew from a fork
