"""Seconds to draw a diagram from a report (the target: under 2 s each).

Run: ``python benchmarks/diagrams.py [--repeats 5]``. Each report is made once; then
``report.plot(path)`` is timed, PNG and SVG, median of ``repeats`` (the first call of
the process, which loads matplotlib's fonts, is left out as warm-up).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torchvision

import fxinspect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel

    image = torch.randn(1, 3, 224, 224)
    cases = [
        ("resnet50 depth 1", torchvision.models.resnet50(weights=None), image, {"depth": 1}),
        ("resnet50 depth 2", torchvision.models.resnet50(weights=None), image, {"depth": 2}),
        ("resnet50 every op", torchvision.models.resnet50(weights=None), image, {"depth": None}),
        ("vit_b_16 depth 2", torchvision.models.vit_b_16(weights=None), image, {"depth": 2}),
        ("gpt2 depth 2", GPT2LMHeadModel(GPT2Config()), {"input_ids": torch.randint(0, 50257, (1, 128))}, {"depth": 2}),
    ]
    out = Path(tempfile.mkdtemp())
    warm = True
    for name, model, inputs, options in cases:
        with torch.no_grad():
            report = fxinspect.analyze(model.eval(), inputs, timing=False, memory=False)
        if warm:
            report.plot(out / "warm.png", **options)
            warm = False
        for suffix in ("png", "svg"):
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                report.plot(out / f"d.{suffix}", **options)
                times.append(time.perf_counter() - start)
            median = statistics.median(times)
            print(f"{name:20} {suffix}: {median:6.2f} s  {'met' if median < 2 else 'NOT MET'} (under 2 s)", flush=True)


if __name__ == "__main__":
    main()
