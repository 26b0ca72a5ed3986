"""Overhead of ``fxinspect.watch`` on a training loop, as a ratio to the same loop without it.

Run: ``python benchmarks/watch.py [--repeats 5]``. One process; the watched and plain
loops alternate and each ratio is the median of ``repeats`` pairs:

* a small CNN, 200 steps on synthetic 32x32 images, ``watch(every=10)``;
* ``GPT2LMHeadModel(GPT2Config(n_layer=2))``, 200 steps at batch 2, sequence 64,
  ``watch(every=10)``.

The target (issue 25): within 1.05x of the plain loop, for both.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import fxinspect


def cnn() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.ReLU(inplace=True),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(32, 10),
    )


def loop(model, batch, loss_fn, steps: int) -> float:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss_fn(model, batch).backward()
        opt.step()
    return time.perf_counter() - start


def measure(name, make, batch, loss_fn, every, steps, repeats, target) -> None:
    model = make()
    loop(model, batch, loss_fn, 5)  # warm-up
    ratios = []
    for _ in range(repeats):
        plain = loop(model, batch, loss_fn, steps)
        w = fxinspect.watch(model, every=every)
        watched = loop(model, batch, loss_fn, steps)
        w.remove()
        ratios.append(watched / plain)
    r = statistics.median(ratios)
    print(
        f"{name:34} every={every:<4} {steps} steps: watched / plain = {r:.3f} "
        f"(runs {min(ratios):.3f}-{max(ratios):.3f}); target {target}: {'met' if r <= target else 'NOT MET'}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--only", choices=["cnn", "gpt2"], default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.only != "gpt2":
        measure_cnn(args)
    if args.only != "cnn":
        measure_gpt2(args)


def measure_cnn(args) -> None:
    images = (torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,)))
    measure(
        "small CNN",
        cnn,
        images,
        lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]),
        10,
        args.steps,
        args.repeats,
        1.05,
    )


def measure_gpt2(args) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    ids = torch.randint(0, 50257, (2, 64))
    measure(
        "GPT2LMHeadModel(n_layer=2)",
        lambda: GPT2LMHeadModel(GPT2Config(n_layer=2)).train(),
        ids,
        lambda m, b: m(input_ids=b, labels=b).loss,
        10,
        args.steps,
        args.repeats,
        1.05,
    )


if __name__ == "__main__":
    main()
