"""Prefill cost curves of tiny Hugging Face decoders, fitted from 6 analyses, checked unseen.

Run: ``python benchmarks/generation_curves.py`` (about a minute on 2 cores). For each model
it fits every integer figure (:func:`fxinspect.serving.curves.fit`, the default basis
``1, c, c², b, b·c, b·c²``) from 6 meta analyses of the prefill with contexts <= 64, then
analyses sizes the fit never saw and prints, per figure, its formula, whether it is
verified, and whether it is exact at each unseen size.
"""

from __future__ import annotations

import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM

import fxinspect
from fxinspect.serving.curves import basis, fit
from fxinspect.serving.figures import report_figures

TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
MODELS = {  # name: (family, config, contexts of the fit)
    "llama": ("llama", TINY, (11, 24, 37, 53, 64)),
    "gpt2": ("gpt2", dict(n_embd=64, n_layer=2, n_head=4, n_positions=2048), (11, 24, 37, 53, 64)),
    # above its window of 16 the model builds a sliding mask it does not build below: fit above
    "mistral-w16": ("mistral", dict(TINY, sliding_window=16), (21, 30, 37, 53, 64)),
}
UNSEEN = ((3, 100), (5, 257), (1, 1000), (5, 33))


def prefill(model: torch.nn.Module):
    def evaluate(b: int, c: int) -> dict:
        with torch.no_grad():
            inputs = {"input_ids": torch.zeros(b, c, dtype=torch.long), "use_cache": False}
            return report_figures(fxinspect.analyze(model, kwargs=inputs, device="meta"))

    return evaluate


def main() -> None:
    for name, (family, sizes, contexts) in MODELS.items():
        config = AutoConfig.for_model(family, vocab_size=128, **sizes)
        evaluate = prefill(AutoModelForCausalLM.from_config(config).eval())
        start = time.perf_counter()
        curves = fit(evaluate, basis(1, 2), contexts=contexts)
        print(f"== {name}: 6 analyses at contexts {contexts} in {time.perf_counter() - start:.1f} s")
        truth = {size: evaluate(*size) for size in UNSEEN}
        for figure, curve in curves.items():
            exact = []
            for size, values in truth.items():
                value = values[figure]
                exact.append(curve(*size) == (max(value.values()) if isinstance(value, dict) else value))
            marks = " ".join(f"{b},{c}:{'yes' if ok else 'NO'}" for (b, c), ok in zip(UNSEEN, exact))
            print(f"{figure:>13} | {marks} | {curve}")


if __name__ == "__main__":
    main()
