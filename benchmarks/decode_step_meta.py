"""Time and memory of a decode step of Llama-2-70B on the meta device (issue 41, item 1).

``decode_inputs`` fills the model's own cache with ``context`` tokens on a fake copy,
then ``analyze`` captures and counts the step; the RSS is the process's high-water mark.

    OMP_NUM_THREADS=1 python benchmarks/decode_step_meta.py [--batch 32] [--context 1024 4096]
"""

from __future__ import annotations

import argparse
import resource
import time

import torch
import transformers

import fxinspect
from fxinspect.serving import decode_inputs

LLAMA_2_70B = dict(
    hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
    num_key_value_heads=8, vocab_size=32000, max_position_embeddings=4096,
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, nargs="+", default=[1024, 4096])
    args = parser.parse_args()
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**LLAMA_2_70B)).to(torch.bfloat16).eval()
    for context in args.context:
        start = time.perf_counter()
        step = decode_inputs(model, args.batch, context)
        made = time.perf_counter()
        with torch.no_grad():
            r = fxinspect.analyze(model, step, timing=False)
        done = time.perf_counter()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(
            f"context {context}: decode_inputs {made - start:.1f} s, analyze {done - made:.1f} s "
            f"({r.capture.method}), {r.totals.macs / 1e9:.2f} GMACs, cache (inputs) {r.memory.inputs / 2**30:.2f} GiB, "
            f"peak {r.memory.peak / 2**30:.2f} GiB, max RSS {rss:.2f} GiB"
        )


if __name__ == "__main__":
    main()
