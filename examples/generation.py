"""Generation: Llama-2-70B's prefill and decode, its KV cache, TTFT and TPOT, what fits.

Run: ``python examples/generation.py`` (nothing is allocated: the model is on the meta device).

``fxinspect.generation(model, batch, prompt, new_tokens)`` analyses the model's own
prefill call and its own decode steps, with the cache the model itself builds
(transformers' ``DynamicCache`` here), as ``generate()`` makes them. Llama-2-70B is built
from its published hyper-parameters (hidden 8,192, 80 layers, 64 heads of 128, 8 key-value
heads, MLP 28,672, vocabulary 32,000) on the meta device, analysed in bfloat16: no weight
is ever allocated, and no download is needed.

* ``gen.table()``: the prefill of the 32 prompts of 4,096 tokens and the first, middle and
  last of the decode steps (contexts 4,096 to 4,606: the first token comes from the
  prefill), each priced on an H100 SXM by the time model (docs/time_model.md); TTFT is the
  prefill's predicted time, TPOT the mean of the 511 decode steps.
* ``gen.curves``: a decode step's FLOPs, bytes moved and cache as exact closed forms in the
  batch ``b`` and the context ``c``, fitted from a few analysed steps and checked on a spare
  one; ``gen.cost(c)`` reads them at any context (here 32,768, never analysed). Its 80
  layers being alike, each of those steps is analysed on copies of 2, 3 and 4 layers and
  extrapolated, the 4-layer copy checked exactly against what the other two predict
  (``fxinspect/serving/layers.py``; the whole model's figures, ``shallow=False`` analyses it whole).
* ``gen.kv_bytes_per_token`` is read off the cache tensors the model allocates: 80 layers ×
  8 key-value heads × 128 × (key + value) × 2 B = 320 KiB per token of one sequence.
* ``gen.peak`` and its parts, and what fits a budget: ``gen.max_batch(budget, context)`` and
  ``gen.max_context(budget, batch)``, 0 where not even the prefill fits. One 80 GiB H100
  cannot hold the 128 GiB of bfloat16 weights at all; under 192 GiB the prefill of the 32
  prompts of 4,096 tokens is what does not fit (its activations come on top of the weights
  and the cache it fills), while 8 sequences reach a long context. The chart: a decode
  step's predicted time against the context, and the memory stack of the decode steps
  (weights, KV cache, activations), the prefill's peak as a dot, the budget as a line.

Llama-2 was trained on 4,096 positions; the steps past them cost what such a run costs.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import transformers

import fxinspect
from fxinspect.formatting import units

LLAMA_2_70B = transformers.LlamaConfig(
    hidden_size=8192,
    intermediate_size=28672,
    num_hidden_layers=80,
    num_attention_heads=64,
    num_key_value_heads=8,
    vocab_size=32000,
    max_position_embeddings=4096,
)


def main(out_dir: Path = Path(".")) -> str:
    start = time.perf_counter()
    with torch.device("meta"):  # (a 70B model that costs no memory)
        model = transformers.LlamaForCausalLM(LLAMA_2_70B)
    gen = fxinspect.generation(
        model, batch=32, prompt=4096, new_tokens=512, device_spec="h100-sxm", dtype=torch.bfloat16
    )
    lines = [gen.table(), ""]
    curves = gen.curves
    lines += [f"a decode step's {name} = {curves[name]}" for name in ("flops", "bytes", "kv")]
    far = gen.cost(32768)
    lines.append(
        f"at a context of 32,768: {units.count(far.flops)} FLOPs, {units.nbytes(far.bytes)} moved, "
        f"{units.seconds(far.seconds)} a step"
    )
    lines.append("")
    for budget in ("80GiB", "192GiB"):
        lines.append(
            f"within {budget}: at most {gen.max_batch(budget)} sequences of 4,096 + 512 tokens; "
            f"32 sequences reach at most {gen.max_context(budget):,} tokens; "
            f"8 sequences at most {gen.max_context(budget, batch=8):,}"
        )
    gen.plot(out_dir / "llama2_70b_generation.png", budget="192GiB")
    text = "\n".join(lines)
    print(text)
    print(f"(analysed in {time.perf_counter() - start:.0f} s)")  # (not on the page: it depends on the machine)
    return text


if __name__ == "__main__":
    main()
