"""Will it fit: checkpoint plans applied and measured, and a 70B sweep on the meta device.

Run: ``python benchmarks/will_it_fit.py [--part plans|batch|sweep] [--gpt2 4,512] [--budget 1GiB]``.

``plans`` (issue 22, item 3): for GPT-2 (12 layers, random weights) and ResNet-50
training steps with SGD, a plan for budgets at 50 % and 75 % of the unplanned
``total_peak``, found on the meta device; then the plan applied to the model and

* analysed again (meta): its peak within the budget;
* run for real on this CPU, measured by the allocator (``torch.profiler``, kernel
  scratch included: ``tests/reference.py``'s ``allocated_step_peak``): within 3 % of
  the plan's peak and never over the budget;
* its extra backward MACs (the recomputation) against those the plan's curve predicts
  from the unplanned report alone.

``batch`` (issue 39): ``max_batch`` on conv-heavy models (ResNet-50, ConvNeXt-T; SGD,
meta device, a budget of ``--budget``, default 1 GiB), then the real steps at the
answer and the next batch on this CPU measured by the allocator (``torch.profiler``,
kernel scratch included: ``tests/reference.py``'s ``allocated_step_peak``): the batch
said to fit must fit, and the next must not.

``sweep`` (item 1): Llama-2-70B's training step with AdamW over 8 batch sizes on the
meta device, with the wall time, the table and the sweep's notes (which points shared
the capture, which were analysed and which derived). ``--workers N`` passes
``workers=N`` (default: one a core; ``0`` analyses every point in this process). Each
sweep runs in a fresh process: a sweep forks its workers only before the process's
first backward on fake tensors (see ``fxinspect/planning/workers.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torchvision

import fxinspect
from fxinspect.formatting import units

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from reference import allocated_step_peak


def _gpt2(batch: int, seq: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=12)).train()
    inputs = {"input_ids": torch.randint(0, 50257, (batch, seq)), "use_cache": False}
    return f"GPT-2 12 layers, {batch}x{seq}", model, inputs, lambda out: out.logits.sum()


def _resnet50(batch: int):
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).train()
    return f"ResNet-50, batch {batch}", model, torch.randn(batch, 3, 224, 224), lambda out: out.sum()


def plans(gpt2: tuple[int, int], which: list[str]) -> None:
    optimizer = torch.optim.SGD
    builds = {"resnet50": lambda: _resnet50(16), "gpt2": lambda: _gpt2(*gpt2)}
    for name, model, inputs, loss_fn in (builds[w]() for w in which):
        options = dict(loss_fn=loss_fn, optimizer=optimizer)
        base = fxinspect.analyze(model, inputs, backward=True, device="meta", timing=False, **options)
        unplanned = base.memory.total_peak
        print(f"\n{name}: unplanned peak {units.nbytes(unplanned)} ({base.capture.method})")
        for share in (0.75, 0.5):
            budget = int(share * unplanned)
            start = time.perf_counter()
            plan = fxinspect.checkpoint_plan(model, inputs, budget, **options)
            seconds = time.perf_counter() - start
            with plan.apply(model):
                applied = fxinspect.analyze(model, inputs, backward=True, device="meta", timing=False, **options)
                real = allocated_step_peak(model, inputs, loss_fn, optimizer)
            extra = applied.totals.backward_macs - base.totals.backward_macs
            predicted = plan.curve[len(plan.modules)].recompute_macs
            print(
                f"  budget {share:.0%} = {units.nbytes(budget)}: {len(plan.modules)} module(s), planned in "
                f"{seconds:.1f} s ({plan.notes[-1]})\n"
                f"    plan peak {units.nbytes(plan.peak)}, analysed applied {units.nbytes(applied.memory.total_peak)}, "
                f"real {units.nbytes(real)} (real / plan {real / plan.peak:.4f}); fits: plan {plan.fits}, "
                f"real {real <= budget}\n"
                f"    recomputed MACs: applied - unplanned {extra:,}, predicted {predicted:,} "
                f"({'equal' if extra == predicted else 'DIFFER'})"
            )
            for note in plan.notes[:-1]:
                print(f"    note: {note}")


def batches(budget: str) -> None:
    optimizer = torch.optim.SGD
    for name in ("resnet50", "convnext_tiny"):
        torch.manual_seed(0)
        model = torchvision.models.get_model(name, weights=None).train()
        loss_fn = lambda out: out.sum()  # noqa: E731
        start = time.perf_counter()
        fit = fxinspect.max_batch(
            model, lambda b: torch.randn(b, 3, 224, 224), budget, backward=True, optimizer=optimizer, loss_fn=loss_fn
        )
        seconds = time.perf_counter() - start
        real = {
            b: allocated_step_peak(model, torch.randn(b, 3, 224, 224), loss_fn, optimizer)
            for b in (fit.batch, fit.batch + 1)
        }
        print(
            f"{name}, budget {fit.budget}: max_batch {fit.batch} ({len(fit.tried)} analyses, {seconds:.0f} s); "
            f"predicted {units.nbytes(fit.peak)} / next {units.nbytes(fit.next_peak)}; "
            f"real (allocator) {units.nbytes(real[fit.batch])} / next {units.nbytes(real[fit.batch + 1])}; "
            f"real / predicted {real[fit.batch] / fit.peak:.4f} / {real[fit.batch + 1] / fit.next_peak:.4f}; "
            f"fits really: {real[fit.batch] <= fit.budget.usable}, next really over: {real[fit.batch + 1] > fit.budget.usable}",
            flush=True,
        )


def sweep_70b(workers: int | None) -> None:
    from llama_training_meta import meta_model  # (this folder is on the path when a benchmark runs)

    model = meta_model("70b")
    start = time.perf_counter()
    result = fxinspect.sweep(
        model,
        lambda b: {"input_ids": torch.zeros(b, 2048, dtype=torch.long), "use_cache": False},
        [1, 2, 4, 8, 16, 32, 64, 128],
        backward=True,
        optimizer=torch.optim.AdamW,
        loss_fn=lambda out: out.logits.float().sum(),
        device="meta",
        timing=False,
        budget="80GiB",
        workers=workers,
    )
    print(result.table())
    for note in result.notes:
        print(f"  note: {note}")
    print(f"Llama-2-70B, seq 2048, 8 batch sizes, workers={workers}: {time.perf_counter() - start:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["plans", "batch", "sweep", "all"], default="all")
    parser.add_argument("--budget", default="1GiB", help="max_batch's budget in the batch part")
    parser.add_argument("--plans", default="resnet50,gpt2", help="the plans part's models (resnet50, gpt2)")
    parser.add_argument("--gpt2", default="4,512", help="GPT-2's batch,seq")
    parser.add_argument("--workers", type=int, default=None, help="the sweep's workers= (default: one a core)")
    args = parser.parse_args()
    if args.part in ("plans", "all"):
        plans(tuple(int(x) for x in args.gpt2.split(",")), args.plans.split(","))
    if args.part in ("batch", "all"):
        batches(args.budget)
    if args.part in ("sweep", "all"):
        sweep_70b(args.workers)


if __name__ == "__main__":
    main()
