"""How the run went, for the summary: measured and predicted time, and memory.

Lines of :func:`fxinspect.views.summary.summary`, each a label column then its text
(:func:`line`); the summary puts them after the model's costs.
"""

from __future__ import annotations

from .. import formatting as fmt
from ..records import MemoryRecord, ReportRecord, TimingInfo

__all__ = ["LIST", "WIDTH", "line", "memory_lines", "predicted_lines", "timing_lines"]

WIDTH = 12  # width of the label column
LIST = 3  # names listed before "… (+n)"
_RATIO_TOLERANCE = 0.1  # node sum vs plain forward: beyond 10 % the parts do not add up
_BUSY = 0.1  # an IQR above 10 % of the median: other work shared the machine


def line(label: str, text: str) -> str:
    """One summary line: ``label`` padded to the label column, then ``text``."""
    return f"{label:<{WIDTH}} {text}".rstrip()


def predicted_lines(report: ReportRecord) -> list[str]:
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
    return [line("predicted", text)]


def timing_lines(timing: TimingInfo) -> list[str]:
    lines = [
        line(
            "latency",
            f"{fmt.seconds(timing.plain_forward)} per forward, {fmt.seconds(timing.forward)} instrumented"
            f" ({timing.device}, median of {fmt.count(timing.repeats)} after {fmt.count(timing.warmup)} warm-up)",
        )
    ]
    spread = timing.plain_forward_iqr
    if spread is not None and timing.plain_forward:
        busy = spread / timing.plain_forward > _BUSY
        lines.append(
            line(
                "spread",
                f"IQR {fmt.seconds(spread)} = {fmt.percent(spread / timing.plain_forward)} of the median"
                + ("; the machine was busy: times are noisy (re-run, or raise repeats)" if busy else ""),
            )
        )
    batch = "" if timing.batch_size is None else f" at batch {fmt.count(timing.batch_size)}"
    if timing.throughput is not None:
        spread = _deciles(timing.plain_forward_p10, timing.plain_forward_p90, "forward")
        lines.append(line("throughput", f"{fmt.count(timing.throughput)} inputs/s{batch}{spread}"))
    if timing.training_step is not None:
        rate = timing.training_inputs_per_second
        per = f"{fmt.count(rate)} inputs/s{batch}; " if rate is not None else ""
        lines.append(
            line(
                "training",
                f"{per}a step (forward, loss, backward) {fmt.seconds(timing.training_step)}"
                f"{_deciles(timing.training_step_p10, timing.training_step_p90, 'step')}",
            )
        )
    ratio = timing.node_sum_ratio
    verdict = "" if abs(ratio - 1) <= _RATIO_TOLERANCE else "; per-node times do not add up to the forward"
    lines.append(
        line(
            "node sum",
            f"{fmt.seconds(timing.node_sum)} = {fmt.ratio(ratio)} the plain forward{verdict}",
        )
    )
    if timing.plain_backward is not None:
        ratio = timing.backward_node_sum_ratio
        verdict = "" if abs(ratio - 1) <= _RATIO_TOLERANCE else "; per-node times do not add up to the backward"
        lines.append(
            line(
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


def memory_lines(m: MemoryRecord, measurable: bool) -> list[str]:
    where = f"at node {m.peak_node!r} ({m.peak_phase})" if m.peak_node else f"({m.peak_phase})"
    resident = f"params {fmt.nbytes(m.params)}, buffers {fmt.nbytes(m.buffers)}, inputs {fmt.nbytes(m.inputs)}"
    if m.optimizer_state is not None:
        resident += f", optimizer state {fmt.nbytes(m.optimizer_state)}"
    lines = [
        line("memory", f"peak {fmt.nbytes(m.peak)} {where} on top of {fmt.nbytes(m.resident)} resident ({resident})")
    ]
    if m.measured_peak is not None:
        gap = m.measured_peak / m.peak - 1 if m.peak else 0.0
        lines.append(
            line(
                "",
                f"measured {fmt.nbytes(m.measured_peak)} by {m.measured_by} ({gap:+.1%}: memory the model does not see)"
                if abs(gap) > 0.005
                else f"measured {fmt.nbytes(m.measured_peak)} by {m.measured_by}",
            )
        )
    if m.measured_eager_peak is not None:
        gap = m.measured_eager_peak / m.peak - 1 if m.peak else 0.0
        lines.append(
            line(
                "",
                f"on the model's own call (not the analysed program) {fmt.nbytes(m.measured_eager_peak)} ({gap:+.1%})",
            )
        )
    lines += [line("", note) for note in m.notes]  # (what it assumed: the kernels' scratch)
    if m.measured_peak is None and measurable:
        lines.append(line("", "an estimate of the tensor model; measure_memory=True measures the allocator beside it"))
    if m.alive_at_peak:
        largest = [t for t in m.alive_at_peak if t.nbytes][:LIST]  # (an empty tensor is alive, but holds nothing)
        top = ", ".join(f"{t.node or '(outside nodes)'} {fmt.nbytes(t.nbytes)} {t.role}" for t in largest) or "all 0 B"
        lines.append(line("", f"{fmt.plural(len(m.alive_at_peak), 'tensor')} alive at the peak, largest: {top}"))
    if m.saved:
        # with no backward asked for, saved memory means grad mode was on for an inference
        hint = "; for inference, call analyze inside torch.no_grad()" if m.backward_start is None else ""
        lines.append(
            line("saved", f"{fmt.nbytes(m.saved)} kept by autograd for the backward (each storage once){hint}")
        )
    if m.gradients is not None:
        lines.append(line("gradients", f"{fmt.nbytes(m.gradients)} in parameters' .grad after the backward"))
    if m.optimizer is not None:
        lines.append(
            line(
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
        lines.append(line("step peak", f"{fmt.nbytes(m.total_peak)} with everything resident"))
    return lines
