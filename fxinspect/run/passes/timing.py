"""The timing pass: per-node latency, medians over repeats of the compiled program.

The only probe is a clock mark after each op node, so the timed program stays as close
to the plain one as possible; plain and timed runs alternate so that drift (thermal,
other load) hits both alike. A node's latency is the time from the previous mark (or
the start of the run) to its own: everything between two ops is charged to the later
one, so the per-node times add up to the whole run. On CUDA the marks are events,
read after one synchronisation per run.

Example
-------
>>> import torch, fxinspect
>>> program = fxinspect.instrument(torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU()), torch.randn(4, 3))
>>> result = TimingPass(warmup=1, repeats=3).run(program)
>>> sorted(result.nodes), result.report["timing"].repeats
(['_0', '_1'], 3)
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...capture.autocast_cache import empty_autocast_cache
from ...options import Options
from ...progress import SKIP_TIMING, tracked
from ...records import TimingInfo
from ...tensors import has_data
from ..clock import Clock
from ..program import InstrumentedProgram, Probe
from ..recorders import loss_for
from . import PassResult
from .backward_timing import time_backward

__all__ = ["TimingPass"]


def deciles(times: list[float]) -> tuple[float, float]:
    """The 10th and 90th percentiles of ``times`` (the one time, twice, for a single run)."""
    if len(times) < 2:
        return times[0], times[0]
    cuts = statistics.quantiles(times, n=10, method="inclusive")
    return cuts[0], cuts[-1]


def iqr(times: list[float]) -> float:
    """The interquartile range of ``times`` (0 for a single run)."""
    if len(times) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return q3 - q1


class TimingPass:
    """Warm-up, then ``repeats`` alternating plain and timed runs; per-node medians.

    ``copy_inputs`` names the inputs the forward writes in place: then every run gets
    fresh copies of the inputs, made before its clock starts. With ``backward``, the
    backward of ``loss_fn(output)`` (default: :func:`~fxinspect.run.recorders.default_loss`) is timed
    too (:func:`.backward_timing.time_backward`).
    """

    def __init__(
        self,
        warmup: int = 2,
        repeats: int = 10,
        copy_inputs: Sequence[str] = (),
        backward: bool = False,
        loss_fn: Callable[[Any], torch.Tensor] | None = None,
    ):
        self.warmup, self.repeats, self.copy_inputs = warmup, repeats, tuple(copy_inputs)
        self.loss_fn = loss_for(backward, loss_fn)

    @classmethod
    def planned(cls, options: Options, program: InstrumentedProgram, counted: PassResult) -> TimingPass | None:
        """The pass ``options`` ask for (``timing=True``), or ``None`` when the inputs or
        weights hold no data to time (a virtual run). The inputs the counting run wrote
        are copied."""
        tensors = [*program.inputs, *program.parameters(), *program.buffers()]
        if not options.timing or not all(has_data(t) for t in tensors):
            return None
        return cls(options.warmup, options.repeats, counted.written_inputs, options.backward, options.loss_fn)

    def run(self, program: InstrumentedProgram) -> PassResult:
        tensors = program.inputs
        device = tensors[0].device if tensors else torch.device("cpu")
        clock = Clock(device)
        timed = program.compile(Probe(after=clock.mark))
        plain = program.compile()

        def inputs() -> list[torch.Tensor]:
            return [t.clone() for t in tensors] if self.copy_inputs else tensors

        for _ in tracked("timing warm-up", range(self.warmup), detail=SKIP_TIMING):
            plain(*inputs())
            timed(*inputs())
        per_node: dict[str, list[float]] = {name: [] for name in program.probe_points}
        whole, plain_times = [], []
        for _ in tracked("timing", range(self.repeats), detail=SKIP_TIMING):
            empty_autocast_cache()  # (each repeat casts the weights, as a step in its own region)
            plain_times.append(clock.time(plain, inputs()))
            run_inputs = inputs()
            empty_autocast_cache()
            clock.start()
            timed(*run_inputs)
            total = 0.0
            for name, seconds in clock.intervals():
                per_node[name].append(seconds)
                total += seconds
            whole.append(total)
        latencies = {name: statistics.median(times) for name, times in per_node.items()}
        plain_median = statistics.median(plain_times)
        batch = int(tensors[0].shape[0]) if tensors and tensors[0].dim() > 0 else None
        low, high = deciles(plain_times)
        info = TimingInfo(
            device=str(device),
            warmup=self.warmup,
            repeats=self.repeats,
            forward=statistics.median(whole),
            plain_forward=plain_median,
            node_sum=sum(latencies.values()),
            batch_size=batch,
            throughput=batch / plain_median if batch and plain_median > 0 else None,
            plain_forward_iqr=iqr(plain_times),
            plain_forward_p10=low,
            plain_forward_p90=high,
        )
        nodes = {name: {"latency": t, "latency_iqr": iqr(per_node[name])} for name, t in latencies.items()}
        if self.loss_fn is not None:
            times = time_backward(program, self.loss_fn, self.warmup, self.repeats, self.copy_inputs)
            for name, seconds in times.latencies.items():
                nodes[name]["backward_latency"] = seconds
            low, high = deciles(times.steps)
            info = dataclasses.replace(
                info,
                backward=times.timed,
                plain_backward=times.plain,
                backward_node_sum=sum(times.latencies.values()),
                training_step=statistics.median(times.steps),
                training_step_p10=low,
                training_step_p90=high,
            )
        written = ", ".join(self.copy_inputs)
        notes = [f"the forward writes its input(s) {written} in place: timing runs used copies"] if written else []
        return PassResult(nodes=nodes, report={"timing": info}, notes=notes)
