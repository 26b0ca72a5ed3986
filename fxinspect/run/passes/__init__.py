"""Passes: each runs the instrumented program and returns figures keyed by node name.

A pass is any object with a ``run(program) -> PassResult`` method. It puts its
:class:`~fxinspect.run.program.Probe` at the program's probe points, runs the program
(once, interpreted, or many times, compiled) and returns per-node values keyed by the
fx node's name: never by position. Assembly merges the results of all passes by name
into the report's records. A new figure is a field in :mod:`fxinspect.fields` and a
pass that fills it; no other pass changes.

Example: a pass that counts output elements per node

>>> import torch, fxinspect
>>> class Elements:
...     fields = ()
...     def run(self, program):
...         found = {}
...         program.run(program.inputs, Probe(after=lambda name, out: found.update({name: out.numel()})))
...         return PassResult(extras={"elements": found})
>>> program = fxinspect.instrument(torch.nn.Linear(3, 2), torch.randn(4, 3))
>>> Elements().run(program).extras["elements"]            # 4 * 2
{'linear': 8}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..program import InstrumentedProgram, Probe

__all__ = ["Pass", "PassResult", "Probe"]


@dataclass
class PassResult:
    """What one pass measured.

    ``nodes`` maps a node's name to ``{record field: value}`` (fields of
    :class:`~fxinspect.records.NodeRecord`: declared figures such as ``latency``, or
    ``outputs``/``aten``). ``fields`` names the declared figures the pass measured
    (those it did not stay ``None`` in modules and totals). ``report`` holds
    :class:`~fxinspect.records.ReportRecord` fields (``timing``, ``unattributed``),
    ``notes`` lines for ``report.capture.notes``, ``extras`` facts for assembly or the
    caller that are not record fields.
    """

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    fields: tuple[str, ...] = ()
    report: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)


class Pass(Protocol):
    """One run (or series of runs) of the instrumented program."""

    def run(self, program: InstrumentedProgram) -> PassResult: ...
