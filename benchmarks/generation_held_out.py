"""Generation's exactness on the families held out while it was built (tests/generation_zoo.py).

Run: ``OMP_NUM_THREADS=1 python benchmarks/generation_held_out.py [family ...]`` (any family of
the zoo; default: the held-out ones); ``BPN=2,4,60`` (batch, prompt, new tokens) makes the
last decode step hold the peak (default 2,12,9: the prefill). Per family: a decode step's FLOPs, MACs, bytes and peak read off the curves at
sizes never analysed against an analysis there; the cache bytes against the cache a real
``generate()`` leaves; the peak against the allocator over a real ``generate()`` on CPU.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from generation_zoo import families

import fxinspect
from fxinspect.run.memory.allocator import AllocatorWatch
from fxinspect.serving.inputs import _tokens
from fxinspect.serving.kv_cache import cache_bytes

UNSEEN = [(5, 100), (3, 33), (1, 257)]


def check(name: str, model: torch.nn.Module, batch: int, prompt: int, new: int) -> str:
    gen = fxinspect.generation(model, batch=4, prompt=40, new_tokens=20)
    off = []
    for b, c in UNSEEN:
        cost = gen.cost(c, b)
        with torch.no_grad():
            r = fxinspect.analyze(gen.model, fxinspect.decode_inputs(gen.model, b, c), timing=False)
        got = (cost.flops, cost.macs, cost.bytes, cost.peak)
        want = (r.totals.flops, r.totals.macs, r.totals.bytes_moved, r.memory.total_peak)
        if got != want:
            off.append(((b, c), [x - y for x, y in zip(got, want)]))
    real = fxinspect.generation(model, batch=batch, prompt=prompt, new_tokens=new, device=None)
    ids = _tokens(model, batch, prompt, torch.device("cpu"))
    run = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False)
    with torch.no_grad():
        out = model.generate(ids, return_dict_in_generate=True, **run)
    cache = getattr(out, "cache", None) or out.past_key_values
    kv = real.kv_bytes(prompt + new - 1) - cache_bytes(cache).total
    watch = AllocatorWatch(torch.device("cpu"))
    with torch.no_grad(), watch:
        model.generate(ids, attention_mask=torch.ones_like(ids), **run)
    m = real.memory
    return (
        f"costs {'exact' if not off else off} | kv {kv:+,} B | "
        f"peak / allocator {(m.peak - m.weights) / watch.peak:.4f} ({m.phase})"
    )


def main() -> None:
    batch, prompt, new = (int(x) for x in os.environ.get("BPN", "2,12,9").split(","))
    held = {f.name: f for f in families("all")}  # (a family of the build set when named)
    for name in sys.argv[1:] or [f.name for f in families("held_out")]:
        torch.manual_seed(0)
        start = time.time()
        try:
            said = check(name, held[name].build().eval(), batch, prompt, new)
        except Exception as exc:  # a family generation cannot analyse: said, the others go on
            said = f"FAILED {type(exc).__name__}: {str(exc)[:200]}"
        print(f"{name:12s} {held[name].kind:28s} {said} | {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
