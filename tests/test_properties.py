"""Properties that hold for every shape, checked on shapes hypothesis draws.

* matmul-like FLOPs equal ``FlopCounterMode``'s (forward, and forward + backward) for
  convolutions of any kernel, stride, padding, dilation and groups, and for batched
  matrix products, the ops whose formulas are easiest to get wrong at the edges;
* per-node figures sum exactly to their modules' and the totals, at every depth;
* a report survives ``to_json`` / ``from_json`` unchanged.

The draws are derandomized, so CI sees the same examples on every run.
"""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import reference_backward_flops, reference_flops

import fxinspect
from fxinspect.records.fields import SUMMED, sums

QUICK = settings(max_examples=15, deadline=None, derandomize=True)


@st.composite
def conv_layers(draw):
    """A Conv2d with random geometry, and an input it accepts."""
    groups = draw(st.sampled_from([1, 2, 3]))
    c_in, c_out = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    stride, dilation = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    padding = draw(st.integers(0, 2))
    reach = [dilation * (k - 1) + 1 for k in kernel]  # the input must cover one dilated kernel
    size = [draw(st.integers(max(r - 2 * padding, 1), r + 6)) for r in reach]
    bias = draw(st.booleans())
    conv = torch.nn.Conv2d(c_in, c_out, kernel, stride, padding, dilation, groups, bias=bias)
    return conv, torch.randn(draw(st.integers(1, 2)), c_in, *size)


def _flop_counter(model, args, backward):
    """FlopCounterMode's forward (and backward of the output's sum) total, corrected."""
    total = reference_flops(model, args)
    return total + reference_backward_flops(model, args)[0] if backward else total


@QUICK
@given(conv_layers(), st.booleans())
def test_convolution_flops_equal_the_flop_counter(layer, backward):
    conv, x = layer
    report = fxinspect.analyze(conv, x, timing=False, memory=False, check_finite=False, backward=backward)
    counted = 2 * report.totals.macs + (2 * report.totals.backward_macs if backward else 0)
    assert counted == _flop_counter(conv, (x,), backward)


class BatchedProduct(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b) @ b.transpose(1, 2)


@QUICK
@given(st.integers(1, 3), st.integers(1, 9), st.integers(1, 9), st.integers(1, 9))
def test_batched_products_flops_equal_the_flop_counter(batch, n, k, m):
    a, b = torch.randn(batch, n, k, requires_grad=True), torch.randn(batch, k, m, requires_grad=True)
    report = fxinspect.analyze(BatchedProduct(), (a, b), timing=False, memory=False, backward=True)
    # bmm then matmul: b*n*k*m + b*n*m*k MACs forward; each backward twice that
    assert report.totals.macs == 2 * batch * n * k * m
    assert report.totals.backward_macs == 2 * report.totals.macs
    assert 2 * (report.totals.macs + report.totals.backward_macs) == _flop_counter(BatchedProduct(), (a, b), True)


@st.composite
def stacks(draw):
    """A small Sequential of nested blocks of Linear/ReLU/LayerNorm/Dropout, and its input."""
    width = draw(st.integers(1, 6))
    blocks = []
    for _ in range(draw(st.integers(1, 4))):
        layers = []
        for kind in draw(st.lists(st.sampled_from(["linear", "relu", "norm"]), min_size=1, max_size=3)):
            layers.append(
                torch.nn.Linear(width, width)
                if kind == "linear"
                else torch.nn.ReLU()
                if kind == "relu"
                else torch.nn.LayerNorm(width)
            )
        blocks.append(torch.nn.Sequential(*layers))
    return torch.nn.Sequential(*blocks), torch.randn(draw(st.integers(1, 3)), width)


@QUICK
@given(stacks())
def test_node_figures_sum_to_every_module_and_the_totals(stack):
    model, x = stack
    report = fxinspect.analyze(model, x, timing=False)
    ops = [n for n in report.nodes if n.is_op]
    exact = [f.name for f in SUMMED if f.aggregate == "exact"]
    for path, module in report.modules.items():
        inside = [n for n in ops if n.module_path == path or n.module_path.startswith(f"{path}.") or not path]
        expected = sums(inside)
        assert {f: getattr(module, f) for f in exact} == {f: expected[f] for f in exact}, path
    assert {f: getattr(report.totals, f) for f in exact} == {f: sums(ops)[f] for f in exact}


@QUICK
@given(stacks(), st.booleans())
def test_a_report_survives_json(stack, backward):
    model, x = stack
    report = fxinspect.analyze(model, x, timing=False, backward=backward)
    assert fxinspect.Report.from_json(report.to_json()) == report
