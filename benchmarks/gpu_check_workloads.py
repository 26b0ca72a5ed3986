"""The workloads of ``benchmarks/gpu_check.py``: eight steps, each at full size or tiny.

Full size (the GPU check): resnet50 and vit_b_16 training at batch 64 under bfloat16
autocast and resnet50's inference, GPT-2 medium (8 x 1,024 tokens) and a Llama shaped as
Llama-3.2-1B (4 x 1,024) training in bfloat16, BERT-base inference (32 x 128), and that
Llama's prefill (8 x 1,024) and one decode step with 1,024 tokens cached (its own
``DynamicCache``, :func:`fxinspect.prefill_inputs` / :func:`fxinspect.decode_inputs`).
Every transformers model is built from its config (random weights, no hub). Tiny
(``--tiny``, the CPU test): the same kinds of models and steps, a few thousand weights.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["WORKLOADS", "Workload"]


@dataclass(frozen=True)
class Workload:
    """One step to check: ``build(tiny, device) -> (model, inputs, loss_fn)``."""

    name: str
    build: Callable
    train: bool
    autocast: bool = False  # the step under torch.autocast(bfloat16); else the model is in bfloat16
    stateful: bool = False  # its inputs hold a cache the call fills: a fresh copy per call


def _vision(name: str) -> Callable:
    def build(tiny: bool, device: torch.device):
        import torchvision

        if tiny:  # the same kinds of layers, small
            batch, size, classes = 2, 32, 10
            if name == "resnet50":
                model = torchvision.models.resnet18(num_classes=classes)
            else:  # image 32, patches of 16, 1 layer, 2 heads, width 32, MLP 64
                model = torchvision.models.VisionTransformer(32, 16, 1, 2, 32, 64, num_classes=classes)
        else:
            model, batch, size, classes = torchvision.models.get_model(name, weights=None), 64, 224, 1000
        x = torch.randn(batch, 3, size, size, device=device)
        y = torch.randint(0, classes, (batch,), device=device)
        return model.to(device), (x,), lambda out: torch.nn.functional.cross_entropy(out, y)

    return build


_TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, vocab_size=128)
# kind: (model class, config class, full size, tiny) of transformers
_HF = {
    "gpt2": (
        "GPT2LMHeadModel",
        "GPT2Config",
        dict(n_embd=1024, n_layer=24, n_head=16),
        dict(n_embd=32, n_layer=1, n_head=4, vocab_size=128),
    ),
    "bert": ("BertModel", "BertConfig", {}, _TINY),
    "llama": (  # Llama-3.2-1B's shape
        "LlamaForCausalLM",
        "LlamaConfig",
        dict(
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=128256,
            max_position_embeddings=4096,
            tie_word_embeddings=True,
        ),
        dict(_TINY, num_key_value_heads=2, max_position_embeddings=64),
    ),
}


def _hf(kind: str, tiny: bool, device: torch.device) -> torch.nn.Module:
    """A transformers model from its config (random weights, no hub), in bfloat16 on ``device``."""
    import transformers

    model, config, full, small = _HF[kind]
    config = getattr(transformers, config)(**(small if tiny else full))
    with torch.device(device):  # (initialised where it runs: a 1B model's init on a CPU takes long)
        return getattr(transformers, model)(config).to(torch.bfloat16)


def _lm_train(kind: str) -> Callable:
    def build(tiny: bool, device: torch.device):
        model = _hf(kind, tiny, device)
        batch, length = (2, 16) if tiny else ((8, 1024) if kind == "gpt2" else (4, 1024))
        ids = torch.randint(0, model.config.vocab_size, (batch, length), device=device)
        return model, {"input_ids": ids, "labels": ids, "use_cache": False}, lambda out: out.loss

    return build


def _bert(tiny: bool, device: torch.device):
    model = _hf("bert", tiny, device)
    ids = torch.randint(0, model.config.vocab_size, (2, 16) if tiny else (32, 128), device=device)
    return model, {"input_ids": ids}, None


def _llama_step(which: str) -> Callable:
    def build(tiny: bool, device: torch.device):
        import fxinspect

        model = _hf("llama", tiny, device).eval()
        batch, tokens = (2, 16) if tiny else (8, 1024)
        make = fxinspect.prefill_inputs if which == "prefill" else fxinspect.decode_inputs
        return model, make(model, batch, tokens), None

    return build


WORKLOADS = (
    Workload("resnet50-train", _vision("resnet50"), train=True, autocast=True),
    Workload("vit_b_16-train", _vision("vit_b_16"), train=True, autocast=True),
    Workload("bert-infer", _bert, train=False),
    Workload("resnet50-infer", _vision("resnet50"), train=False, autocast=True),
    Workload("gpt2-medium-train", _lm_train("gpt2"), train=True),
    Workload("llama-prefill", _llama_step("prefill"), train=False, stateful=True),
    Workload("llama-decode", _llama_step("decode"), train=False, stateful=True),
    Workload("llama-1b-train", _lm_train("llama"), train=True),
)
