"""Will training a Llama-2 fit? The memory of a training step on the meta device.

Run: ``python benchmarks/llama_training_meta.py [--size 70b] [--seq 2048] [--optimizer AdamW]``.

A Llama-2-shaped ``LlamaForCausalLM`` built under ``torch.device("meta")`` (float32,
batch 1, train mode, ``use_cache=False``) is analysed with ``backward=True`` and the
optimizer: nothing is allocated, every figure comes from fake tensors. Printed: the
training peak (``report.memory.total_peak``) beside the closed-form sum of parameters,
gradients and optimizer state (4 bytes per element each, AdamW two moments) and the
activations autograd saves, with the wall time and this process's peak RSS.
Targets for 70B: under 2 minutes and 8 GiB of RSS.
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

import fxinspect

SIZES = {  # hidden, intermediate, layers, heads, kv heads: Llama-2's published shapes
    "7b": (4096, 11008, 32, 32, 32),
    "13b": (5120, 13824, 40, 40, 40),
    "70b": (8192, 28672, 80, 64, 8),
}
GIB = 2**30


def closed_form_params(
    hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int, vocab: int = 32000
) -> int:
    kv = hidden // heads * kv_heads
    attention = 2 * hidden * hidden + 2 * hidden * kv  # q, o; k, v
    return 2 * vocab * hidden + layers * (attention + 3 * hidden * intermediate + 2 * hidden) + hidden


def meta_model(size: str = "70b", layers: int | None = None) -> torch.nn.Module:
    """A Llama-2-shaped ``LlamaForCausalLM`` of ``size`` on the meta device, in train mode
    (with ``layers`` decoder layers instead of the published number, when given)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, intermediate, published, heads, kv_heads = SIZES[size]
    layers = layers or published
    config = LlamaConfig(
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
    )
    with torch.device("meta"):
        return LlamaForCausalLM(config).train()


def training_report(size: str = "70b", seq: int = 2048, optimizer: str = "AdamW") -> fxinspect.Report:
    """The report of one training step of a Llama-2-shaped model on the meta device."""
    model = meta_model(size)
    ids = torch.zeros(1, seq, dtype=torch.long, device="meta")
    return fxinspect.analyze(
        model,
        {"input_ids": ids, "use_cache": False},
        timing=False,
        backward=True,
        loss_fn=lambda out: out.logits.float().sum(),
        optimizer=getattr(torch.optim, optimizer),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="70b")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--optimizer", default="AdamW")
    args = parser.parse_args()
    hidden, intermediate, layers, heads, kv_heads = SIZES[args.size]
    start = time.perf_counter()
    report = training_report(args.size, args.seq, args.optimizer)
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    m = report.memory
    params = closed_form_params(hidden, intermediate, layers, heads, kv_heads)
    assert report.totals.params == params, (report.totals.params, params)
    closed = 4 * params * (1 + 1 + 2) + m.saved  # weights, gradients, two moments; saved activations
    print(
        f"Llama-2-{args.size}, seq {args.seq}, batch 1, float32, {args.optimizer}; captured by {report.capture.method}"
    )
    print(f"  parameters         {params:,} ({4 * params / GIB:,.1f} GiB)")
    print(f"  gradients          {m.gradients / GIB:10,.1f} GiB")
    print(
        f"  optimizer state    {m.optimizer_state / GIB:10,.1f} GiB   (step scratch {m.optimizer_step / GIB:,.1f} GiB)"
    )
    print(f"  saved activations  {m.saved / GIB:10,.1f} GiB")
    print(f"  closed form        {closed / GIB:10,.1f} GiB   (parameters + gradients + state + saved activations)")
    print(
        f"  training peak      {m.total_peak / GIB:10,.1f} GiB   ({m.peak_phase}: {m.peak_node}); fits in 80 GiB: {m.total_peak <= 80 * GIB}"
    )
    print(f"  analyze            {seconds:10,.1f} s, peak RSS {rss / GIB:.2f} GiB")


if __name__ == "__main__":
    main()
