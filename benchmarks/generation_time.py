"""TTFT and TPOT of a real ``generate()`` on this CPU against ``fxinspect.generation``'s.

Run: ``PYTHONPATH=. python benchmarks/generation_time.py [--runs 5] [--threads 1] [--new-tokens 32]``
(about 4 minutes on 2 cores). Three Hugging Face decoders are built from configs with
random weights (float32, vocab 32,000, big enough that a decode step's matmuls outweigh
Python), each at batch 1 and 8 with a prompt of 128 tokens.

Measured: ``generate()`` with ``do_sample=False`` and ``min_new_tokens = max_new_tokens``
(it never stops early), a :class:`~transformers.LogitsProcessor` stamping the clock each
time it is called, once per generated token, right after that token's forward. TTFT is
from the call of ``generate()`` to the first stamp (its setup and the prefill); TPOT is
the mean of the intervals between stamps (each a whole decode step of ``generate()``:
choosing the token, growing the inputs, the forward, the logits processors). A short
``generate()`` warms each model up; then the runs of all models are interleaved (the
machine is shared: a slow spell then touches every model alike), and each figure is the
median over the runs, with its spread (min–max over the runs, as a share of the median).

Predicted: ``fxinspect.generation(model, batch, 128, new_tokens, device="meta",
device_spec="measured")`` (a meta copy, float32: this host's figures, measured once and
cached per thread count: :mod:`fxinspect.timemodel.host`; measured again as the run
starts unless ``--cached``, so that the figures and the runs see a similar load). ``--threads`` sets torch's
threads for both (default 1: on a shared 2-core host two threads stall on each other
whenever another process takes a core, which no model predicts). The target (issue 41,
item 6): predicted ÷ measured TPOT within 0.8–1.25.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import transformers as tf

import fxinspect
from fxinspect.timemodel import host

PROMPT, VOCAB, BATCHES = 128, 32_000, (1, 8)


def _models() -> dict[str, torch.nn.Module]:
    configs = {
        "llama-768x4 (GQA)": tf.LlamaConfig(
            vocab_size=VOCAB, hidden_size=768, intermediate_size=2048, num_hidden_layers=4,
            num_attention_heads=12, num_key_value_heads=4,
        ),
        "qwen2-1024x4 (GQA)": tf.Qwen2Config(
            vocab_size=VOCAB, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
            num_attention_heads=16, num_key_value_heads=8,
        ),
        "gpt2-768x6 (MHA)": tf.GPT2Config(vocab_size=VOCAB, n_embd=768, n_layer=6, n_head=12, n_positions=1024),
    }  # fmt: skip
    torch.manual_seed(0)
    return {name: tf.AutoModelForCausalLM.from_config(c).eval() for name, c in configs.items()}


class _Stamps(tf.LogitsProcessor):
    """The clock at each call: once per generated token, after its forward."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, input_ids, scores):
        self.times.append(time.perf_counter())
        return scores


def measure(model: torch.nn.Module, batch: int, new_tokens: int) -> tuple[float, float]:
    """One ``generate()``: its TTFT and its mean TPOT, in seconds."""
    ids = torch.randint(0, VOCAB, (batch, PROMPT), generator=torch.Generator().manual_seed(1))
    stamps = _Stamps()
    with torch.no_grad():
        start = time.perf_counter()
        model.generate(
            ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=new_tokens,
            min_new_tokens=new_tokens, logits_processor=tf.LogitsProcessorList([stamps]), pad_token_id=0,
        )  # fmt: skip
    t = stamps.times
    assert len(t) == new_tokens, (len(t), new_tokens)
    return t[0] - start, (t[-1] - t[0]) / (len(t) - 1)


def _spread(values: list[float]) -> str:
    median = statistics.median(values)
    return f"{(min(values) - median) / median:+.0%}/{(max(values) - median) / median:+.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--cached", action="store_true", help="use this host's cached figures, not measured now")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not args.cached:  # (taken now: a figure cached under another load is off by that load's factor)
        host.measured(refresh=True)
    spec = fxinspect.devices.get("measured")
    print(
        f"{spec.name}, {torch.get_num_threads()} thread(s): float32 {spec.peak(torch.float32) / 1e9:.1f} GFLOP/s, "
        f"bandwidth {spec.memory_bandwidth / 1e9:.1f} GB/s, launch {spec.launch_overhead * 1e6:.2f} us"
    )
    models = _models()
    cases = [(name, b) for name in models for b in BATCHES]
    predicted = {}
    for name, b in cases:
        gen = fxinspect.generation(models[name], b, PROMPT, args.new_tokens, device="meta", device_spec=spec)
        predicted[name, b] = (gen.ttft, gen.tpot)
    for name, b in cases:
        measure(models[name], b, 4)  # (the warm-up)
    runs: dict[tuple[str, int], list[tuple[float, float]]] = {case: [] for case in cases}
    for _ in range(args.runs):
        for name, b in cases:
            runs[name, b].append(measure(models[name], b, args.new_tokens))
    print(f"prompt {PROMPT}, {args.new_tokens} new tokens, median of {args.runs} interleaved runs (spread min/max)")
    print(
        "ratio: predicted / the median; best: predicted / the fastest run (the spec's figures are the best of trials)"
    )
    print(f"{'model':20} {'batch':>5} | {'TTFT pred':>9} {'meas':>8} {'ratio':>5} {'best':>5} {'spread':>10} |"
          f" {'TPOT pred':>9} {'meas':>8} {'ratio':>5} {'best':>5} {'spread':>10}")  # fmt: skip
    for name, b in cases:
        ttfts, tpots = ([r[i] for r in runs[name, b]] for i in (0, 1))
        (p_ttft, p_tpot), m_ttft, m_tpot = predicted[name, b], statistics.median(ttfts), statistics.median(tpots)
        print(
            f"{name:20} {b:5d} | {p_ttft * 1e3:7.1f}ms {m_ttft * 1e3:6.1f}ms {p_ttft / m_ttft:5.2f}"
            f" {p_ttft / min(ttfts):5.2f} {_spread(ttfts):>10} | {p_tpot * 1e3:7.2f}ms {m_tpot * 1e3:6.2f}ms"
            f" {p_tpot / m_tpot:5.2f} {p_tpot / min(tpots):5.2f} {_spread(tpots):>10}"
        )


if __name__ == "__main__":
    main()
