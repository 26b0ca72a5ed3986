"""The counting pass: costs, output metadata and value statistics of every node.

One interpreted run under :class:`~fxinspect.run.dispatch.CountingMode`. The probe
before a node names it for the mode, so every aten op it issues (inside leaf modules
too) is priced and charged to it; the probe after it records each output tensor's
metadata and queues its statistics. Inputs and weights are read before the run
(the model may write them in place), and an input the forward writes is noted.

Example
-------
>>> import torch, fxinspect
>>> program = fxinspect.instrument(torch.nn.Linear(3, 2), torch.randn(4, 3))
>>> result = CountPass(check_finite=True).run(program)
>>> node = result.nodes["linear"]
>>> node["macs"], node["outputs"][0].shape, node["nan_count"]        # 4*3*2
(24, (4, 2), 0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ...records import AtenCall, OpStatus, TensorMeta
from ...tensors import tensors_in, version
from ..dispatch import IGNORED, UNATTRIBUTED, CountingMode, OpCost
from ..findings import nonfinite_tensors
from ..program import InstrumentedProgram
from ..recorders import Recorder
from ..values import Description, ValueReader, describe
from . import PassResult
from .one_run import OneRun, run_once
from .receptive_field import FieldRecorder

__all__ = ["CountPass", "CountRecorder", "counting", "uncounted"]

Described = list[tuple[Description, "int | None"]]
"""Tensors as recorded: each one's ``describe`` tuple and its statistics slot."""


def aten_calls(costs: dict[str, OpCost]) -> tuple[tuple[AtenCall, ...], int, int, int, int]:
    """The node's aten calls as records, and their flops, macs, bytes read and written."""
    if len(costs) == 1:  # the common case, without a loop
        ((op, c),) = costs.items()
        call = AtenCall.of(op, c.calls, c.flops, c.macs, c.bytes_read, c.bytes_written, c.status, c.kind or "")
        return (call,), c.flops, c.macs, c.bytes_read, c.bytes_written
    calls = []
    flops = macs = read = written = 0
    for op, c in costs.items():
        calls.append(AtenCall.of(op, c.calls, c.flops, c.macs, c.bytes_read, c.bytes_written, c.status, c.kind or ""))
        flops += c.flops
        macs += c.macs
        read += c.bytes_read
        written += c.bytes_written
    return tuple(calls), flops, macs, read, written


def uncounted(result: PassResult) -> list[str]:
    """The aten ops a counting pass's nodes issued without a rule (the report's
    ``uncounted``, whose totals are partial), each once, in order of appearance."""
    found: dict[str, None] = {}
    for record in result.nodes.values():
        for call in record.get("aten", ()):
            if call.status is OpStatus.UNCOUNTED:
                found[call.op] = None
    return list(found)


def _floating(meta: TensorMeta) -> bool:
    return meta.dtype.startswith(("float", "bfloat", "complex"))


class CountPass:
    """Prices every aten op, records every output; reads values when ``check_finite``."""

    def __init__(self, check_finite: bool = True, model: torch.nn.Module | None = None):
        self.check_finite = check_finite
        self.model = model  # searched for non-finite weights when a NaN shows up

    def run(self, program: InstrumentedProgram) -> PassResult:
        return run_once(program, counting(program, self.check_finite, self.model))


def counting(
    program: InstrumentedProgram,
    check_finite: bool = True,
    model: torch.nn.Module | None = None,
    mode: Any = None,
    hold: bool = True,
) -> list[Recorder]:
    """The count's recorders: the receptive field's (when an input starts one: models
    without a spatial input pay nothing) and the :class:`CountRecorder`, in that order
    (the field's notes come first)."""
    count = CountRecorder(program, check_finite, model, mode, hold)
    return [FieldRecorder(program), count] if FieldRecorder.wanted(program) else [count]


class CountRecorder(Recorder):
    """Prices every aten op, records every output; reads values when ``check_finite``.

    It leads the forward's dispatch with ``mode`` (a :class:`CountingMode` unless given:
    a live step gives its own). Inputs and weights are read at construction, before the
    run: the model may write them in place. ``hold=False`` copies the values it reads at
    once (see ``ValueReader``), for a run whose storage lifetimes are modelled. ``model``
    is searched for non-finite weights when a NaN shows up.
    """

    def __init__(
        self,
        program: InstrumentedProgram,
        check_finite: bool = True,
        model: torch.nn.Module | None = None,
        mode: Any = None,
        hold: bool = True,
    ) -> None:
        self.program, self.model = program, model
        self.reader = reader = ValueReader(hold) if check_finite else None
        self.read = reader.read if reader else None
        self.counting = mode = mode if mode is not None else CountingMode()
        mode.before_write = reader.flush if reader else None
        self.described: dict[str, Described] = {}
        self.sources = self._static_values(program, self.read, self.described)
        self.versions = [version(t) for t in program.inputs]

    def mode(self) -> CountingMode:
        return self.counting

    def before(self, name: str) -> None:
        self.counting.node = name

    def after(self, name: str, out: Any) -> None:
        mode, read = self.counting, self.read
        mode.node = IGNORED  # describing outputs is ours (a nested tensor's sizes are read by ops)
        if read is not None and mode.unwritten_storages:  # an empty-like op's output: no values yet
            read = self._read_written
        if type(out) is torch.Tensor:  # the common case, spelled out: it runs per node
            self.described[name] = [(describe(out), read(out) if read else None)]
        else:
            self.described[name] = [(describe(t), read(t) if read else None) for t in tensors_in(out)]
        mode.node = UNATTRIBUTED

    def _read_written(self, t: torch.Tensor) -> Any:
        """The reader's figures, ``None`` for storages an empty-like op returned and no op wrote."""
        return None if self.counting.unwritten(t) else self.read(t)

    def result(self, run: OneRun) -> PassResult:
        """The counting pass's result."""
        program, mode = self.program, self.counting
        stats, model = run.stats(self.reader), self.model
        result = PassResult()
        self._records(program, self.described, mode.costs, stats, result.nodes)
        unattributed = mode.costs.get(UNATTRIBUTED)
        if unattributed:
            result.report["unattributed"] = aten_calls(unattributed)[0]
        tensors = program.inputs
        written = [
            n
            for n, t, v in zip(program.capture.inputs.names, tensors, self.versions)
            if v is not None and version(t) != v
        ]
        if written:
            result.written_inputs = tuple(written)
            result.notes.append(
                f"the forward writes its input(s) {', '.join(written)} in place: the analysed run wrote them "
                "once, as calling the model does"
            )
        bad = [
            name
            for name, slot in self.sources
            if slot is not None and stats[slot] is not None and not stats[slot].finite
        ]
        # where a NaN came from matters only when one appeared: a pass over every weight
        # (5 ms on resnet50) is skipped when every value read was finite
        if model is not None and any(s is not None and not s.finite for s in stats):
            bad += nonfinite_tensors(model)
        result.nonfinite_sources = tuple(bad)
        return result

    @staticmethod
    def _static_values(program: InstrumentedProgram, read: Any, described: dict[str, Described]) -> list:
        """Describe (and queue statistics of) the inputs and the tensors get_attr nodes
        read; returns ``(source name, statistics slot)`` of each input."""
        tensors = iter(program.inputs)
        sources = []
        seen: dict[int, int | None] = {}  # a weight read at many places is read once
        for node in program.graph.nodes:
            if node.op == "placeholder":
                t = next(tensors)
                slot = read(t) if read else None
                described[node.name] = [(describe(t), slot)]
                sources.append((f"input {node.name}", slot))
            elif node.op == "get_attr":
                value = program.attribute(node)
                if isinstance(value, torch.Tensor):
                    if id(value) not in seen:
                        seen[id(value)] = read(value) if read else None
                    described[node.name] = [(describe(value), seen[id(value)])]
        return sources

    @staticmethod
    def _records(
        program: InstrumentedProgram,
        described: dict[str, Described],
        costs: dict[Any, dict[str, OpCost]],
        stats: Sequence[Any],
        out: dict[str, dict[str, Any]],
    ) -> None:
        """Per node: outputs as ``TensorMeta``, aten calls and their sums, NaN/Inf counts."""
        ops = set(program.probe_points)
        no_costs: dict[str, OpCost] = {}
        for name, tensors in described.items():
            is_op = name in ops
            if len(tensors) == 1:  # the common case, spelled out: it runs per node
                (shape, dtype, device, size), slot = tensors[0]
                found_stats = stats[slot] if slot is not None else None
                outputs: tuple[TensorMeta, ...] = (TensorMeta.of(shape, dtype, device, size, found_stats),)
                if found_stats is not None:
                    nan, inf = found_stats.nan_count, found_stats.inf_count
                elif is_op and not _floating(outputs[0]):
                    nan = inf = 0
                else:
                    nan = inf = None
            else:
                outputs = tuple([TensorMeta.of(*d, stats[slot] if slot is not None else None) for d, slot in tensors])
                found = [m.stats for m in outputs if m.stats is not None]
                if found or (is_op and not any(_floating(m) for m in outputs)):
                    # counts are known when values were read, or when nothing floating came out
                    nan, inf = sum(s.nan_count for s in found), sum(s.inf_count for s in found)
                else:
                    nan = inf = None
            if not is_op:
                out[name] = {"outputs": outputs, "nan_count": nan, "inf_count": inf}
                continue
            calls, flops, macs, read, written = aten_calls(costs.get(name, no_costs))
            out[name] = {
                "outputs": outputs,
                "nan_count": nan,
                "inf_count": inf,
                "aten": calls,
                "flops": flops,
                "macs": macs,
                "bytes_read": read,
                "bytes_written": written,
            }
