"""``inspect``: a report of the user's own training step, forward and backward, as it ran.

Inside ``with fxinspect.inspect(model) as ins:``, the model's first call is captured on
its actual arguments and answered by the instrumented program, which calls the model's
own modules and parameters: the output is the model's, gradients flow into the model's
``.grad`` and an optimizer step inside the block updates the real parameters. One
dispatch mode stays on for the block: forward ops are charged to the running node,
backward ops to the node whose autograd node runs (as :mod:`fxinspect.run.passes.backward`),
and the user's own ops around the model (the loss and its backward, the optimizer) are
listed apart as run outside the nodes (``report.unattributed``,
``report.backward_unattributed``). ``ins.report`` is then a :class:`~fxinspect.Report`
with the fields ``analyze(..., backward=True, timing=False, memory=False)`` gives, of
what ran.

The first call is prepared as every entry point prepares its run
(:mod:`fxinspect.run.prepare`), with one difference: lazy modules are materialised in
the user's model, as its own first call would, because the analysed call is that call.
Capturing may run the model once (the export and eager tiers do); its effects are undone
before the real call, so the model ends as the same step without fxinspect leaves it.
Only the first call is analysed: later calls in the block run the model as usual, and
their ops are listed as run outside the nodes.

What the forward binds to a module attribute (``self.aux_loss = y.pow(2).mean()``, on
the model or any submodule; a tensor, or a tuple, list or dict of them) is no op, so
the program does not run that line: the capture notes each such write and the graph
nodes that compute its value (:mod:`fxinspect.capture.attributes`), and the program's
run sets it from their outputs as they run (:mod:`.forward_writes`). The user's step
then reads it as after a plain call, and it is left afterwards as a plain step leaves
it: the write is the user's own forward's, in the user's own step (the guard undoes only
what capturing did). A value no node computes (a Python counter, a flag) and a list or
dict changed in place are not set: the report's notes name them.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
>>> with fxinspect.inspect(model) as ins:
...     loss = (model(torch.randn(16, 8)) - 1).pow(2).mean()
...     loss.backward()
>>> ins.report.totals.macs, ins.report.totals.backward_macs     # 16*8*4 + 16*4*1; 16*8*4 + 2 * 16*4*1
(576, 640)
>>> [c.op for c in ins.report.unattributed]          # the loss, outside the model's nodes, and its seed
['aten.sub.Tensor', 'aten.pow.Tensor_Scalar', 'aten.mean.default', 'aten.ones_like.default']
>>> [c.op for c in ins.report.backward_unattributed][:3]      # the loss's backward
['aten.expand.default', 'aten.div.Scalar', 'aten.pow.Tensor_Scalar']
>>> model[0].weight.grad.shape                                  # the user's gradients
torch.Size([4, 8])
"""

from __future__ import annotations

from typing import Any

import torch

from ..capture import capture
from ..errors import InputError
from ..options import INSPECT_OPTIONS, Options, signature_of
from ..report import Report
from ..run.assemble import report_fields
from ..run.dispatch import CountingMode
from ..run.forward_patch import ForwardPatch
from ..run.owners import AutogradOwners
from ..run.passes.backward import Gradients, NonFiniteTurns, backward_result
from ..run.passes.count import ForwardRecorder
from ..run.prepare import Lazy, prepared, unwrapped
from ..run.program import InstrumentedProgram, Probe
from .forward_writes import ForwardWrites

__all__ = ["Inspection", "inspect"]

_current_node = torch._C._current_autograd_node


class StepMode(CountingMode):
    """Counts a live step: forward ops to ``node`` (set by the probes), backward ops to
    the fx node whose autograd node runs them, each in its own table of costs."""

    def __init__(self, owners: AutogradOwners) -> None:
        super().__init__()
        self.owners = owners
        self.forward_costs = self.costs
        self.backward_costs: dict[Any, Any] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        current = _current_node()
        if current is None:
            return super().__torch_dispatch__(func, types, args, kwargs)
        node = self.node
        self.costs, self.node = self.backward_costs, self.owners.owner(current._sequence_nr())
        try:
            return super().__torch_dispatch__(func, types, args, kwargs)
        finally:
            self.costs, self.node = self.forward_costs, node


class _Live:
    """What the first call set running: the program and the recorders the block feeds."""

    def __init__(
        self, program: InstrumentedProgram, check_finite: bool, notes: tuple[str, ...], attributes: ForwardWrites
    ) -> None:
        self.program, self.notes, self.attributes = program, (*notes, *attributes.notes()), attributes
        self.owners = AutogradOwners()
        self.mode = StepMode(self.owners)
        self.recorder = ForwardRecorder(program, check_finite, self.mode)
        self.gradients = Gradients(self.recorder.reader)
        self.turns: NonFiniteTurns | None = None  # set once the forward ran, when values are read

    def probe(self) -> Probe:
        owners, recorder, gradients, attributes = self.owners, self.recorder, self.gradients, self.attributes

        def before(name: str) -> None:
            owners.before(name)
            recorder.probe.before(name)

        def after(name: str, out: Any) -> None:
            owners.after(name)
            recorder.probe.after(name, out)
            gradients.watch(name, out)
            attributes.ran(name, out)  # what the forward set on self from it, set as its own line did

        return Probe(before, after)

    def report(self, model: torch.nn.Module) -> Report:
        program, mode, recorder = self.program, self.mode, self.recorder
        stats = recorder.reader.finish() if recorder.reader else []
        results = [recorder.result(model, stats)]
        if mode.backward_costs:
            turned = self.turns.first() if self.turns is not None else None
            results.append(backward_result(program, mode.backward_costs, self.gradients, stats, turned))
        return Report(**report_fields(model, program, results, virtual=False, notes=self.notes))


class Inspection:
    """The context manager :func:`inspect` returns; ``report`` once the block has run."""

    def __init__(self, model: torch.nn.Module, options: Options) -> None:
        self.model, self._notes = unwrapped(model, "inspect")
        self.options = options
        self.called = False
        self._report: Report | None = None
        self._live: _Live | None = None

    @property
    def report(self) -> Report:
        """The report of the block's first call of the model, forward and backward."""
        if self._report is None:
            raise InputError(
                "inspect(): no report yet: the model was not called inside the `with` block"
                if not self.called
                else "inspect(): the report is made when the `with` block ends; read it afterwards"
            )
        return self._report

    def __enter__(self) -> Inspection:
        self._patch = ForwardPatch(self.model, self._call)
        return self

    def _call(self, args: tuple, kwargs: dict) -> Any:
        if self.called:  # only the first call is analysed (the patch gave the model its forward)
            return self.model.forward(*args, **kwargs)
        self.called = True
        return self._first_call(args, kwargs)

    def _first_call(self, args: tuple, kwargs: dict) -> Any:
        opts = self.options
        # the guard ends before the real call: a tier that runs the model to capture it
        # leaves no trace, while the call itself changes the model as a plain call would
        with prepared(self.model, args, kwargs, lazy=Lazy.IN_PLACE, virtual_copy=False, caller="inspect") as run:
            # under grad the user's step may run a backward through the program: no capture
            # that lost a custom autograd.Function's own backward (see capture/functions.py)
            cap = capture(
                run.model,
                run.args,
                run.kwargs,
                method=opts.method,
                leaf_modules=opts.leaf_modules,
                backward=torch.is_grad_enabled(),
            )
        with torch.no_grad():  # the buffer writes the trace made, undone by the guard, are this call's
            for path, value in cap.trace_writes:
                run.model.get_buffer(path).copy_(value)
        program = InstrumentedProgram(cap)
        inputs = program.flat_inputs(run.args, run.kwargs)
        attributes = ForwardWrites(run.model, program, inputs)
        live = _Live(program, opts.check_finite, (*self._notes, *run.notes), attributes)
        live.mode.__enter__()  # on until the block ends: the user's backward runs under it
        self._live = live
        attributes.before_run()
        output = program.run(inputs, live.probe())
        if live.recorder.reader is not None and torch.is_grad_enabled():
            live.turns = NonFiniteTurns(live.owners, output)  # which backward first makes NaN/Inf
        return program.output_structure(output)

    def __exit__(self, exc_type, exc, tb) -> None:
        self._patch.remove()
        live, self._live = self._live, None
        if live is None:
            return
        live.mode.__exit__(None, None, None)
        if exc_type is not None:
            return  # the user's exception goes on as theirs
        self._report = live.report(self.model)


def inspect(model: torch.nn.Module, **options: Any) -> Inspection:
    """Analyse the model's next call and its backward, inside your own training step.

    >>> import torch, fxinspect
    >>> model = torch.nn.Linear(3, 2)
    >>> with fxinspect.inspect(model) as ins:
    ...     loss = model(torch.randn(5, 3)).square().mean()
    ...     loss.backward()
    ...     torch.optim.SGD(model.parameters(), lr=0.1).step()
    >>> ins.report.totals.macs, ins.report.totals.backward_macs       # 5*3*2; the weight's gradient 5*3*2
    (30, 30)

    Options (keywords): ``method``, ``leaf_modules`` and ``check_finite``, as for
    :func:`fxinspect.analyze`. Nothing is timed and no memory is modelled (use
    ``analyze`` for those).
    """
    return Inspection(model, Options.of("inspect", options, INSPECT_OPTIONS))


inspect.__signature__ = signature_of(inspect, INSPECT_OPTIONS)
