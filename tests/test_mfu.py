"""Model and hardware FLOPs of a training step against their closed forms (fxinspect.integrations.flops).

The closed form of a dense decoder's step (PaLM, appendix B; torchtitan the same) is
``6·N·tokens + 12·L·s·h·tokens``: 2 FLOPs per weight and token forward, 4 backward
(input and weight gradients), and the attention's two ``s × s`` products of ``h`` wide
per layer and token, three times over. Which ``N``: the weights of the
matmuls (every ``nn.Linear``, the untied ``lm_head`` included; not the embedding, a
lookup, nor the norms' gains) makes it exact; torchtitan's, every parameter but the
embedding, is within 0.5 %.
"""

from __future__ import annotations

import pytest
import torch
from reference import assert_same_state, state_fingerprint

import fxinspect
from fxinspect.integrations import step_flops

transformers = pytest.importorskip("transformers")

B, S = 2, 32  # batch, sequence
TOKENS = B * S


def _linear_weights(model: torch.nn.Module) -> int:
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))


def _llama(checkpointing: bool = False):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(config).train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model, config


def _batch(vocab: int = 256) -> dict:
    ids = torch.randint(0, vocab, (B, S), generator=torch.Generator().manual_seed(1))
    return {"input_ids": ids, "labels": ids}


def test_a_dense_llama_step_is_6_n_tokens_plus_attention():
    model, config = _llama()
    flops = step_flops(model, kwargs=_batch())
    layers, hidden = config.num_hidden_layers, config.hidden_size
    attention = 12 * layers * S * hidden * TOKENS  # 12 * 2 * 32 * 64 * 64 = 3,145,728
    n_matmul = _linear_weights(model)  # 2 * (64*64*2 + 64*32*2 + 3*64*128) + 64*256 = 90,112
    assert n_matmul == 90_112
    assert flops.model_flops == 6 * n_matmul * TOKENS + attention  # 34,603,008 + 3,145,728 = 37,748,736
    n_titan = sum(p.numel() for p in model.parameters()) - model.model.embed_tokens.weight.numel()
    closed = 6 * n_titan * TOKENS + attention  # (90,432: the norms' 320 gains too)
    assert abs(flops.model_flops - closed) / closed < 0.005
    # CPU's flash kernel recomputes Q K^T in its backward: b*h*s*s MACs a layer, as the
    # hardware runs it, not the model: 2 * 2 layers * 2 * 64 * 32 * 32 = 524,288
    assert flops.hardware_flops - flops.model_flops == flops.attention_flops == 2 * layers * B * hidden * S * S
    assert flops.checkpoint_flops == 0 and not flops.partial
    assert (flops.tokens, flops.samples, flops.dtype) == (TOKENS, B, "float32")


def test_checkpointing_adds_hardware_flops_and_leaves_model_flops():
    model, config = _llama(checkpointing=True)
    before = state_fingerprint(model)
    flops = step_flops(model, kwargs=_batch())
    assert_same_state(before, state_fingerprint(model))
    plain = step_flops(_llama()[0], kwargs=_batch())
    assert flops.model_flops == plain.model_flops
    # each layer's forward reruns up to the last tensor autograd saved in it (torch stops
    # there): q, k, v, o, the attention, gate and up, not down_proj (its output is saved
    # by nothing). MACs per layer: T*h*h*2 + T*h*32*2 + 2*B*h*S*S + T*h*128*2
    h, t = config.hidden_size, TOKENS
    per_layer = t * h * h * 2 + t * h * 32 * 2 + 2 * B * h * S * S + t * h * 128 * 2  # 2,097,152
    assert flops.checkpoint_flops == 2 * config.num_hidden_layers * per_layer
    assert flops.hardware_flops == plain.hardware_flops + flops.checkpoint_flops


def test_a_mixture_of_experts_counts_the_routed_experts_only():
    torch.manual_seed(0)
    hidden, inter, experts, top_k, layers, kv = 64, 96, 4, 2, 2, 32
    config = transformers.MixtralConfig(
        vocab_size=256,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=experts,
        num_experts_per_tok=top_k,
        max_position_embeddings=64,
    )
    model = transformers.MixtralForCausalLM(config).train()
    flops = step_flops(model, kwargs=_batch())
    # active weights per token: q, o (h*h), k, v (h*32), the router (h*E), top_k experts of
    # three h*I matrices, and the lm_head: 2*(8192 + 4096 + 256 + 2*3*6144) + 16384 = 115,200
    active = layers * (2 * hidden * hidden + 2 * hidden * kv + hidden * experts + top_k * 3 * hidden * inter)
    active += hidden * 256
    assert active == 115_200
    assert flops.model_flops == 6 * active * TOKENS + 12 * layers * S * hidden * TOKENS
    every_expert = active + layers * (experts - top_k) * 3 * hidden * inter  # what a dense count would say
    assert flops.model_flops < 6 * every_expert * TOKENS


def test_mfu_and_hfu_divide_by_the_peak_of_the_dtype_that_carries_the_macs():
    layer = torch.nn.Linear(16, 8, bias=False).to(torch.bfloat16)
    flops = step_flops(layer, torch.randn(4, 16, dtype=torch.bfloat16))
    assert flops.dtype == "bfloat16"
    assert flops.model_flops == 2 * (4 * 16 * 8) * 2  # forward and weight gradient: 2 * 512 * 2 = 2,048
    spec = fxinspect.timemodel.DeviceSpec("toy", {"float32": 1e3, "bfloat16": 4e3}, 1e9)
    assert flops.mfu(2.0, spec) == pytest.approx(2048 / (2.0 * 4e3))  # 0.256, at bfloat16's peak
    assert flops.hfu(2.0, spec) == pytest.approx(2048 / (2.0 * 4e3))  # nothing recomputed


def test_a_report_without_backward_is_refused():
    report = fxinspect.analyze(torch.nn.Linear(4, 2), torch.randn(3, 4), timing=False)
    with pytest.raises(ValueError, match="backward=True"):
        fxinspect.integrations.StepFlops.of(report)
