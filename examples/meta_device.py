"""Models larger than memory: a Llama-2-7B-shaped model on the meta device.

Run: ``python examples/meta_device.py``.

``analyze(model, inputs, device="meta")``, or a model built under
``torch.device("meta")``, runs on fake tensors: shapes, parameters, FLOPs, MACs, bytes
and the memory model are exact, nothing is allocated, and what needs real values
(timing, NaN checks, statistics, the allocator's measurement) is ``None``, never zero.
Here: will a float32 training step at sequence 2048, batch 1, with AdamW fit in 80 GiB?
"""

from __future__ import annotations

from pathlib import Path

import torch

import fxinspect


def main(out_dir: Path = Path(".")) -> str:
    from transformers import LlamaConfig, LlamaForCausalLM

    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig()).train()  # the defaults are Llama-2-7B's shapes
    ids = torch.zeros(1, 2048, dtype=torch.long, device="meta")
    report = fxinspect.analyze(
        model,
        {"input_ids": ids, "use_cache": False},
        backward=True,
        loss_fn=lambda out: out.logits.float().sum(),
        optimizer=torch.optim.AdamW,
    )
    gib = 2**30
    m = report.memory
    parts = [
        ">>> print(report)",
        str(report),
        "",
        f">>> report.memory.total_peak / 2**30, report.memory.total_peak <= 80 * 2**30\n"
        f"({m.total_peak / gib:.1f}, {m.total_peak <= 80 * gib})",
        ">>> print(report.table(depth=2, top=8))",
        report.table(depth=2, top=8),
    ]
    text = "\n".join(parts)
    print(text)
    return text


if __name__ == "__main__":
    main()
