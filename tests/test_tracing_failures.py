"""The usual ways symbolic tracing fails inside the model's own code, and ``auto``.

A forward that gives a traced size to a factory (``torch.zeros(x.shape[0], 32)``, the
usual way to start an RNN cell's state), branches on a value, takes ``len()`` of a
tensor, iterates over one or reads ``.item()`` fails symbolic tracing, sometimes with a
``TypeError`` raised in the model's own frame. It is the tracer's failure, not the
model's: a plain call runs. ``method="auto"`` must go on to the next tier and analyse
the model; only an error a plain call raises too is the user's.
"""

from __future__ import annotations

import pytest
import torch

import fxinspect


class CellLoop(torch.nn.Module):
    """An LSTMCell over 6 steps, its state started from the batch size."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.LSTMCell(16, 32)
        self.out = torch.nn.Linear(32, 4)

    def forward(self, x):
        h, c = torch.zeros(x.shape[0], 32), torch.zeros(x.shape[0], 32)
        for t in range(x.shape[1]):
            h, c = self.cell(x[:, t], (h, c))
        return self.out(h)


class FactorySize(torch.nn.Module):
    def forward(self, x):
        return x * torch.ones(x.size(0), 1)


class ValueBranch(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x - 1


class Length(torch.nn.Module):
    def forward(self, x):
        return x / len(x)


class Iterates(torch.nn.Module):
    def forward(self, x):
        return sum(row for row in x)


class ReadsItem(torch.nn.Module):
    def forward(self, x):
        return x * x.max().item()


@pytest.mark.parametrize("model", [FactorySize(), ValueBranch(), Length(), Iterates(), ReadsItem()], ids=type)
def test_auto_goes_past_a_tracing_failure_in_the_models_own_code(model):
    x = torch.randn(3, 4)
    report = fxinspect.analyze(model, x, timing=False, memory=False)
    assert torch.equal(fxinspect.instrument(model, x, method=report.capture.method)(x), model(x))
    for tier, reason in report.capture.failures:
        assert tier != report.capture.method and reason  # each earlier tier says why


def test_an_lstm_cell_loop_started_from_the_batch_size_is_analysed_exactly():
    model, x = CellLoop(), torch.randn(2, 6, 16)
    report = fxinspect.analyze(model, x, timing=False)
    assert report.capture.method != "symbolic"
    (tier, reason), *_ = report.capture.failures
    assert tier == "symbolic" and "zeros()" in reason and "a plain call runs" in reason
    # per step: x @ w_ih (2*16*128) and h @ w_hh (2*32*128), 6 steps; the output layer 2*32*4
    assert report.totals.macs == 6 * (2 * 16 * 128 + 2 * 32 * 128) + 2 * 32 * 4


class Broken(torch.nn.Module):
    """A size error of the model's own, in the same place a traced size fails."""

    def forward(self, x):
        return torch.zeros(x.shape[0], 32) + x  # (3, 4) does not broadcast to (3, 32)


def test_an_error_a_plain_call_raises_too_is_the_users():
    with pytest.raises(RuntimeError, match="must match the size") as info:
        fxinspect.analyze(Broken(), torch.randn(3, 4), timing=False)
    assert type(info.value) is RuntimeError  # the user's own exception, not a wrapper
    assert any("a plain call both raised it" in note for note in info.value.__notes__)
