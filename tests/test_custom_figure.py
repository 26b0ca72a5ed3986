"""A figure registered from outside the package shows in every view with no view touched.

The figure is ``examples/custom_figure.py``'s energy (its declaration and function; the
example itself runs in ``tests/test_examples.py``): the time model's predicted latency
of each op node times a board power. Every expected value is worked out by hand from the
H100 SXM preset (3.35e12 B/s, 5 µs per aten op) for ReLU on 2**20 float32 values.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import fxinspect
from fxinspect.records.fields import Aggregate, Field, Unit
from fxinspect.views.columns import columns_for
from fxinspect.views.explorer.payload import payload

_EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "custom_figure.py"

# one ReLU on n float32 values reads 4n bytes and writes 4n, one aten op:
# predicted = 8n / 3.35e12 + 5e-6 s; energy = predicted * 700 W
_SMALL = (8 * 2**20 / 3.35e12 + 5e-6) * 700  # (2.50406e-6 + 5e-6) * 700 = 5.25284e-3 J
_LARGE = (8 * 2**21 / 3.35e12 + 5e-6) * 700  # (5.00812e-6 + 5e-6) * 700 = 7.00569e-3 J


def _example():
    spec = importlib.util.spec_from_file_location("custom_figure", _EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def energy():
    """The example's declaration and function, registered for one test."""
    example = _example()
    fxinspect.register_figure(example.ENERGY, example.energy)
    try:
        yield example
    finally:
        fxinspect.unregister_figure("energy")


def _relus(n: int, **options):
    model = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.ReLU())
    return fxinspect.analyze(model, torch.randn(n), timing=False, memory=False, **options)


def test_energy_is_priced_per_node_and_summed(energy):
    report = _relus(2**20, device_spec="h100-sxm")
    ops = [n for n in report.nodes if n.is_op]
    assert [n.energy for n in ops] == pytest.approx([_SMALL, _SMALL], rel=1e-12)
    assert report.modules["0"].energy == pytest.approx(_SMALL, rel=1e-12)
    assert report.totals.energy == pytest.approx(2 * _SMALL, rel=1e-12)  # 1.05057e-2 J


def test_energy_is_a_default_table_column(energy):
    text = _relus(2**20, device_spec="h100-sxm").table(by="node", tablefmt="tsv")
    header, *rows = [line.split("\t") for line in text.splitlines() if "\t" in line]
    column = [h.strip() for h in header].index("energy")
    assert [r[column].strip() for r in rows] == ["5.25 mJ", "5.25 mJ", "10.51 mJ"]  # the two nodes, the total
    assert "energy" in [str(c) for c in columns_for("op")]
    # without a time model every node's energy is unknown: not a default column
    assert "energy" not in _relus(64).table(tablefmt="tsv").splitlines()[0]


def test_energy_colours_a_diagram(energy):
    fig = _relus(2**20, device_spec="h100-sxm").plot(color_by="energy", depth=None, fold=False)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts.count("5.25 mJ energy") == 2
    with pytest.raises(ValueError, match=r"no energy at 700 W.*device_spec"):
        _relus(64).plot(color_by="energy")


def test_energy_in_the_explorer(energy):
    report = _relus(2**20, device_spec="h100-sxm")
    data = payload(report)
    assert data["colour_by"]["energy"] == "energy at 700 W" and data["units"]["energy"] == "si:J"
    values = [n["values"]["energy"] for n in data["nodes"] if n["kind"] == "op"]
    assert values == pytest.approx([_SMALL, _SMALL], rel=1e-12)
    assert data["modules"][""]["figures"]["energy"] == "10.51 mJ"
    assert "energy at 700 W" in report.to_html()


def test_energy_in_diff(energy):
    small, large = (_relus(n, device_spec="h100-sxm") for n in (2**20, 2**21))
    d = small.diff(large)
    assert d.modules[""].energy == pytest.approx((2 * _SMALL, 2 * _LARGE), rel=1e-12)
    assert d.modules["0"].changed
    # 2 * 5.25284 = 10.51 mJ -> 2 * 7.00569 = 14.01 mJ: (7.00569 - 5.25284) / 5.25284 = +33.4 %
    row = next(line for line in d.table(figures=("energy",)).splitlines() if line.startswith("(model)"))
    assert row.split()[-5:] == ["10.51", "mJ", "14.01", "mJ", "+33.4%"]


def test_energy_survives_json(energy):
    report = _relus(2**20, device_spec="h100-sxm")
    again = fxinspect.Report.from_json(report.to_json())
    assert again.totals.energy == pytest.approx(2 * _SMALL, rel=1e-12)
    assert again.node(report.nodes[1].name).energy == report.nodes[1].energy


def test_unregistered_figure_is_gone():
    example = _example()
    fxinspect.register_figure(example.ENERGY, example.energy)
    with pytest.raises(ValueError, match="exists already"):
        fxinspect.register_figure(example.ENERGY, example.energy)
    fxinspect.unregister_figure("energy")
    report = _relus(64, device_spec="h100-sxm")
    assert "registered" not in report.to_dict()["totals"]  # a report without it reads as before
    with pytest.raises(AttributeError):
        _ = report.totals.energy
    assert "energy" not in [str(c) for c in columns_for("module")]
    with pytest.raises(KeyError, match="no registered figure"):
        fxinspect.unregister_figure("energy")


@pytest.mark.parametrize("name", ["flops", "bytes", "memory"])
def test_a_taken_name_is_refused(name):
    """A declared figure's name, a derived one's, a colour name: each is refused."""
    with pytest.raises(ValueError, match="exists already"):
        fxinspect.register_figure(Field(name, "int", Unit.COUNT, Aggregate.EXACT, name, "", 0), lambda n: 0)


@pytest.fixture
def zeros():
    """The example's figure observed by a recorder, registered for one test."""
    example = _example()
    fxinspect.register_figure(example.ZEROS, recorder=example.ZerosRecorder)
    try:
        yield example
    finally:
        fxinspect.unregister_figure("zeros")


def test_a_recorders_figure_is_observed_as_the_program_runs_and_changes_no_other(zeros):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with torch.no_grad():
        model[0].weight.copy_(torch.eye(4))
        model[0].bias.zero_()
    x = torch.tensor([[-1.0, 0.0, 2.0, -3.0], [1.0, 2.0, 3.0, 4.0]])
    fxinspect.unregister_figure("zeros")
    plain = fxinspect.analyze(model, x, timing=False, backward=True)
    fxinspect.register_figure(zeros.ZEROS, recorder=zeros.ZerosRecorder)
    r = fxinspect.analyze(model, x, timing=False, backward=True)
    # the identity Linear passes x on (one 0 in it); ReLU makes -1, 0 and -3 zeros: 3
    assert [(n.name, n.zeros) for n in r.nodes if n.is_op] == [("_0", 1), ("_1", 3)]
    assert (r.modules["1"].zeros, r.totals.zeros) == (3, 4)
    # the recorder's own ops (eq, sum) are nobody's work and nobody's memory
    same = ("flops", "bytes_read", "bytes_written", "backward_flops")
    assert [getattr(r.totals, f) for f in same] == [getattr(plain.totals, f) for f in same]
    assert (r.memory.peak, r.memory.saved) == (plain.memory.peak, plain.memory.saved)
    # in every view, none of them touched
    assert "zeros" in r.table(tablefmt="tsv").splitlines()[0]
    assert "zero outputs" in r.to_html()
    assert "3 zeros" in [t.get_text() for ax in r.plot(color_by="zeros", depth=None).axes for t in ax.texts]
    # without data (the meta device) nothing is observed: unknown, never 0
    assert fxinspect.analyze(model, x, timing=False, device="meta").totals.zeros is None


def test_a_figure_takes_one_way_to_its_values():
    field = Field("twice", "int", Unit.FLOP, Aggregate.EXACT, "2×FLOPs", "twice the FLOPs", 0)
    with pytest.raises(TypeError, match="one of compute= .* or recorder="):
        fxinspect.register_figure(field)
