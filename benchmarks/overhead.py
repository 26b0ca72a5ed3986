"""Overhead of fxinspect as ratios to the plain forward pass, beside peer tools.

Run: ``python benchmarks/overhead.py [--repeats 7] [--bars]``. Everything runs in one
process, in eval mode under ``torch.no_grad()``, with the garbage collector on, and the
variants are interleaved within each repeat so that machine noise hits all of them
alike (:mod:`interleaved`); each figure is a median, and the bar's ratio is given with
the spread of its per-round ratios. ``--bars`` times only what the bars compare (the
default ``analyze`` and ``FlopCounterMode``), so that more rounds fit.

Measured, for torchvision resnet50 and vit_b_16 at batch 1 (224x224), and for a
chain of 2,000 tiny ops (where tracing and per-op bookkeeping dominate):

* ``counting run``: the counting pass over the instrumented program: one run under the
  counting dispatch mode, with value statistics (what ``analyze`` pays to count);
* ``timing run``: one run of the program compiled with clock probes;
* ``analyze(timing=False)``, the default: one run for counts, value statistics and
  the memory model; the same with ``memory=False`` (no memory model) and with
  ``measure_memory=True`` (two more runs, the program and the model's own call, measured
  by the allocator's profiler);
* ``FlopCounterMode``, ``torchinfo.summary`` and fvcore's ``FlopCountAnalysis`` on
  the same model and input, where installed.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
import torchvision
from interleaved import samples
from torch.utils.flop_counter import FlopCounterMode

import fxinspect
from fxinspect.run.passes import Probe
from fxinspect.run.passes.count import CountPass
from fxinspect.run.passes.timing import Clock


class TinyChain(torch.nn.Module):
    """2,000 elementwise ops on a 16-element tensor: graph overhead, not arithmetic."""

    def __init__(self, n: int = 2000):
        super().__init__()
        self.n = n

    def forward(self, x):
        for _ in range(self.n // 2):
            x = x * 1.0001
            x = x + 0.5
        return x


def _peers(model: torch.nn.Module, x: torch.Tensor) -> dict[str, Callable[[], object]]:
    peers: dict[str, Callable[[], object]] = {}

    def flop_counter():
        with FlopCounterMode(display=False):
            model(x)

    peers["FlopCounterMode"] = flop_counter
    try:
        import torchinfo

        peers["torchinfo.summary"] = lambda: torchinfo.summary(model, input_data=x, verbose=0)
    except ImportError:
        pass
    try:
        from fvcore.nn import FlopCountAnalysis

        def fvcore_total():
            a = FlopCountAnalysis(model, x)
            a.unsupported_ops_warnings(False)
            a.uncalled_modules_warnings(False)
            return a.total()

        peers["fvcore FlopCountAnalysis"] = fvcore_total
    except ImportError:
        pass
    return peers


def measure(name: str, model: torch.nn.Module, x: torch.Tensor, repeats: int, bars: bool = False) -> None:
    model.eval()
    program = fxinspect.instrument(model, x)
    tensors = program.inputs
    clock = Clock(x.device)
    timed = program.compile(Probe(after=clock.mark))

    def counting_run():
        CountPass(check_finite=True, model=model).run(program)

    def timing_run():
        clock.start()
        timed(*tensors)

    variants: dict[str, Callable[[], object]] = {
        "plain forward": lambda: model(x),
        "counting run": counting_run,
        "timing run": timing_run,
        "analyze(timing=False)": lambda: fxinspect.analyze(model, x, timing=False),
        "memory=False": lambda: fxinspect.analyze(model, x, timing=False, memory=False),
        "measure_memory=True": lambda: fxinspect.analyze(model, x, timing=False, measure_memory=True),
        **_peers(model, x),
    }
    if bars:
        variants = {k: variants[k] for k in ("plain forward", "analyze(timing=False)", "FlopCounterMode")}
    with torch.no_grad():
        found = samples(variants, repeats)
        report = None if bars else fxinspect.analyze(model, x, warmup=2, repeats=repeats)
    med = {k: statistics.median(v) for k, v in found.items()}
    base = med["plain forward"]
    ops = len(program.probe_points)
    print(f"\n{name}: {ops} op nodes, plain forward {base * 1e3:.2f} ms (median of {repeats})")
    for key, value in med.items():
        print(f"  {key:28s} {value * 1e3:9.2f} ms  {value / base:6.2f}x forward")
    flop_counter = med["FlopCounterMode"]
    rounds = sorted(a / f for a, f in zip(found["analyze(timing=False)"], found["FlopCounterMode"]))
    print(
        f"  analyze(timing=False) / FlopCounterMode per round: median {statistics.median(rounds):.2f}, "
        f"{rounds[0]:.2f} to {rounds[-1]:.2f}"
    )
    tiny = name.startswith("2,000")
    bar = ("analyze(timing=False) (memory modelled) / FlopCounterMode", med["analyze(timing=False)"] / flop_counter)
    if report is None:
        limit = 2.0 if tiny else 1.5
        print(f"  target {bar[0]} <= {limit}: {bar[1]:.2f} {'met' if bar[1] <= limit else 'NOT MET'}")
        return
    print(
        f"  analyze(timing=False) / FlopCounterMode = {med['analyze(timing=False)'] / flop_counter:.2f}; "
        f"memory=False {med['memory=False'] / flop_counter:.2f}; "
        f"measure_memory=True {med['measure_memory=True'] / flop_counter:.2f}"
    )
    t = report.timing
    print(
        f"  per-node latency sum {t.node_sum * 1e3:.2f} ms vs plain forward {t.plain_forward * 1e3:.2f} ms "
        f"(ratio {t.node_sum_ratio:.3f}); instrumented forward {t.forward * 1e3:.2f} ms"
    )
    # the bounds issues 2 and 24 set; a noisy machine moves every ratio, so read several runs
    checks = [(*bar, 2.0 if tiny else 1.5)]
    if not tiny:
        checks += [
            ("counting run / plain forward", med["counting run"] / base, 1.5),
            ("timing run / plain forward", med["timing run"] / base, 1.1),
            ("|per-node sum / plain forward - 1|", abs(t.node_sum_ratio - 1), 0.15),
        ]
    for label, value, limit in checks:
        print(f"  target {label} <= {limit}: {value:.2f} {'met' if value <= limit else 'NOT MET'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--models", default="resnet50,vit_b_16,tiny2000")
    parser.add_argument("--bars", action="store_true", help="time only the default analyze and FlopCounterMode")
    opts = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name in opts.models.split(","):
        if name == "tiny2000":
            measure("2,000 tiny ops", TinyChain(), torch.randn(16), opts.repeats, opts.bars)
        else:
            model = torchvision.models.get_model(name, weights=None)
            measure(name, model, torch.randn(1, 3, 224, 224), opts.repeats, opts.bars)


if __name__ == "__main__":
    main()
