"""The few lines ``print(report)`` shows: totals, timing, capture and findings.

This module writes what the model is and costs (inputs, parameters, FLOPs, the receptive
field), how it was captured and what went wrong (NaN/Inf); :mod:`.summary_run` how the
run went (measured and predicted time, memory).

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(288, 10))
>>> report = fxinspect.analyze(model, torch.randn(1, 3, 8, 8), timing=False)
>>> print(*summary(report, width=None).splitlines()[1:4], sep=chr(10))   # print(report) shows it all
inputs       1×3×8×8 f32 -> 1×10 f32
params       3.11 K (3.11 K trainable, 0 frozen), 0 buffer elements; 12.16 KiB of parameters + 0 B of buffers
FLOPs        21.90 K (MACs 10.66 K)

"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

from .. import formatting as fmt
from ..records import NonFinite, ReportRecord, TensorMeta
from ..records.nodes import RECEPTIVE_STOPS
from .communication import communication_lines
from .summary_run import LIST as _LIST
from .summary_run import WIDTH as _WIDTH
from .summary_run import line as _line
from .summary_run import memory_lines, predicted_lines, timing_lines

__all__ = ["summary"]

_UNCOUNTED = 5  # uncounted ops listed one per line; the rest are counted
_KINDS = {"nan": "NaN", "inf": "Inf", "nan+inf": "NaN and Inf"}
_QUANTITY = re.compile(r"(\d) (?=[A-Za-zµ%×])")  # "512 B": a number and its unit stay on one line
_KEEP = "\u00a0"  # (textwrap breaks at ASCII whitespace only)
_RAISED = re.compile(r"^[\w.]*(Error|Exception|Failure|Unsupported)\w*:")  # "TypeError: ..."


def _names(names: Iterable[str]) -> str:
    return fmt.listing((n or "(root)" for n in names), _LIST)


def _tensors(metas: Iterable[TensorMeta]) -> str:
    return ", ".join(fmt.tensor(m.shape, m.dtype) for m in metas) or fmt.MISSING


def _params(report: ReportRecord) -> list[str]:
    t = report.totals
    lines = [
        _line(
            "params",
            f"{fmt.count(t.params)} ({fmt.count(t.trainable_params)} trainable, {fmt.count(t.frozen_params)} frozen),"
            f" {fmt.count(t.buffers)} buffer elements; {fmt.nbytes(t.param_bytes)} of parameters"
            f" + {fmt.nbytes(t.buffer_bytes)} of buffers",
        )
    ]
    comm, memory = report.communication, report.memory
    if comm is not None and memory is not None:  # the figures above are the whole model's
        lines.append(
            _line(
                "",
                f"rank {comm.rank} of {comm.world_size} holds {fmt.nbytes(memory.params)} of the parameters (its shards)",
            )
        )
    for s in report.shared:
        lines.append(_line("shared", f"{s.name} also as {_names(s.aliases)} ({fmt.count(s.numel)}, counted once)"))
    return lines


def _costs(report: ReportRecord) -> list[str]:
    t = report.totals
    lines = [
        _line("FLOPs", f"{fmt.count(t.flops, t.partial)} (MACs {fmt.count(t.macs, t.partial)})"),
        _line(
            "bytes",
            f"{fmt.nbytes(t.bytes_read, t.partial)} read, {fmt.nbytes(t.bytes_written, t.partial)} written;"
            f" {fmt.number(t.intensity)} FLOP/B",
        ),
    ]
    for u in report.uncounted[:_UNCOUNTED]:
        lines.append(_line("uncounted", f"{u.op}: {fmt.plural(u.calls, 'call')} in {_names(u.modules)}"))
    if len(report.uncounted) > _UNCOUNTED:
        more = fmt.plural(len(report.uncounted) - _UNCOUNTED, "more op")
        lines.append(_line("uncounted", f"… and {more}, see report.uncounted"))
    if t.partial:
        lines.append(_line("", f"{fmt.PARTIAL} totals are lower bounds: the ops above have no FLOP rule"))
    if t.backward_flops is not None:  # a backward ran
        lines.append(
            _line(
                "backward",
                f"{fmt.count(t.backward_flops, t.partial)} FLOPs (MACs "
                f"{fmt.count(t.backward_macs, t.partial)}), "
                f"{fmt.nbytes(t.backward_bytes_moved)} moved",
            )
        )
    # ran outside the graph's nodes: listed, in no node's figures and not in the totals
    for label, calls in (("outside fwd", report.unattributed), ("outside bwd", report.backward_unattributed)):
        if calls:
            ops = fmt.listing(f"{c.op} ×{c.calls}" for c in calls)
            flops = sum(c.flops for c in calls)
            lines.append(_line(label, f"{ops} ({fmt.count(flops)} FLOPs, not in the totals)"))
    return lines


def _receptive(report: ReportRecord) -> list[str]:
    """The receptive field at the output of the last spatial stage (the last op node
    whose field is a window), and where the field becomes global; where it stops when the
    output's is unknown (an earlier node's field is not the model's)."""
    spatial = [n for n in report.nodes if isinstance(n.receptive_field, tuple)]
    if not spatial:
        return []
    root = report.modules.get("")
    if root is not None and root.receptive_field is None:
        note = next((n for n in report.capture.notes if n.startswith(RECEPTIVE_STOPS)), None)
        stop = f"it stops at {note[len(RECEPTIVE_STOPS) :].split('; ')[0]}" if note else "no field reaches it"
        return [_line("receptive", f"unknown at the output: {stop}")]
    last = spatial[-1]
    size, stride = "×".join(map(str, last.receptive_field)), "×".join(f"{s:g}" for s in last.effective_stride)
    where = last.module_path or "the root"
    text = f"{size} input positions at {where} ({last.name}), effective stride {stride}"
    after = next((n for n in report.nodes[report.nodes.index(last) :] if n.receptive_field == "global"), None)
    if after is not None:
        text += f"; global from {after.module_path or after.name}"
    return [_line("receptive", text)]


def _capture(report: ReportRecord) -> list[str]:
    # a tier that raised "failed"; one set aside for a better one (it had to hide modules in
    # leaves, or left ops uncounted) was only passed over
    lines = [
        _line(f"{tier} failed" if _RAISED.match(reason) else f"{tier} skipped", reason)
        for tier, reason in report.capture.failures
    ]
    lines += [_line("note", note) for note in report.capture.notes]
    return lines


def _nonfinite(nf: NonFinite, label: str = "non-finite", tensors: str = "input") -> list[str]:
    where = f"module {nf.module_path!r}" if nf.module_path else "the root module"
    lines = [
        _line(
            label,
            f"{_KINDS.get(nf.kind, nf.kind)} first at node {nf.root_cause!r} ({where}, {nf.module_type});"
            f" {fmt.plural(len(nf.downstream), 'node')} downstream",
        )
    ]
    if nf.sources:
        lines.append(_line("", f"already non-finite: {_names(nf.sources)}"))
    for i, m in enumerate(nf.inputs):
        values = fmt.stats(m.stats) if m.stats else "values not read"
        lines.append(_line("", f"{tensors} {i}: {fmt.tensor(m.shape, m.dtype)}  {values}"))
    return lines


def summary(report: ReportRecord, width: int | None = 100) -> str:
    """A short text summary of ``report``: what ``print(report)`` shows.

    Totals (parameters, FLOPs, MACs, bytes, intensity), latency and throughput when
    timing ran, how the graph was captured, uncounted ops and where NaN/Inf started.
    The per-module and per-op detail is in :func:`fxinspect.views.table.table`.
    Lines longer than ``width`` wrap under their text (``None``: never).
    """
    root = report.modules.get("")
    env = report.environment
    head = " · ".join(
        [
            root.type if root else "model",
            f"captured by {report.capture.method}",
            f"torch {env.torch_version} on {env.device}"
            + (" (virtual: fake tensors, no values)" if env.virtual else ""),
        ]
    )
    lines = [head, _line("inputs", f"{_tensors(report.inputs)} -> {_tensors(report.outputs)}")]
    lines += _params(report)
    lines += _costs(report)
    lines += _receptive(report)
    lines += timing_lines(report.timing) if report.timing else [_line("latency", f"{fmt.MISSING} (timing did not run)")]
    lines += predicted_lines(report)
    lines += memory_lines(report.memory, measurable=not env.virtual) if report.memory else []
    if report.communication is not None:
        lines += [
            _line("collectives" if i == 0 else "", text)
            for i, text in enumerate(communication_lines(report.communication))
        ]
    lines += _capture(report)
    lines += _nonfinite(report.nonfinite) if report.nonfinite else []
    if report.grad_nonfinite:
        lines += _nonfinite(report.grad_nonfinite, "grad non-finite", "gradient reaching it")
    if width is not None:
        hanging = " " * (_WIDTH + 1)  # continuation lines start under the text, past the labels
        lines = [
            part.replace(_KEEP, " ")
            for line in lines
            for part in textwrap.wrap(_QUANTITY.sub(rf"\1{_KEEP}", line), width, subsequent_indent=hanging) or [""]
        ]
    return "\n".join(lines)
