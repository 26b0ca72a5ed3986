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

import statistics
import time
from typing import Any, Callable, Sequence

import torch

from ...records import TimingInfo
from ..program import InstrumentedProgram, Probe
from . import PassResult

__all__ = ["Clock", "TimingPass"]


class Clock:
    """Marks ``(node name, time)`` after each node; CUDA events on a CUDA device.

    ``mark`` is the probe the timed program calls after every op: on CPU a closure over
    the list and the clock, so that it adds as little as possible between two ops.
    """

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list[tuple[str | None, Any]] = []  # cleared, never rebound: mark holds it
        if self.cuda:
            self.mark = self._event_mark
        else:
            append, clock = self.marks.append, time.perf_counter

            def mark(name: str | None, _output: Any = None) -> None:
                append((name, clock()))

            self.mark = mark

    def _event_mark(self, name: str | None, _output: Any = None) -> None:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        self.marks.append((name, event))

    def start(self) -> None:
        """Begin a run: forget the last run's marks and mark its start."""
        self.marks.clear()
        self.mark(None)

    def intervals(self) -> list[tuple[str, float]]:
        """``(node name, seconds since the previous mark)`` for each mark of the last run."""
        m = self.marks
        if self.cuda:
            torch.cuda.synchronize()
            return [(name, a.elapsed_time(b) / 1e3) for (_, a), (name, b) in zip(m, m[1:])]
        return [(name, b - a) for (_, a), (name, b) in zip(m, m[1:])]

    def time(self, program: Callable, inputs: list[torch.Tensor]) -> float:
        """Seconds one call of ``program`` takes."""
        self.start()
        program(*inputs)
        self.mark(None)
        return self.intervals()[0][1]


class TimingPass:
    """Warm-up, then ``repeats`` alternating plain and timed runs; per-node medians.

    ``copy_inputs`` names the inputs the forward writes in place: then every run gets
    fresh copies of the inputs, made before its clock starts.
    """

    fields = ("latency",)

    def __init__(self, warmup: int = 2, repeats: int = 10, copy_inputs: Sequence[str] = ()):
        self.warmup, self.repeats, self.copy_inputs = warmup, repeats, copy_inputs

    def run(self, program: InstrumentedProgram) -> PassResult:
        tensors = program.inputs
        device = tensors[0].device if tensors else torch.device("cpu")
        clock = Clock(device)
        timed = program.compile(Probe(after=clock.mark))
        plain = program.compile()

        def inputs() -> list[torch.Tensor]:
            return [t.clone() for t in tensors] if self.copy_inputs else tensors

        for _ in range(self.warmup):
            plain(*inputs())
            timed(*inputs())
        per_node: dict[str, list[float]] = {name: [] for name in program.probe_points}
        whole, plain_times = [], []
        for _ in range(self.repeats):
            plain_times.append(clock.time(plain, inputs()))
            run_inputs = inputs()
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
        info = TimingInfo(
            device=str(device),
            warmup=self.warmup,
            repeats=self.repeats,
            forward=statistics.median(whole),
            plain_forward=plain_median,
            node_sum=sum(latencies.values()),
            batch_size=batch,
            throughput=batch / plain_median if batch and plain_median > 0 else None,
        )
        written = ", ".join(self.copy_inputs)
        notes = [f"the forward writes its input(s) {written} in place: timing runs used copies"] if written else []
        return PassResult(
            nodes={name: {"latency": t} for name, t in latencies.items()},
            fields=self.fields,
            report={"timing": info},
            notes=notes,
        )
