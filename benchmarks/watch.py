"""Overhead of ``fxinspect.watch`` on a training loop, as a ratio to the same loop without it.

Run: ``python benchmarks/watch.py [--cycles N] [--only cnn|gpt2] [--threads 1] [--null] [--by-step]``.
One process.

Two copies of the model, equal to the bit, train side by side on the same batch: one
watched for the whole run (``watch(every=10)``: the first step of every ten logged, the
rest not), one plain. A cycle is ``every`` steps of each, the order swapped from cycle to
cycle; its ratio is the watched copy's time over the plain one's. The figure is the
median ratio over the cycles, with the quartiles beside it: a shared, noisy machine
drifts less within a cycle than across a run, and the spread says how far to trust the
median. Beside it, the ratio of the summed times, which also counts the rare long
pauses the median leaves out (a full collection of Python's garbage collector, set off
by what a logged step keeps, costs about 200 ms here; so does the machine's own load).

* a small CNN, synthetic 32x32 images, batch 32;
* ``GPT2LMHeadModel(GPT2Config(n_layer=2))``, batch 2, sequence 64.

``--threads 1`` runs torch on one thread and times each copy's steps by the thread's own
CPU clock (``time.thread_time``), which other processes on the machine disturb less.
``--by-step`` times each step of a cycle alone, watched beside plain, and prints the
median extra time of the logged step, of the one after it and of the others.
``--null`` watches neither copy: the ratio the measurement itself gives two equal loops
(1.000 on a quiet machine; how far it strays says how much a ratio here can be trusted).
The target (issue 25): within 1.05x of the plain loop, for both models.
"""

from __future__ import annotations

import argparse
import copy
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


class Loop:
    """One copy of the model and its optimizer: ``steps(n)`` trains ``n`` steps, timed."""

    def __init__(self, model, batch, loss_fn, clock) -> None:
        self.model, self.batch, self.loss_fn, self.clock = model, batch, loss_fn, clock
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def steps(self, n: int) -> float:
        start = self.clock()
        for _ in range(n):
            self.opt.zero_grad(set_to_none=True)
            self.loss_fn(self.model, self.batch).backward()
            self.opt.step()
        return self.clock() - start


def measure(name, make, batch, loss_fn, every, cycles, clock, target, null=False, by_step=False) -> float:
    """The median over ``cycles`` of (``every`` watched steps) / (``every`` plain steps);
    ``by_step``: each step of a cycle timed alone, watched beside plain, and the median
    extra time of the logged step, the one after it and the others printed."""
    torch.manual_seed(0)
    model = make()
    twin = copy.deepcopy(model)
    watched, plain = Loop(model, batch, loss_fn, clock), Loop(twin, batch, loss_fn, clock)
    watcher = None if null else fxinspect.watch(model, every=every)
    for loop in (watched, plain):  # warm-up: the watch's first logged step, allocations
        loop.steps(2 * every)
    ratios, totals, extra = [], [0.0, 0.0], []
    for cycle in range(cycles):
        if by_step:  # (the warm-up ended on a multiple of every: a cycle's first step is logged)
            pairs = []
            for i in range(every):
                order = (watched, plain) if (cycle + i) % 2 == 0 else (plain, watched)
                one = {id(loop): loop.steps(1) for loop in order}
                pairs.append((one[id(watched)], one[id(plain)]))
            extra.append([w - p for w, p in pairs])
            times = {id(watched): sum(w for w, _ in pairs), id(plain): sum(p for _, p in pairs)}
        else:
            order = (watched, plain) if cycle % 2 == 0 else (plain, watched)
            times = {id(loop): loop.steps(every) for loop in order}
        ratios.append(times[id(watched)] / times[id(plain)])
        totals[0], totals[1] = totals[0] + times[id(watched)], totals[1] + times[id(plain)]
    if watcher is not None:
        watcher.remove()
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    step = plain.steps(every) / every
    print(
        f"{name + (' (null: neither watched)' if null else ''):28} every={every}, a plain step {step * 1e3:.1f} ms: {every} steps watched / plain "
        f"{median:.3f} (quartiles {q1:.3f}-{q3:.3f}, {cycles} cycles; all cycles' times summed: "
        f"{totals[0] / totals[1]:.3f}, with the collector's and the machine's pauses); target {target}: "
        f"{'met' if median <= target else 'NOT MET'}",
        flush=True,
    )
    if extra:
        at = [statistics.median(e[i] for e in extra) * 1e3 for i in range(every)]
        print(
            f"  per step, watched - plain (median): the logged step {at[0]:.2f} ms, the next {at[1]:.2f} ms, "
            f"the other {every - 2} {statistics.mean(at[2:]):.3f} ms each",
            flush=True,
        )
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cycles",
        type=int,
        default=None,
        help="cycles per model (default: 200 CNN, about a minute; 40 GPT-2, about 11)",
    )
    parser.add_argument("--only", choices=["cnn", "gpt2"], default=None)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (1: time by the thread's CPU clock)")
    parser.add_argument("--null", action="store_true", help="watch neither copy: the measurement's own ratio")
    parser.add_argument(
        "--by-step", action="store_true", help="time each step alone: the extra of the logged step and of the others"
    )
    args = parser.parse_args()
    clock = time.perf_counter
    if args.threads is not None:
        torch.set_num_threads(args.threads)
        clock = time.thread_time if args.threads == 1 else clock
    print(f"torch threads: {torch.get_num_threads()}, clock: {clock.__name__}")
    if args.only != "gpt2":
        images = (torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,)))
        loss = lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1])  # noqa: E731
        measure("small CNN", cnn, images, loss, 10, args.cycles or 200, clock, 1.05, args.null, args.by_step)
    if args.only != "cnn":
        from transformers import GPT2Config, GPT2LMHeadModel

        ids = torch.randint(0, 50257, (2, 64))
        make = lambda: GPT2LMHeadModel(GPT2Config(n_layer=2)).train()  # noqa: E731
        loss = lambda m, b: m(input_ids=b, labels=b).loss  # noqa: E731
        measure(
            "GPT2LMHeadModel(n_layer=2)", make, ids, loss, 10, args.cycles or 40, clock, 1.05, args.null, args.by_step
        )


if __name__ == "__main__":
    main()
