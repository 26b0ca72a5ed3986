"""Passes: each runs the instrumented program and returns figures keyed by node name.

A pass is an object with a ``run(program) -> PassResult`` method; the passes
``analyze`` runs after the counting pass also have a ``planned(options, program,
counted)`` class method that builds the pass from the :class:`~fxinspect.options.Options`
(``None`` when the options do not ask for it). A pass puts its
:class:`~fxinspect.run.program.Probe` at the program's probe points, runs the program
(once, interpreted, or many times, compiled) and returns per-node values keyed by the
fx node's name: never by position. Assembly merges the results of all passes by name
into the report's records. A new figure is a field in :mod:`fxinspect.records.fields`
and a pass that fills it; no other pass changes.

Example: a pass that counts output elements per node

>>> import torch, fxinspect
>>> class OutputElements:
...     def run(self, program):
...         found = {}
...         program.run(program.inputs, Probe(after=lambda name, out: found.update({name: out.numel()})))
...         return PassResult(nodes={name: {"output_elements": n} for name, n in found.items()})
>>> program = fxinspect.instrument(torch.nn.Linear(3, 2), torch.randn(4, 3))
>>> OutputElements().run(program).nodes                    # 4 * 2
{'linear': {'output_elements': 8}}
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...records.fields import FIELD
from ..program import InstrumentedProgram, Probe

__all__ = ["Pass", "PassResult", "Probe"]


@dataclass
class PassResult:
    """What one pass measured.

    ``nodes`` maps a node's name to ``{record field: value}`` (fields of
    :class:`~fxinspect.records.NodeRecord`: declared figures such as ``latency``, or
    ``outputs``/``aten``); the declared figures among them are the pass's
    :attr:`fields`. ``report`` holds :class:`~fxinspect.records.ReportRecord` fields
    (``timing``, ``unattributed``, ``memory``), ``notes`` lines for
    ``report.capture.notes``. Two facts of the forward are typed fields: the inputs it
    wrote in place (``written_inputs``: later passes put them back) and the inputs and
    weights that held NaN/Inf before it ran (``nonfinite_sources``). ``recorded``: the
    classes of the recorders of the run that made it, so that a later pass knows what
    that run did already (:class:`~fxinspect.run.passes.memory.MemoryPass` is skipped
    after a run with a memory recorder).
    """

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    written_inputs: tuple[str, ...] = ()
    nonfinite_sources: tuple[str, ...] = ()
    recorded: tuple[type, ...] = ()  # the kinds of recorder whose run made it (:mod:`.one_run`)

    @property
    def fields(self) -> tuple[str, ...]:
        """The declared figures this pass measured: those its nodes carry. (The others
        stay ``None`` in modules and totals when they may be unknown.)"""
        # (every node's keys, in order of first appearance: walked in C, then filtered)
        return tuple(k for k in dict.fromkeys(itertools.chain.from_iterable(self.nodes.values())) if k in FIELD)


class Pass(Protocol):
    """One run (or series of runs) of the instrumented program."""

    def run(self, program: InstrumentedProgram) -> PassResult: ...
