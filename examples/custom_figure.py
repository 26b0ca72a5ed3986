"""Figures of your own: energy in joules priced from the time model, zeros seen by a recorder.

Run: ``python examples/custom_figure.py``.

A figure is declared once (``fxinspect.records.fields.Field``): its name, unit, how it
sums into modules, and what the views need of it (its column header, whether it is a
default column, what a diagram coloured by it says, what measures it, how ``diff``
compares it). ``fxinspect.register_figure(field, compute)`` adds one from outside the
package with a function that gives an op node's value from its record; every analysis
after it computes the figure for each op node once the passes have run, sums it into
modules and totals, and every view shows it with no view touched: ``table()``,
``plot(color_by=...)``, ``to_html()`` (the explorer) and ``diff()``.

A figure observed while the program runs takes a recorder instead
(``register_figure(field, recorder=...)``, :mod:`fxinspect.run.recorders`): the second
figure here, ``zeros``, counts each op node's output elements that are exactly 0 (dead
ReLU units) with an ``after(name, out)`` hook at each probe point. Its own ops run below
the counting and memory models, so no other figure changes.

The first figure is an energy estimate: the time model's predicted latency of each node
(``analyze(..., device_spec="h100-sxm")``: the roofline of its aten ops) times the
device's board power. At the board limit of 700 W it is an upper bound of what the GPU
draws while the node runs, not a measurement; a report without a time model has no
energy (``None``), so the column stays out of its table and ``color_by="energy"`` says
what would measure it.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torchvision

import fxinspect
from fxinspect.records.fields import Aggregate, Diff, Field, Unit, When
from fxinspect.run.passes import PassResult
from fxinspect.run.recorders import Recorder
from fxinspect.tensors import has_data, tensors_in

WATTS = 700.0  # H100 SXM board power limit (TDP): the GPU draws at most this

ENERGY = Field(
    "energy",
    "float | None",
    Unit.JOULE,
    Aggregate.KNOWN,  # a module's energy: its nodes' sum, unknown when one is
    header="energy",
    doc=f"joules at {WATTS:.0f} W for the time model's predicted latency",
    label=f"energy at {WATTS:.0f} W",
    measured_by='analyze(..., device_spec="h100-sxm") prices it',
    column=(When.KNOWN,),  # a default table column whenever the report has it
    diff=Diff.CHANGE,  # two reports' energies differ only when the model or its inputs do
)


def energy(node: fxinspect.NodeRecord) -> float | None:
    """One op node's joules: its predicted seconds times the board's watts."""
    return None if node.predicted_latency is None else node.predicted_latency * WATTS


ZEROS = Field(
    "zeros",
    "int | None",
    Unit.COUNT,
    Aggregate.KNOWN,  # a module's zeros: its nodes' sum (unknown on the meta device)
    header="zeros",
    doc="output elements exactly 0 (dead ReLU units, masked positions), counted as the program runs",
    label="zero outputs",
    measured_by="a run with real data (not the meta device)",
    column=(When.NONZERO,),
    diff=Diff.CHANGE,
)


class ZerosRecorder(Recorder):
    """Counts each op node's output elements that are exactly 0, as the program runs."""

    def __init__(self, program, options):
        self.zeros: dict[str, int | None] = {}

    def after(self, name, out):  # called once each op node's value is made
        tensors = tensors_in(out)
        real = all(has_data(t) for t in tensors)
        self.zeros[name] = sum(int(t.detach().eq(0).sum()) for t in tensors) if real else None

    def result(self, run):
        return PassResult(nodes={name: {"zeros": count} for name, count in self.zeros.items()})


def main(out_dir: Path = Path(".")) -> str:
    fxinspect.register_figure(ENERGY, energy)  # derived from the priced record
    fxinspect.register_figure(ZEROS, recorder=ZerosRecorder)  # observed while the program runs
    try:
        torch.manual_seed(0)
        model = torchvision.models.resnet18(num_classes=10).eval()
        small, large = (
            fxinspect.analyze(model, torch.randn(batch, 3, 64, 64), timing=False, device_spec="h100-sxm")
            for batch in (1, 8)
        )
        lines = [f"report.totals.energy = {small.totals.energy:.3e} J", "", "report.table(depth=1):", ""]
        lines.append(small.table(depth=1))
        small.plot(out_dir / "custom_figure_energy.png", color_by="energy")
        html = small.to_html()
        lines += ["", "report.plot(color_by='energy') wrote custom_figure_energy.png", ""]
        lines.append(f"to_html(): the explorer offers 'energy at 700 W': {'energy at 700 W' in html}")
        lines += ["", "small.diff(large).table(figures=('flops', 'energy'), depth=1):", ""]
        lines.append(small.diff(large).table(figures=("flops", "energy"), depth=1))
    finally:
        fxinspect.unregister_figure("energy")  # (later analyses in this process have neither)
        fxinspect.unregister_figure("zeros")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
