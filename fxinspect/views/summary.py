"""The few lines ``print(report)`` shows: totals, timing, capture and findings.

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
from ..records import MemoryRecord, NonFinite, ReportRecord, TensorMeta, TimingInfo
from ..records.nodes import RECEPTIVE_STOPS
from .communication import communication_lines

__all__ = ["summary"]

_WIDTH = 12  # width of the label column
_LIST = 3  # names listed before "… (+n)"
_UNCOUNTED = 5  # uncounted ops listed one per line; the rest are counted
_RATIO_TOLERANCE = 0.1  # node sum vs plain forward: beyond 10 % the parts do not add up
_BUSY = 0.1  # an IQR above 10 % of the median: other work shared the machine
_KINDS = {"nan": "NaN", "inf": "Inf", "nan+inf": "NaN and Inf"}
_QUANTITY = re.compile(r"(\d) (?=[A-Za-zµ%×])")  # "512 B": a number and its unit stay on one line
_KEEP = "\u00a0"  # (textwrap breaks at ASCII whitespace only)
_RAISED = re.compile(r"^[\w.]*(Error|Exception|Failure|Unsupported)\w*:")  # "TypeError: ..."


def _line(label: str, text: str) -> str:
    return f"{label:<{_WIDTH}} {text}".rstrip()


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


def _predicted(report: ReportRecord) -> list[str]:
    """The time model's forward, and its ratio to the measured plain forward."""
    model, predicted = report.time_model, report.totals.predicted_latency
    if model is None or predicted is None:
        return []
    text = f"{fmt.seconds(predicted)} forward on {model.name} (roofline of every aten op, launch included)"
    if report.totals.backward_predicted_latency is not None:
        text += f", {fmt.seconds(report.totals.backward_predicted_latency)} backward"
    if report.timing is not None and report.timing.plain_forward:
        text += (
            f"; {predicted / report.timing.plain_forward:.2f}× the measured {fmt.seconds(report.timing.plain_forward)}"
        )
    return [_line("predicted", text)]


def _timing(timing: TimingInfo) -> list[str]:
    lines = [
        _line(
            "latency",
            f"{fmt.seconds(timing.plain_forward)} per forward, {fmt.seconds(timing.forward)} instrumented"
            f" ({timing.device}, median of {fmt.count(timing.repeats)} after {fmt.count(timing.warmup)} warm-up)",
        )
    ]
    spread = timing.plain_forward_iqr
    if spread is not None and timing.plain_forward:
        busy = spread / timing.plain_forward > _BUSY
        lines.append(
            _line(
                "spread",
                f"IQR {fmt.seconds(spread)} = {fmt.percent(spread / timing.plain_forward)} of the median"
                + ("; the machine was busy: times are noisy (re-run, or raise repeats)" if busy else ""),
            )
        )
    batch = "" if timing.batch_size is None else f" at batch {fmt.count(timing.batch_size)}"
    if timing.throughput is not None:
        spread = _deciles(timing.plain_forward_p10, timing.plain_forward_p90, "forward")
        lines.append(_line("throughput", f"{fmt.count(timing.throughput)} inputs/s{batch}{spread}"))
    if timing.training_step is not None:
        rate = timing.training_inputs_per_second
        per = f"{fmt.count(rate)} inputs/s{batch}; " if rate is not None else ""
        lines.append(
            _line(
                "training",
                f"{per}a step (forward, loss, backward) {fmt.seconds(timing.training_step)}"
                f"{_deciles(timing.training_step_p10, timing.training_step_p90, 'step')}",
            )
        )
    ratio = timing.node_sum_ratio
    verdict = "" if abs(ratio - 1) <= _RATIO_TOLERANCE else "; per-node times do not add up to the forward"
    lines.append(
        _line(
            "node sum",
            f"{fmt.seconds(timing.node_sum)} = {fmt.ratio(ratio)} the plain forward{verdict}",
        )
    )
    if timing.plain_backward is not None:
        ratio = timing.backward_node_sum_ratio
        verdict = "" if abs(ratio - 1) <= _RATIO_TOLERANCE else "; per-node times do not add up to the backward"
        lines.append(
            _line(
                "backward",
                f"{fmt.seconds(timing.plain_backward)} per backward, "
                f"{fmt.seconds(timing.backward)} with a clock on every autograd node; node sum "
                f"{fmt.seconds(timing.backward_node_sum)} = {fmt.ratio(ratio)} the plain backward"
                f"{verdict}",
            )
        )
    return lines


def _deciles(low: float | None, high: float | None, what: str) -> str:
    """``"; forward p10–p90 1.20–1.40 ms"``, or nothing when not measured."""
    if low is None or high is None:
        return ""
    return f"; {what} p10–p90 {fmt.seconds(low)}–{fmt.seconds(high)}"


def _memory(m: MemoryRecord, measurable: bool) -> list[str]:
    where = f"at node {m.peak_node!r} ({m.peak_phase})" if m.peak_node else f"({m.peak_phase})"
    resident = f"params {fmt.nbytes(m.params)}, buffers {fmt.nbytes(m.buffers)}, inputs {fmt.nbytes(m.inputs)}"
    if m.optimizer_state is not None:
        resident += f", optimizer state {fmt.nbytes(m.optimizer_state)}"
    lines = [
        _line("memory", f"peak {fmt.nbytes(m.peak)} {where} on top of {fmt.nbytes(m.resident)} resident ({resident})")
    ]
    if m.measured_peak is not None:
        gap = m.measured_peak / m.peak - 1 if m.peak else 0.0
        lines.append(
            _line(
                "",
                f"measured {fmt.nbytes(m.measured_peak)} by {m.measured_by} ({gap:+.1%}: memory the model does not see)"
                if abs(gap) > 0.005
                else f"measured {fmt.nbytes(m.measured_peak)} by {m.measured_by}",
            )
        )
    if m.measured_eager_peak is not None:
        gap = m.measured_eager_peak / m.peak - 1 if m.peak else 0.0
        lines.append(
            _line(
                "",
                f"on the model's own call (not the analysed program) {fmt.nbytes(m.measured_eager_peak)} ({gap:+.1%})",
            )
        )
    lines += [_line("", note) for note in m.notes]  # (what it assumed: the kernels' scratch)
    if m.measured_peak is None and measurable:
        lines.append(_line("", "an estimate of the tensor model; measure_memory=True measures the allocator beside it"))
    if m.alive_at_peak:
        largest = [t for t in m.alive_at_peak if t.nbytes][:_LIST]  # (an empty tensor is alive, but holds nothing)
        top = ", ".join(f"{t.node or '(outside nodes)'} {fmt.nbytes(t.nbytes)} {t.role}" for t in largest) or "all 0 B"
        lines.append(_line("", f"{fmt.plural(len(m.alive_at_peak), 'tensor')} alive at the peak, largest: {top}"))
    if m.saved:
        # with no backward asked for, saved memory means grad mode was on for an inference
        hint = "; for inference, call analyze inside torch.no_grad()" if m.backward_start is None else ""
        lines.append(
            _line("saved", f"{fmt.nbytes(m.saved)} kept by autograd for the backward (each storage once){hint}")
        )
    if m.gradients is not None:
        lines.append(_line("gradients", f"{fmt.nbytes(m.gradients)} in parameters' .grad after the backward"))
    if m.optimizer is not None:
        lines.append(
            _line(
                "optimizer",
                f"{m.optimizer}: {fmt.nbytes(m.optimizer_state)} of state, "
                f"+{fmt.nbytes(m.optimizer_step)} while step() runs"
                + (
                    f" beside {fmt.nbytes(m.held_after_backward)} the loop still holds (gradients, output, loss)"
                    if m.held_after_backward is not None
                    else ""
                ),
            )
        )
    if m.backward_start is not None:
        lines.append(_line("step peak", f"{fmt.nbytes(m.total_peak)} with everything resident"))
    return lines


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
    lines += _timing(report.timing) if report.timing else [_line("latency", f"{fmt.MISSING} (timing did not run)")]
    lines += _predicted(report)
    lines += _memory(report.memory, measurable=not env.virtual) if report.memory else []
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
