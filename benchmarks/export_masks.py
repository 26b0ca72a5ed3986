"""Transformers' forward memory under the export capture at long sequences, against the allocator.

Run: ``python benchmarks/export_masks.py [--seq 512] [--hidden 64] [--attention-mask]
[--train] [family ...]``. For each family (``AutoConfig.for_model``, 2 layers, 8 heads,
4 key/value heads where the family has them, random weights): ``analyze``'s estimated
peak against the CPU allocator's over the model's own call (``measure_memory=True``),
under ``torch.no_grad()`` or, with ``--train``, over a training step. Batch 2 (1 from
hidden size 512). ``--attention-mask`` also passes an all-ones ``attention_mask``, as a
tokenizer does: that mask is built from an input and kept (see the capture notes).
"""

from __future__ import annotations

import argparse
import contextlib

import torch

import fxinspect

FAMILIES = "qwen2 qwen3 llama mistral gemma phi3 mixtral gpt2 bert electra bart"


def measure(family: str, seq: int, hidden: int, attention_mask: bool, train: bool) -> tuple[str, int, int]:
    """The capture's tier, the estimated peak and the allocator's."""
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    config = AutoConfig.for_model(family, vocab_size=1000)
    sizes = dict(hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=2, num_attention_heads=8)
    sizes.update(num_key_value_heads=4, head_dim=hidden // 8, n_embd=hidden, n_layer=2, n_head=8)
    sizes.update(d_model=hidden, encoder_layers=2, decoder_layers=2, encoder_attention_heads=8)
    sizes.update(decoder_attention_heads=8, encoder_ffn_dim=3 * hidden, decoder_ffn_dim=3 * hidden)
    sizes.update(pad_token_id=0)  # (some families' default lies outside the small vocabulary)
    for name, value in sizes.items():
        if hasattr(config, name):
            setattr(config, name, value)
    model = AutoModel.from_config(config).train(train)
    batch = 2 if hidden < 512 else 1
    inputs = {"input_ids": torch.randint(0, 1000, (batch, seq))}
    if attention_mask:
        inputs["attention_mask"] = torch.ones(batch, seq, dtype=torch.long)
    with contextlib.nullcontext() if train else torch.no_grad():
        report = fxinspect.analyze(model, inputs, timing=False, backward=train, measure_memory=True)
    m = report.memory
    return str(report.capture.method), m.peak, m.measured_peak if train else m.measured_eager_peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", default=FAMILIES.split())
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--attention-mask", action="store_true")
    parser.add_argument("--train", action="store_true")
    args = parser.parse_args()
    print(f"{'family':10} {'tier':8} {'estimate':>12} {'allocator':>12} {'error':>8}")
    for family in args.families:
        try:
            tier, estimate, real = measure(family, args.seq, args.hidden, args.attention_mask, args.train)
        except Exception as exc:  # one family's failure is a row, not the end of the sweep
            print(f"{family:10} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
            continue
        print(f"{family:10} {tier:8} {estimate:12,} {real:12,} {100 * (estimate / real - 1):+7.1f}%")


if __name__ == "__main__":
    main()
