"""A Llama-2-7B-shaped model analysed on the meta device: seconds and memory, not 26 GB.

Run: ``python benchmarks/llama7b_meta.py [--seq 2048] [--method auto]``.

The model is ``LlamaForCausalLM(LlamaConfig())`` (the defaults are Llama-2-7B's shapes:
hidden 4096, intermediate 11008, 32 layers, 32 heads, vocabulary 32000) built under
``torch.device("meta")``: no weight is allocated, and ``fxinspect.analyze`` runs it on
fake tensors (batch 1, token ids on meta, ``use_cache=False``, ``timing=False``).

Expected figures, from the shapes alone:

* parameters 6,738,415,616 = embedding 32000*4096 + lm_head 4096*32000
  + 32 layers * (4 * 4096*4096 attention + 3 * 4096*11008 MLP + 2 * 4096 norms)
  + 4096 final norm;
* ``2 * macs`` 29,261,612,187,648 = every Linear, 2 * 2048 tokens * 6,607,077,376
  weights (32 * (4*4096*4096 + 3*4096*11008) + 4096*32000), plus attention
  (QK^T and AV) 4 * 2048^2 * 4096 * 32 layers. ``FlopCounterMode`` under a CPU
  ``FakeTensorMode`` reports 27,062,588,932,096: it counts the CPU attention op
  ``_scaled_dot_product_flash_attention_for_cpu`` as zero.

Targets: under 60 s wall time and a peak RSS under 4 GiB. The script exits non-zero
when a figure is wrong or a target is missed.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import torch

import fxinspect

PARAMS = 6_738_415_616
LINEAR_WEIGHTS = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008) + 4096 * 32000  # 6,607,077,376


def expected_flops(seq: int) -> int:
    """``2 * macs``: every Linear 2 * tokens * weights, attention 4 * seq^2 * hidden * layers."""
    return 2 * seq * LINEAR_WEIGHTS + 4 * seq * seq * 4096 * 32


def peak_rss() -> int:
    """Peak resident set size of this process in bytes (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def run(seq: int = 2048, method: str = "auto") -> tuple[fxinspect.Report, float]:
    """Build the meta model, analyse it; ``(report, seconds of the analyze call)``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig()).eval()
    ids = torch.zeros(1, seq, dtype=torch.long, device="meta")
    start = time.perf_counter()
    with torch.no_grad():
        report = fxinspect.analyze(model, {"input_ids": ids, "use_cache": False}, method=method, timing=False)
    return report, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--method", default="auto")
    ns = parser.parse_args(argv)
    start = time.perf_counter()
    report, seconds = run(ns.seq, ns.method)
    wall = time.perf_counter() - start
    rss = peak_rss()
    flops = 2 * report.totals.macs
    print(f"capture tier      {report.capture.method}")
    print(
        f"wall time         {wall:.1f} s (analyze {seconds:.1f} s; the rest imports transformers and builds the meta model)"
    )
    print(f"peak RSS          {rss / 2**30:.2f} GiB")
    print(f"params            {report.totals.params:,}  (expected {PARAMS:,})")
    print(f"2 * macs          {flops:,}  (expected {expected_flops(ns.seq):,})")
    print(f"flops             {report.totals.flops:,}  partial={report.totals.partial}")
    for op in report.uncounted:
        print(f"uncounted         {op.op} x{op.calls}")
    ok = report.totals.params == PARAMS and flops == expected_flops(ns.seq)
    ok = ok and wall < 60 and rss < 4 * 2**30
    print("OK" if ok else "FAILED: a figure or a target is off")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
