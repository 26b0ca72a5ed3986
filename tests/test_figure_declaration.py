"""The figures that coloured nothing and were missing from the explorer before their
declaration drove the views: each now colours a diagram and shows in the explorer.

Module ``0`` is ``Linear(4, 3)`` on a 2×4 float32 input (no gradient for the input), priced
on the H100 SXM preset (67e12 FLOP/s float32, 3.35e12 B/s, 5 µs per counted aten op).
"""

from __future__ import annotations

import pytest
import torch

import fxinspect
from fxinspect.records.fields import FIELD
from fxinspect.views.explorer.payload import payload

HAND = {  # figure: (module 0's value, its box's label)
    # addmm reads x 2*4*4 = 32, the weight 3*4*4 = 48, the bias 3*4 = 12 bytes
    "bytes_read": (92, "92 B read"),
    "bytes_written": (24, "24 B written"),  # the 2×3 output: 2*3*4
    # max(54 FLOPs / 67e12, 116 B / 3.35e12) + 5e-6 = 3.46e-11 + 5e-6
    "predicted_latency": (116 / 3.35e12 + 5e-6, "5.00 µs predicted"),
    "backward_macs": (24, "24 bwd MACs"),  # grad_w = grad_out.T @ x: 3*2*4
    # mm reads grad_out 2*3*4 = 24 and x 32; the bias's sum reads grad_out 24
    "backward_bytes_read": (80, "80 B bwd read"),
    "backward_bytes_written": (60, "60 B bwd written"),  # grad_w 3*4*4 = 48, grad_b 3*4 = 12
    # mm: max(48 / 67e12, 104 / 3.35e12) + 5e-6; sum: max(6 / 67e12, 36 / 3.35e12) + 5e-6
    "backward_predicted_latency": (104 / 3.35e12 + 36 / 3.35e12 + 10e-6, "10.00 µs bwd predicted"),
}


@pytest.fixture(scope="module")
def report():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
    return fxinspect.analyze(model, torch.randn(2, 4), timing=False, backward=True, device_spec="h100-sxm")


@pytest.mark.parametrize("name", list(HAND))
def test_a_summed_figure_colours_a_diagram_and_shows_in_the_explorer(report, name):
    value, label = HAND[name]
    field = FIELD[name]
    assert getattr(report.modules["0"], name) == pytest.approx(value, rel=1e-12)
    data = payload(report)
    assert data["colour_by"][field.colour_key] == field.title
    assert data["modules"]["0"]["raw"][name] == pytest.approx(value, rel=1e-12)
    fig = report.plot(color_by=field.colour_key, depth=1)
    assert label in [t.get_text() for t in fig.axes[0].texts]


def test_a_figure_the_report_lacks_names_what_measures_it():
    untimed = fxinspect.analyze(torch.nn.Linear(4, 3), torch.randn(2, 4), timing=False)
    with pytest.raises(ValueError, match=r"no backward predicted latency; .*backward=True, device_spec"):
        untimed.plot(color_by="backward_predicted_latency")
