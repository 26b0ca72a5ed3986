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
from ..run.passes.backward import BackwardRecorder
from ..run.passes.count import CountRecorder
from ..run.passes.one_run import OneRun
from ..run.prepare import Lazy, prepared, unwrapped
from ..run.program import InstrumentedProgram
from ..run.recorders import Recorder
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


class _Writes(Recorder):
    """What the forward binds to a module attribute, set as its own line did (:mod:`.forward_writes`)."""

    def __init__(self, attributes: ForwardWrites) -> None:
        self.after = attributes.ran  # (the hook itself)


class _Live:
    """What the first call set running: the program's one run (:class:`OneRun`), its
    forward done, its backward the user's, under the step's mode until the block ends."""

    def __init__(
        self, model: torch.nn.Module, program: InstrumentedProgram, inputs: list, check_finite: bool, notes: tuple
    ) -> None:
        self.program, self.attributes = program, ForwardWrites(model, program, inputs)
        self.notes = (*notes, *self.attributes.notes())
        owners = AutogradOwners()
        self.mode = mode = StepMode(owners)  # counts the forward, and the user's backward
        count = CountRecorder(program, check_finite, model, mode)
        gradients = BackwardRecorder(program, count.reader, costs=lambda: mode.backward_costs)
        self.run = OneRun(program, [count, gradients, _Writes(self.attributes)], inputs=inputs, owners=owners)

    def report(self, model: torch.nn.Module) -> Report:
        results = [self.run.result()]
        return Report(**report_fields(model, self.program, results, virtual=False, notes=self.notes))


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
        live = _Live(run.model, program, inputs, opts.check_finite, (*self._notes, *run.notes))
        live.mode.__enter__()  # on until the block ends: the user's backward runs under it
        self._live = live
        live.attributes.before_run()
        output = live.run.forward(entered=True)
        if torch.is_grad_enabled():
            live.run.differentiating(output)  # which backward first makes NaN/Inf
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
