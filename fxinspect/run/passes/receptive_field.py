"""The receptive field's recorder: each node's field, followed along the forward's ops.

An adapter around :class:`~fxinspect.run.receptive.fields.tracker.FieldTracker`: its op hook
gives each op's outputs their field from the inputs', its probe after a node keeps the
node's figures (``receptive_field``, ``effective_stride``, ``effective_padding``).

Example
-------
>>> import torch, fxinspect
>>> from fxinspect.run.passes.one_run import run_once
>>> net = torch.nn.Sequential(torch.nn.Conv2d(1, 1, 3), torch.nn.Conv2d(1, 1, 3))
>>> program = fxinspect.instrument(net, torch.randn(1, 1, 16, 16))
>>> run_once(program, [FieldRecorder(program)]).nodes["_1"]["receptive_field"]      # 3 + (3 - 1)
(5, 5)
"""

from __future__ import annotations

from typing import Any

from ...capture import module_of
from ..program import InstrumentedProgram
from ..receptive.tracker import FieldTracker
from ..recorders import Recorder
from . import PassResult
from .one_run import OneRun

__all__ = ["FieldRecorder"]


class FieldRecorder(Recorder):
    """The receptive field of every node's first output (see :mod:`fxinspect.run.receptive.fields`)."""

    def __init__(self, program: InstrumentedProgram) -> None:
        self.program = program
        self.fields = fields = FieldTracker(list(program.inputs))
        self.op = fields.observe  # (per aten op: the tracker's own method, no call between)

    @staticmethod
    def wanted(program: InstrumentedProgram) -> bool:
        """Whether any input starts a field (else following ops is not worth its cost)."""
        return FieldTracker.wanted(program.inputs)

    def before(self, name: str) -> None:
        self.fields.node = name

    def after(self, name: str, out: Any) -> None:
        self.fields.record(name, out)
        self.fields.node = None

    def result(self, run: OneRun) -> PassResult:
        named = self.fields.named()
        modules = {n.name: module_of(n)[0] for n in self.program.graph.nodes if n.name in named}
        found, notes = self.fields.results(modules)
        return PassResult(nodes=found, notes=notes)
