"""One run of the instrumented program with a list of recorders (:mod:`fxinspect.run.recorders`).

:func:`run_once` runs the forward once, with every recorder's probes at every node and
its op hooks in the one dispatch that runs each aten op; with a ``loss`` it computes
``loss(output)`` and runs its backward, the recorders watching that too; then it merges
what each recorder returns into one :class:`~fxinspect.run.passes.PassResult`, whose
``recorded`` names the recorders' kinds (a later pass asks it what was done already).
:class:`OneRun` is the same run in steps, for a live step whose backward the user runs
(:mod:`fxinspect.training.step`).

Every run that records goes through here: ``analyze``'s counting run (count, receptive
field, gradients and memory in one run: :mod:`.counted`), the later passes that run
alone (count, backward, memory), ``inspect``'s live step and the parallel step (with the
collectives).

Example
-------
>>> import torch, fxinspect
>>> from fxinspect.run.passes.count import CountRecorder
>>> program = fxinspect.instrument(torch.nn.Linear(3, 2), torch.randn(4, 3))
>>> run_once(program, [CountRecorder(program)]).nodes["linear"]["macs"]     # 4*3*2
24
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ...tensors import holds_wrappers
from ..owners import AutogradOwners
from ..program import InstrumentedProgram, Probe
from ..recorders import Loss, Recorder, overrides
from . import PassResult

__all__ = ["OneRun", "run_once"]


def run_once(
    program: InstrumentedProgram,
    recorders: Sequence[Recorder],
    loss: Loss | None = None,
    inputs: list[Any] | None = None,
) -> PassResult:
    """Run ``program`` once (on ``inputs``, by default its own) with ``recorders``;
    with ``loss``, differentiate ``loss(output)`` too. Their figures, merged."""
    run = OneRun(program, recorders, loss, inputs)
    with run.running():
        output = run.forward()
        if loss is not None:
            run.backward(output)
    del output  # (after the recorders' contexts: what it holds is freed after the run)
    return run.result()


class _Observing(TorchDispatchMode):
    """The dispatch mode of a run no recorder leads: it calls the op hooks."""

    def __init__(self) -> None:
        super().__init__()
        self.observe: Callable[..., None] | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if holds_wrappers(types):
            return NotImplemented
        out = func(*args, **kwargs) if kwargs else func(*args)
        self.observe(func, args, kwargs, out)
        return out


def _chain(calls: list[Callable[..., None]]) -> Callable[..., None]:
    if len(calls) == 1:
        return calls[0]
    if len(calls) == 2:  # (per aten op and per node: the common composition, without a loop)
        first, second = calls

        def both(*args: Any) -> None:
            first(*args)
            second(*args)

        return both
    if len(calls) == 3:
        first, second, third = calls

        def three(*args: Any) -> None:
            first(*args)
            second(*args)
            third(*args)

        return three

    def every(*args: Any) -> None:
        for call in calls:
            call(*args)

    return every


def _dispatch(recorders: list[Recorder], making: str, hook: str) -> Any:
    """The mode the first recorder that leads ``making`` gives (else a plain one, when
    some recorder has the op ``hook``), calling the others' ``hook`` after each op."""
    lead = mode = None
    for r in recorders:
        mode = getattr(r, making)()
        if mode is not None:
            lead = r
            break
    calls = [getattr(r, hook) for r in recorders if r is not lead and overrides(r, hook)]
    if calls:
        if mode is None:
            mode = _Observing()
        if mode.observe is not None:  # the leader's own (the storage tracker observes itself)
            calls.insert(0, mode.observe)
        mode.observe = _chain(calls)
    return mode


class OneRun:
    """One run of ``program`` with ``recorders``, in steps: :meth:`running` around it,
    :meth:`forward`, :meth:`backward` (with a loss), then :meth:`result`. ``owners``:
    the autograd owners to follow (a live step's mode reads them too)."""

    def __init__(
        self,
        program: InstrumentedProgram,
        recorders: Sequence[Recorder],
        loss: Loss | None = None,
        inputs: list[Any] | None = None,
        owners: AutogradOwners | None = None,
    ) -> None:
        self.program, self.recorders, self.loss = program, list(recorders), loss
        self.inputs = list(program.inputs) if inputs is None else inputs
        self.owners = owners or AutogradOwners()  # which fx node made each autograd node
        self._stats: dict[int, list[Any]] = {}
        for r in self.recorders:
            if overrides(r, "start"):
                r.start(self)
        self.mode = _dispatch(self.recorders, "mode", "op")

    def _hooks(self, hook: str) -> list[Callable[..., Any]]:
        return [getattr(r, hook) for r in self.recorders if overrides(r, hook)]

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Gradients on when a loss is differentiated, and each recorder's context."""
        with contextlib.ExitStack() as stack:
            if self.loss is not None:
                stack.enter_context(torch.enable_grad())
            for r in self.recorders:
                if overrides(r, "running"):
                    stack.enter_context(r.running())
            yield

    def probe(self) -> Probe:
        """The recorders' probes, and the autograd owners' when they are wanted."""
        owners = self.owners if self.loss is not None or any(r.owned for r in self.recorders) else None
        befores, afters = self._hooks("before"), self._hooks("after")
        if owners is not None:
            owners_after = owners.after
            befores.insert(0, owners.before)
            afters.append(lambda name, out: owners_after(name))  # (last: what the recorders did is the node's too)
        # bound once, called per node without a loop (the common sets are one or two hooks)
        return Probe(_chain(befores) if befores else None, _chain(afters) if afters else None)

    def forward(self, entered: bool = False) -> Any:
        """Run the forward; the program's flat output. ``entered``: the caller holds the
        dispatch mode (:attr:`mode`) on already (a live step's, on for the user's backward)."""
        probe = self.probe()
        if entered or self.mode is None:
            return self.program.run(self.inputs, probe)
        with self.mode:
            return self.program.run(self.inputs, probe)

    def differentiating(self, roots: Any) -> None:
        """Tell the recorders ``roots`` (the loss, or a live step's outputs) are differentiated next."""
        for call in self._hooks("differentiating"):
            call(roots)

    def backward(self, output: Any) -> None:
        """The loss of the forward's ``output``, and its backward."""
        loss_mode = next((m for r in self.recorders if (m := r.loss_mode()) is not None), None)
        with loss_mode if loss_mode is not None else contextlib.nullcontext():
            loss = self.loss(self.program.output_structure(output))
        self.differentiating(loss)
        mode = _dispatch(self.recorders, "backward_mode", "backward_op")
        with mode if mode is not None else contextlib.nullcontext():
            loss.backward()
        for call in self._hooks("differentiated"):
            call()
        del loss

    def stats(self, reader: Any) -> list[Any]:
        """``reader``'s statistics, finished once for every recorder that shares it."""
        if reader is None:
            return []
        found = self._stats.get(id(reader))
        if found is None:
            found = self._stats[id(reader)] = reader.finish()
        return found

    def result(self) -> PassResult:
        """Every recorder's figures, merged by node name (in the recorders' order)."""
        merged = PassResult(recorded=tuple(type(r) for r in self.recorders))
        for r in self.recorders:
            part = r.result(self)
            if part is None:  # (a recorder that only observes for others)
                continue
            if not merged.nodes:
                merged.nodes = part.nodes
            else:
                nodes = merged.nodes
                for name, figures in part.nodes.items():
                    found = nodes.get(name)
                    if found is None:
                        nodes[name] = figures
                    else:
                        found.update(figures)
            merged.report.update(part.report)
            merged.notes += part.notes
            merged.written_inputs += part.written_inputs
            merged.nonfinite_sources += part.nonfinite_sources
        return merged
