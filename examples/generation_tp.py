"""Generation on 8 GPUs: Llama-2-70B served with tensor parallelism, one rank's figures.

Run: ``python examples/generation_tp.py`` (nothing is allocated: the model is on the meta device).

``fxinspect.generation(..., parallel=fxinspect.Parallel.tp(8))`` analyses what one of 8
ranks runs when Llama-2-70B (docs/generation.md's: bfloat16, 32 prompts of 4,096 tokens,
512 new tokens) is served with tensor parallelism on 8 H100 SXM: the model parallelised by
its own plan (transformers' ``tp_plan``, applied by torch's ``parallelize_module`` on a fake
process group of 8), its prefill and decode steps run as rank 0 runs them, its cache filled
by them. Every figure below, the table's, the chart's and the budget's, is one rank's.

What the 8 ranks divide:

* the weights: the query, key and value projections by columns (8 of the 64 query heads, 1
  of the 8 key-value heads a rank), the attention's output projection by rows, the MLP's
  gate and up by columns and down by rows, the embedding's and the head's vocabulary; only
  the RMS norms (and the rotary tables) are held whole by every rank;
* the KV cache: a rank caches its own key-value head, an eighth of the 320 KiB per token of
  one device (2 · 80 layers · 8 heads · 128 · 2 B);
* the projections' and the attention's FLOPs and bytes.

What they do not divide:

* the hidden states between the projections: each row-wise projection's partial sums are
  all-reduced (twice a layer, and the embedding's), so every rank holds the whole residual
  stream (batch × tokens × 8,192) and runs the norms and the residual additions on all of
  it, and the head's logits are gathered whole on every rank. The prefill's activations
  are far more than an eighth of one device's, and its peak, not the decode steps', is
  what a budget meets first;
* the time of the collectives: TTFT and TPOT are the rank's own kernels on the time model
  (docs/time_model.md). The collectives are listed with their bytes and their time on the
  preset's NVLink, a lower bound (ring algorithms, no latency, no overlap), not added.

``gen.max_batch("80GiB")`` and ``gen.max_context("80GiB")`` answer for one H100's memory
per rank. The chart: a rank's decode step's predicted time against the context, and its
memory stack (weights, KV cache, activations), the prefill's peak as a dot, 80 GiB as a line.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import transformers

import fxinspect
from fxinspect.formatting import units
from fxinspect.serving.kv_cache import closed_form_kv_bytes_per_token

LLAMA_2_70B = transformers.LlamaConfig(  # (as in examples/generation.py)
    hidden_size=8192,
    intermediate_size=28672,
    num_hidden_layers=80,
    num_attention_heads=64,
    num_key_value_heads=8,
    vocab_size=32000,
    max_position_embeddings=4096,
)
RANKS = 8


def main(out_dir: Path = Path(".")) -> str:
    start = time.perf_counter()
    with torch.device("meta"):  # (a 70B model that costs no memory)
        model = transformers.LlamaForCausalLM(LLAMA_2_70B)
    gen = fxinspect.generation(
        model,
        batch=32,
        prompt=4096,
        new_tokens=512,
        device_spec="h100-sxm",
        dtype=torch.bfloat16,
        parallel=fxinspect.Parallel.tp(RANKS),
    )
    lines = [gen.table(), ""]
    # the whole model's weights in bfloat16, and what a rank holds beyond an eighth of them:
    # rank = (whole - kept) / RANKS + kept, for the bytes every rank keeps whole
    whole = 2 * sum(t.numel() for t in [*model.parameters(), *model.buffers()])
    kept = (RANKS * gen.weights_bytes - whole) // (RANKS - 1)
    lines.append(
        f"weights on a rank: {units.nbytes(gen.weights_bytes)} = (the model's {units.nbytes(whole)} "
        f"- {kept:,} B held whole) / {RANKS} + {kept:,} B"
    )
    one_device = closed_form_kv_bytes_per_token(LLAMA_2_70B, torch.bfloat16)
    lines.append(
        f"KV cache on a rank: {gen.kv_bytes_per_token:,} B per token per sequence "
        f"= one device's {one_device:,} B / {one_device // gen.kv_bytes_per_token}"
    )
    for name, report in (("the prefill", gen.prefill), ("a decode step", gen.decode_step(gen.prompt))):
        comm = report.communication
        kinds = "; ".join(
            f"{calls} {kind.replace('_', '-')} of {units.nbytes(tensor // calls)}"
            for (_, kind), (calls, tensor, _) in comm.by_kind().items()
        )
        lines.append(f"{name} communicates: {kinds}; {units.seconds(comm.predicted_time)} on the wire, not in its time")
    lines.append("")
    lines.append(
        f"within 80GiB a rank: at most {gen.max_batch('80GiB')} sequences of 4,096 + 512 tokens; "
        f"32 sequences reach at most {gen.max_context('80GiB'):,} tokens"
    )
    gen.plot(out_dir / "llama2_70b_tp8_generation.png", budget="80GiB")
    text = "\n".join(lines)
    print(text)
    print(f"(analysed in {time.perf_counter() - start:.0f} s)")  # (not on the page: it depends on the machine)
    return text


if __name__ == "__main__":
    main()
