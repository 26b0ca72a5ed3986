"""The memory model's peak against the allocator's, on real models.

Run: ``python benchmarks/memory.py [--models resnet50 vit_b_16 convnext_tiny timm:mixer_s16_224 gpt2 checkpointed]``
(``timm:NAME`` builds timm's model, random weights).
Each model in train mode at batch 2, twice: the forward alone under ``torch.no_grad()``
and a training step (``backward=True``). For each: the estimated peak (storages the
ops allocate, alive as the eager model keeps them), the allocator's peak on the model's
own eager call (``torch.profiler`` on CPU, ``torch.cuda`` on CUDA) and on the analysed
run, the ratios, and whether the tensors listed at the peak sum to it. The estimate
counts tensors and, probed once per op and shape, the scratch memory a kernel takes and
gives back inside one op (``fxinspect.run.memory.scratch``).
"""

from __future__ import annotations

import argparse
import time

import torch
import torchvision
from torch.utils.checkpoint import checkpoint

import fxinspect


class Checkpointed(torch.nn.Module):
    """Eight MLP blocks, each recomputed in the backward (torch.utils.checkpoint)."""

    def __init__(self, width: int = 1024, blocks: int = 8):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width))
            for _ in range(blocks)
        )

    def forward(self, x):
        for block in self.blocks:
            x = x + checkpoint(block, x, use_reentrant=False)
        return x


def build(name: str):
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(GPT2Config(n_layer=4))
        # use_cache=False in both calls, as analyze passes it: the cache is no part of one forward
        inputs = {"input_ids": torch.randint(0, 50257, (2, 128)), "use_cache": False}
        return model, inputs, lambda out: out.logits.sum()
    if name == "checkpointed":
        return Checkpointed(), torch.randn(2, 256, 1024), None
    if name.startswith("timm:"):
        import timm

        return timm.create_model(name[5:], pretrained=False), torch.randn(2, 3, 224, 224), None
    return torchvision.models.get_model(name, weights=None), torch.randn(2, 3, 224, 224), None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models",
        nargs="*",
        default=["resnet50", "vit_b_16", "convnext_tiny", "timm:mixer_s16_224", "gpt2", "checkpointed"],
    )
    args = parser.parse_args()
    print(
        f"{'model':14} {'run':9} {'estimate':>13} {'eager model':>13} {'est/eager':>9} {'analysed run':>13} "
        f"{'est/run':>8} {'alive sum':>9}  {'estimated peak at':32} {'s':>5}"
    )
    for name in args.models:
        torch.manual_seed(0)
        model, x, loss_fn = build(name)
        model.train()
        for run in ("no_grad", "training"):
            start = time.perf_counter()
            if run == "no_grad":
                with torch.no_grad():
                    r = fxinspect.analyze(model, x, timing=False, measure_memory=True)
            else:
                r = fxinspect.analyze(model, x, timing=False, backward=True, loss_fn=loss_fn, measure_memory=True)
            seconds = time.perf_counter() - start
            m = r.memory
            eager = eager_peak(model, x, run == "training", loss_fn)
            alive = sum(t.nbytes for t in m.alive_at_peak) == m.peak
            print(
                f"{name:14} {run:9} {m.peak:13,} {eager:13,} {m.peak / eager - 1:+9.2%} {m.measured_peak:13,} "
                f"{m.peak / m.measured_peak - 1:+8.2%} {'exact' if alive else 'NO':>9}  "
                f"{m.peak_phase.value + ':' + m.peak_node[-22:]:32} {seconds:5.1f}",
                flush=True,
            )


def eager_peak(model: torch.nn.Module, x, training: bool, loss_fn) -> int:
    """The allocator's peak growth over the model's own call (and when ``training`` the
    backward of ``loss_fn(output)``, by default the output's sum, every ``.grad``
    starting from ``None``), as a plain step runs it."""
    from fxinspect.run.memory.allocator import AllocatorWatch

    device = next(model.parameters()).device
    watch = AllocatorWatch(device, None)
    args, kwargs = ((), x) if isinstance(x, dict) else ((x,), {})
    if not training:
        with torch.no_grad(), watch:
            model(*args, **kwargs)
        return watch.peak
    for p in model.parameters():
        p.grad = None
    with watch:
        out = model(*args, **kwargs)
        loss = loss_fn(out) if loss_fn else sum(t.sum() for t in (out if isinstance(out, tuple) else (out,)))
        watch.begin_backward()
        loss.backward()
        del loss, out
    for p in model.parameters():
        p.grad = None
    return watch.peak


if __name__ == "__main__":
    main()
