"""TTFT and TPOT from the time model (fxinspect.serving): exact against the analyses they summarise.

TPOT is read off per-call cost curves (:mod:`fxinspect.serving.step_time`); it must be
what analysing every decode step and averaging their predicted latencies gives, on a
preset (a Llama) and on a spec with measured matmul rates (a Mistral, across its sliding
window's edge). Specs
with one roof only check TTFT and TPOT against counted figures, an independent route.
How close the predictions come to a real generate() is the benchmark's
(benchmarks/generation_time.py), never a test's: it depends on the machine.
"""

from __future__ import annotations

import pytest
import torch
from generation_zoo import (
    WINDOW,
    families,
    quiet_transformers,  # noqa: F401 - an autouse fixture
)

import fxinspect
from fxinspect.records import DeviceSpec, OpStatus

ZOO = {f.name: f for f in families()}
# a spec whose 2-D float32 matmuls are priced from measured rates (see test_time_model_matmul_rates)
MEASURED_LIKE = DeviceSpec(
    "toy-measured", {"float32": 1e11}, 2e10, launch_overhead=2e-6, matmul_rates=((0.5, 5e9), (8.0, 2e10), (170.0, 8e10))
)
MEMORY_ONLY = DeviceSpec("memory-only", {"float32": 1e30}, 1e9, launch_overhead=0.0)
LAUNCH_ONLY = DeviceSpec("launch-only", {"float32": 1e30}, 1e30, launch_overhead=1e-6)


def _gen(name: str, spec, batch: int = 2, prompt: int = 5, new_tokens: int = 7):
    torch.manual_seed(0)
    return fxinspect.generation(ZOO[name].build(), batch, prompt, new_tokens, device="meta", device_spec=spec)


@pytest.mark.parametrize(
    ("name", "spec"), [("llama", "h100-sxm"), ("mistral", MEASURED_LIKE)], ids=["llama", "mistral"]
)
def test_tpot_is_the_mean_of_the_analysed_decode_steps(name, spec):
    # prompt 5, 7 new tokens: decode steps at contexts 5..10, across mistral's window of 8
    gen = _gen(name, spec)
    contexts = range(5, 5 + 7 - 1)
    assert gen.final_context == 10 and WINDOW in contexts
    brute = [gen.decode_step(c).totals.predicted_latency for c in contexts]
    assert gen.tpot == pytest.approx(sum(brute) / len(brute), rel=1e-12)
    assert gen.ttft == pytest.approx(gen.prefill.totals.predicted_latency, rel=1e-12) and gen.ttft > 0
    # 2 sequences × 7 tokens over the prefill and 6 decode steps
    assert gen.tokens_per_second == pytest.approx(2 * 7 / (gen.ttft + 6 * gen.tpot))


def test_on_one_roof_the_times_are_the_counted_figures():
    # memory the only roof (no launch, compute free): every op takes its bytes at 1 GB/s
    name = "llama"
    gen = _gen(name, MEMORY_ONLY)
    assert gen.ttft == pytest.approx(gen.prefill.totals.bytes_moved / 1e9, rel=1e-12)
    moved = [gen.decode_step(c).totals.bytes_moved for c in range(5, 11)]
    assert gen.tpot == pytest.approx(sum(moved) / 6 / 1e9, rel=1e-12)
    # launches the only cost: 1 µs per aten call the prefill ran, free ones (views) apart
    gen = _gen(name, LAUNCH_ONLY)  # (its prefill only is analysed)
    calls = sum(c.calls for n in gen.prefill.nodes if n.is_op for c in n.aten if c.status is not OpStatus.FREE)
    assert calls > 50 and gen.ttft == pytest.approx(calls * 1e-6, rel=1e-9)


def test_without_a_spec_there_are_no_times():
    gen = _gen("llama", None)
    assert (gen.ttft, gen.tpot, gen.tokens_per_second) == (None, None, None)
