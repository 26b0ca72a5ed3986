"""Overhead of ``analyze(backward=True)`` beside FlopCounterMode, and its exactness.

Run: ``python benchmarks/backward.py [--repeats 5]``. One process, train mode, batch 2:
the plain forward+backward, FlopCounterMode around the same forward+backward, and
``analyze(model, x, backward=True, timing=False)``, interleaved; medians. Then the
backward MACs against FlopCounterMode's forward+backward minus its forward, corrected
as in ``tests/reference.py`` (CPU attention, grouped-convolution weight gradients).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torchvision
from torch.utils.flop_counter import FlopCounterMode

import fxinspect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from interleaved import medians
from reference import reference_backward_flops


def measure(name: str, repeats: int) -> None:
    torch.manual_seed(0)
    model, x = torchvision.models.get_model(name, weights=None).train(), torch.randn(2, 3, 224, 224)

    def plain():
        model(x).sum().backward()
        model.zero_grad(set_to_none=True)

    def flop_counter():
        with FlopCounterMode(display=False):
            plain()

    def analyze():
        return fxinspect.analyze(model, x, timing=False, backward=True, memory=False)

    def analyze_with_memory():
        return fxinspect.analyze(model, x, timing=False, backward=True)

    variants = {
        "plain forward+backward": plain,
        "FlopCounterMode": flop_counter,
        "analyze(backward=True, memory=False)": analyze,
        "analyze(backward=True)": analyze_with_memory,
    }
    med = medians(variants, repeats)
    print(f"\n{name} (train, batch 2, timing=False), medians of {repeats}:")
    for key, value in med.items():
        print(
            f"  {key:38s} {value * 1e3:9.1f} ms  {value / med['plain forward+backward']:5.2f}x plain  "
            f"{value / med['FlopCounterMode']:5.2f}x FlopCounterMode"
        )
    ratio = med["analyze(backward=True, memory=False)"] / med["FlopCounterMode"]
    print(
        f"  target: counting and gradients / FlopCounterMode <= 1.5: {ratio:.2f} {'met' if ratio <= 1.5 else 'NOT MET'}"
        f" (the memory pass is one more forward+backward: {med['analyze(backward=True)'] / med['FlopCounterMode']:.2f})"
    )
    timed = fxinspect.analyze(model, x, backward=True, memory=False, repeats=repeats).timing
    print(
        f"  per-node backward latencies sum to {timed.backward_node_sum_ratio:.3f}x the plain backward "
        f"({timed.backward_node_sum * 1e3:.1f} of {timed.plain_backward * 1e3:.1f} ms; target within 15 %)"
    )
    report = analyze()
    reference, _ = reference_backward_flops(model, (x,))
    print(
        f"  2 * backward MACs {2 * report.totals.backward_macs:,} vs corrected FlopCounterMode {reference:,}: "
        f"{'equal' if 2 * report.totals.backward_macs == reference else 'DIFFERENT'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", default="resnet50,vit_b_16")
    opts = parser.parse_args()
    for name in opts.models.split(","):
        measure(name, opts.repeats)


if __name__ == "__main__":
    main()
