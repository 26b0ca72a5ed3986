"""Architecture: the pipeline, and where a new figure, pass or view goes.

For maintainers. ``fxinspect.analyze(model, inputs, **options)`` is six steps, each in
one place; every arrow points one way (a later step imports earlier ones, never back):

```
options.py          Options: every option declared, defaulted and checked once
run/prepare.py      unwrap, normalise inputs, materialise lazy modules, guard the
                    model, fake copies for a virtual run: one step for every entry point
capture/            Capture (frozen): one GraphModule, every node tagged with its module
run/program.py      InstrumentedProgram: probe points before and after every op node
run/recorders.py    Recorder: what one run observes (probes, aten ops, the loss's backward)
run/passes/         count, timing, backward, memory: each runs the program and returns
                    a PassResult of figures keyed by node name; one_run.run_once runs it
                    once with a list of recorders and a loss (run/choose.py picks the
                    capture whose count is complete)
run/assemble.py     merge the results by node name, sum into modules and totals as
                    records/fields.py declares each figure
records/, report.py frozen records in base units; Report adds the views as methods
views/              tables, summary, diagrams, charts, exports, diff: pure functions
training/           inspect (the user's own step), track, watch: the same program and
                    passes around the user's training loop
serving/            fxinspect.generation: the model's own prefill and decode steps (its
                    cache a state input, capture/states.py), each an analyze; exact cost
                    curves between the cache's windows, what fits, TTFT/TPOT; a deep
                    decoder's fitted steps from copies of 2, 3 and 4 blocks of its layers
```

**A new figure** is one ``Field`` in ``fxinspect/records/fields.py`` and a pass that
fills it. The declaration carries everything a view needs: name, type, unit (the views
format by it), how it sums into modules, table header, whether it is a default column
(``column``), what a diagram coloured by it says (``label``, ``word``, ``measured_by``),
whether ``color_by=`` and the explorer offer it (``color_by``), how ``diff`` compares it
(``diff``). The records get the field, assembly sums it, and tables, JSON, diagrams, the
explorer and ``diff`` find it there. Nothing else changes. From outside the package,
``fxinspect.register_figure(field, compute)`` adds one with a function of a node's record,
``register_figure(field, recorder=...)`` one observed by a recorder as the program runs
(``fxinspect.unregister_figure`` takes it back): ``examples/custom_figure.py`` adds an
energy estimate priced from the time model and a count of zero outputs seen by a
recorder, and shows them in all four views.

**A new pass** is a class with ``run(program) -> PassResult``: it puts a ``Probe`` at the
probe points (``before(name)``, ``after(name, output)``), runs the program, and returns
per-node values keyed by node name (``PassResult.nodes``); the declared figures among
them are its ``fields``, whole-run records go in ``PassResult.report``. To run it in
``analyze``, give it a ``planned(options, program, counted)`` class method that builds it
from the options (``None`` when they do not ask for it) and add it to
``fxinspect.analyze.LATER_PASSES``. The two passes below are the ones
``tests/test_programs.py`` plugs in: one returns values of its own, the other fills the
declared ``latency`` figure, and assembly merges and sums it like the real timing pass's.

**A new recorder** rides along in a run that already happens: a ``Recorder`` subclass
(``fxinspect/run/recorders.py``: ``before``/``after`` at each probe point, ``op`` after each
aten op, ``differentiating(loss)`` before the backward, ``result(run) -> PassResult``) added
to the list ``run_once`` gets (``analysis_recorders`` in ``run/passes/counted.py`` for
``analyze``'s counting run). Count, receptive field, gradients, memory and collectives are
recorders; ``analyze`` and the parallel step run them through ``run_once``, ``inspect``'s
live step through its steps (``OneRun``: the forward, then the user's own backward).

**A new view** is a function of a ``Report`` (or of the records) in ``fxinspect/views/``,
reached as a method of ``Report``; numbers become text only through
``fxinspect/formatting/``.
"""

from __future__ import annotations

from pathlib import Path

import torch

import fxinspect
from fxinspect.run.assemble import report_fields
from fxinspect.run.passes import PassResult, Probe
from fxinspect.run.passes.count import CountPass


class OutputElements:
    """A toy pass: output elements of every op node, keyed by name."""

    def run(self, program):
        found = {}
        program.run(program.inputs, Probe(after=lambda name, out: found.__setitem__(name, out.numel())))
        return PassResult(nodes={name: {"output_elements": n} for name, n in found.items()})


class FixedLatency:
    """A toy pass filling a declared figure: 1 ms for every op node."""

    def run(self, program):
        return PassResult(nodes={name: {"latency": 1e-3} for name in program.probe_points})


def merged(model: torch.nn.Module, x: torch.Tensor) -> fxinspect.Report:
    """The counting pass and the toy latency pass, merged into one report by node name."""
    program = fxinspect.instrument(model, x)
    results = [CountPass().run(program), FixedLatency().run(program)]
    return fxinspect.Report(**report_fields(model, program, results, virtual=False))


class TwoBlocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU())
        self.b = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.b(self.a(x)).sum(dim=0)


def main(out_dir: Path = Path(".")) -> str:
    torch.manual_seed(0)
    model, x = TwoBlocks(), torch.randn(5, 6)
    program = fxinspect.instrument(model, x)
    lines = ["The instrumented program (print(program)): the probe points sit between the ops", "", program.code]
    lines.append(f"OutputElements().run(program).nodes = {OutputElements().run(program).nodes}")
    lines += ["", "merged(model, x).table(columns=['name', 'type', 'macs', 'latency']):", ""]
    lines.append(merged(model, x).table(columns=["name", "type", "macs", "latency"]))
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
