"""KV bytes per token of well-known full-size configurations, measured on meta beside the closed form.

Run: ``python benchmarks/kv_bytes_table.py [--only NAME]``.

Each configuration is written by hand from its published hyper-parameters (no download),
built under ``torch.device("meta")`` in bfloat16, and ``kv_bytes_past_windows`` runs the model's
own forward on meta (batch 1) at 16 tokens and at two consecutive contexts past the largest window
its cache declares: the cache bytes the model itself allocates, against
``2 * layers * kv_heads * head_dim * 2 B``. Mamba's torch path loops over tokens in Python, so its
contexts stay short (its state does not grow). Where they differ:

* sliding windows: a local layer keeps ``window`` tokens, so past the window only the global
  layers grow (Mistral-7B: none; Gemma-2-9B: half of them);
* MLA (DeepSeek-V3): the cache holds the compressed latent (``kv_lora_rank`` 512) and one shared
  rope key (64) per layer, not 128 heads of keys and values;
* state-space (Mamba): a fixed conv and SSM state per layer, nothing per token (the SSM state
  is kept in float32 in a bfloat16 model: 64 * 5120 * 16 * 4 B, + conv 64 * 5120 * 4 * 2 B).

The script prints a markdown table (per-token bytes, the constant part, seconds) and exits
non-zero when a measured figure differs from the hand-computed one in ``EXPECTED``.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import transformers as tf

from fxinspect.serving.kv_cache import closed_form_kv_bytes_per_token
from fxinspect.serving.kv_curve import kv_bytes_past_windows

LLAMA2 = dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32, vocab_size=32000)
# fmt: off
CONFIGS = {
    "Llama-2-7B": tf.LlamaConfig(**LLAMA2, num_key_value_heads=32),
    "Llama-3-8B": tf.LlamaConfig(**{**LLAMA2, "intermediate_size": 14336, "vocab_size": 128256}, num_key_value_heads=8),
    "Mistral-7B-v0.1": tf.MistralConfig(**{**LLAMA2, "intermediate_size": 14336}, num_key_value_heads=8,
                                        sliding_window=4096),
    "Gemma-2-9B": tf.Gemma2Config(hidden_size=3584, intermediate_size=14336, num_hidden_layers=42, num_attention_heads=16,
                                  num_key_value_heads=8, head_dim=256, sliding_window=4096, vocab_size=256000),
    "DeepSeek-V3": tf.DeepseekV3Config(
        hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048, num_hidden_layers=61,
        num_attention_heads=128, num_key_value_heads=128, n_routed_experts=256, num_experts_per_tok=8,
        n_shared_experts=1, n_group=8, topk_group=4, first_k_dense_replace=3, q_lora_rank=1536, kv_lora_rank=512,
        qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, vocab_size=129280),
    "Falcon-7B": tf.FalconConfig(hidden_size=4544, num_hidden_layers=32, num_attention_heads=71, multi_query=True,
                                 new_decoder_architecture=False, parallel_attn=True, alibi=False, vocab_size=65024),
    "Mamba-2.8B": tf.MambaConfig(hidden_size=2560, num_hidden_layers=64, state_size=16, expand=2, conv_kernel=4,
                                 vocab_size=50280),
}
# fmt: on

# hand-computed bytes per token of one sequence past any window, bf16 (2 B)
EXPECTED = {
    "Llama-2-7B": 2 * 32 * 32 * 128 * 2,  # 524,288: layers 32, kv heads 32, head_dim 128
    "Llama-3-8B": 2 * 32 * 8 * 128 * 2,  # 131,072: 8 kv heads
    "Mistral-7B-v0.1": 0,  # every layer slides (window 4096): capped at 4096 tokens
    "Gemma-2-9B": 21 * 2 * 8 * 256 * 2,  # 172,032: the 21 global layers of 42
    "DeepSeek-V3": 61 * (512 + 64) * 2,  # 70,272: latent 512 + rope key 64 per layer
    "Falcon-7B": 2 * 32 * 1 * 64 * 2,  # 8,192: one kv head of 4544 / 71 = 64
    "Mamba-2.8B": 0,  # a state, not a cache
}


def measure(name: str) -> tuple[str, bool]:
    config = CONFIGS[name]
    start = time.perf_counter()
    with torch.device("meta"):
        model = tf.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    built = time.perf_counter() - start
    curve = kv_bytes_past_windows(model, batch=1)  # 16 tokens, then two past the largest window
    seconds = time.perf_counter() - start
    closed = closed_form_kv_bytes_per_token(config, torch.bfloat16)
    last = curve.bytes[-1]
    fixed = last.total - curve.per_token * curve.contexts[-1]  # the part that does not grow
    ok = curve.per_token == EXPECTED[name]
    ratio = f"{curve.per_token / closed:.3f}" if closed else "-"
    row = (
        f"| {name} | {curve.per_token:,} | {closed if closed is None else format(closed, ',')} | {ratio} | "
        f"{curve.shape} | {fixed:,} at {curve.contexts[-1]} | {built:.1f} + {seconds - built:.1f} s |"
    )
    return row, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CONFIGS))
    args = parser.parse_args()
    print(
        "| configuration | measured B/token | closed form B/token | ratio | curve | fixed part (B) at context | build + run |"
    )
    print("|---|---:|---:|---:|---|---:|---|")
    wrong = []
    for name in [args.only] if args.only else CONFIGS:
        row, ok = measure(name)
        print(row, flush=True)
        if not ok:
            wrong.append(name)
    if wrong:
        print(f"measured per-token bytes differ from EXPECTED for: {', '.join(wrong)}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
