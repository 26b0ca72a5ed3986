"""Overhead of ``fxinspect.watch`` on a training loop, as a ratio to the same loop without it.

Run: ``python benchmarks/watch.py [--repeats 5]``. One process. Two measures of the
cost of ``every`` steps:

* per kind of step: blocks of plain and watched steps alternate, and the cost comes
  from the median plain, unlogged and logged step;
* paired cycles: ``every`` watched steps (one logged, the rest not; the watch put on
  and taken off outside the clock) and ``every`` plain ones alternate, their order
  swapped each time; the median of the cycles' ratios. A noisy machine drifts less
  within a pair than across blocks, so this is the figure held to the target.

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


def timed_steps(model, batch, loss_fn, steps: int) -> list[float]:
    """Seconds of each of ``steps`` training steps."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model, batch).backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return times


def measure(name, make, batch, loss_fn, every, steps, repeats, target) -> None:
    """Blocks of ``steps`` plain steps and ``steps`` watched ones, alternating ``repeats``
    times; the cost of ``every`` steps from the medians of plain, unlogged and logged
    steps (a median per kind of step: a noisy machine moves a whole loop's time more)."""
    model = make()
    timed_steps(model, batch, loss_fn, 3)  # warm-up
    plain, logged, unlogged = [], [], []
    for _ in range(repeats):
        plain += timed_steps(model, batch, loss_fn, steps)
        w = fxinspect.watch(model, every=every)
        for i, t in enumerate(timed_steps(model, batch, loss_fn, steps)):
            (logged if i % every == 0 else unlogged).append(t)
        w.remove()
    p, u, g = (statistics.median(v) for v in (plain, unlogged, logged))
    by_kind = ((every - 1) * u + g) / (every * p)
    ratios = []
    for cycle in range(repeats * steps // every):
        times = {}
        for watched in (cycle % 2 == 0, cycle % 2 == 1):
            w = fxinspect.watch(model, every=every) if watched else None
            times[watched] = sum(timed_steps(model, batch, loss_fn, every))
            if w is not None:
                w.remove()
        ratios.append(times[True] / times[False])
    paired = statistics.median(ratios)
    print(
        f"{name:28} every={every}: a plain step {p * 1e3:.1f} ms, unlogged {u * 1e3:.1f} ms, logged "
        f"{g * 1e3:.1f} ms; {every} steps watched / plain: by kind of step {by_kind:.3f}, paired cycles "
        f"{paired:.3f} (median of {len(ratios)}); target {target}: {'met' if paired <= target else 'NOT MET'}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="steps per block")
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
