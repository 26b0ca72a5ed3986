"""Every figure of Llama-2-70B's generation on the meta device, with the time each took.

Run: ``OMP_NUM_THREADS=1 /usr/bin/time -v python benchmarks/generation_70b.py`` (the issue's
setup: bf16, batch 32, prompt 4,096, 512 new tokens, priced on the H100 preset; the
wall time and the peak RSS are the bars). Prints the table and the seconds since the
start at which each figure was ready.
"""

import resource
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

import fxinspect

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from generation import LLAMA_2_70B

cfg = LLAMA_2_70B  # (the docs example's configuration, written once)
t0 = time.time()
with torch.device("meta"):
    m = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
g = fxinspect.generation(m, batch=32, prompt=4096, new_tokens=512, dtype=torch.bfloat16, device_spec="h100-sxm")
marks = {}
for what in ("prefill", "curves", "kv_bytes_per_token", "ttft", "tpot", "tokens_per_second", "memory"):
    getattr(g, what)
    marks[what] = round(time.time() - t0, 1)
g.max_batch("192GiB")
marks["max_batch"] = round(time.time() - t0, 1)
g.max_context("192GiB", batch=8)
marks["max_context"] = round(time.time() - t0, 1)
g.plot("/tmp/llama2_70b_generation.png")
marks["plot"] = round(time.time() - t0, 1)
print(g.table())
print(marks, "maxrss GiB", round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2))
