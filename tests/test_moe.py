"""Mixture-of-experts models count exactly what their experts multiply, in every tier.

transformers runs the experts through ``aten._grouped_mm`` in a plain forward and
through its custom op ``transformers::grouped_mm_fallback`` under ``torch.export``; both
are counted from the group offsets. Each test builds a small model from a config
(random weights, no download), runs the router itself (forward hooks on every layer's
``mlp.gate``) to learn how many tokens go to each expert, and checks fxinspect's total
MACs against the closed form from the config and those counts.
"""

from __future__ import annotations

import pytest
import torch

import fxinspect

transformers = pytest.importorskip("transformers")

B, S = 1, 8  # batch, sequence: T = 8 tokens
T = B * S
SMALL = dict(  # head_dim 8; sizes multiples of 4 keep the grouped-mm kernel's 16-byte strides
    vocab_size=64,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=32,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


def attention_macs(c) -> int:
    """Per layer: q, k, v, o projections and the two matmuls of attention (counted in full)."""
    hd = c.hidden_size // c.num_attention_heads
    q = T * c.hidden_size * c.num_attention_heads * hd  # 8 * 16 * 16 = 2048
    kv = 2 * T * c.hidden_size * c.num_key_value_heads * hd  # 2 * 8 * 16 * 8 = 2048
    o = T * c.num_attention_heads * hd * c.hidden_size  # 2048
    sdpa = B * c.num_attention_heads * S * S * (hd + hd)  # Q K^T then P V: 1 * 2 * 8 * 8 * 16 = 2048
    return q + kv + o + sdpa  # 8192


def experts_macs(c, routed: list[int], intermediate: int) -> int:
    """One layer's experts: each runs gate_up (H -> 2I) and down (I -> H) on its tokens."""
    return sum(n * (c.hidden_size * 2 * intermediate + intermediate * c.hidden_size) for n in routed)


def mixtral():
    """MixtralForSequenceClassification: 4 experts, top-2, score head of 3 labels."""
    c = transformers.MixtralConfig(
        **SMALL, intermediate_size=24, num_local_experts=4, num_experts_per_tok=2, num_labels=3
    )

    def closed_form(routed):
        # per layer: attention 8192 + router 8 * 16 * 4 = 512 + experts sum(n_e) * 3 * 16 * 24;
        # once: the score head 8 * 16 * 3 = 384 (embedding, norms, rotary: no MACs)
        layers = sum(attention_macs(c) + T * c.hidden_size * 4 + experts_macs(c, n, 24) for n in routed)
        return layers + T * c.hidden_size * 3

    return transformers.MixtralForSequenceClassification(c), closed_form


def qwen2_moe():
    """Qwen2MoeForCausalLM: 4 routed experts, top-2, plus an always-on shared expert."""
    c = transformers.Qwen2MoeConfig(
        **SMALL, moe_intermediate_size=12, shared_expert_intermediate_size=20, num_experts=4, num_experts_per_tok=2
    )

    def closed_form(routed):
        # per layer: attention 8192 (q/k/v biases: no MACs) + router 8 * 16 * 4 = 512
        # + experts sum(n_e) * 3 * 16 * 12 + shared expert 8 * 3 * 16 * 20 = 7680
        # + its gate 8 * 16 * 1 = 128; once: lm_head 8 * 16 * 64 = 8192
        shared = T * 3 * c.hidden_size * 20 + T * c.hidden_size
        layers = sum(attention_macs(c) + T * c.hidden_size * 4 + experts_macs(c, n, 12) + shared for n in routed)
        return layers + T * c.hidden_size * c.vocab_size

    return transformers.Qwen2MoeForCausalLM(c), closed_form


def olmoe():
    """OlmoeForCausalLM: 4 experts, top-2; q/k norms (no MACs)."""
    c = transformers.OlmoeConfig(**SMALL, intermediate_size=12, num_experts=4, num_experts_per_tok=2)

    def closed_form(routed):
        # per layer: attention 8192 + router 512 + experts sum(n_e) * 3 * 16 * 12; lm_head 8192
        layers = sum(attention_macs(c) + T * c.hidden_size * 4 + experts_macs(c, n, 12) for n in routed)
        return layers + T * c.hidden_size * c.vocab_size

    return transformers.OlmoeForCausalLM(c), closed_form


FAMILIES = {"mixtral": mixtral, "qwen2_moe": qwen2_moe, "olmoe": olmoe}


def routed_tokens(model, inputs) -> list[list[int]]:
    """Per layer, how many tokens the router sends to each expert (hooks on ``mlp.gate``)."""
    found = []

    def hook(module, args, out):
        _, _, indices = out  # (logits, top-k weights, top-k expert indices)
        found.append(torch.bincount(indices.flatten(), minlength=module.num_experts).tolist())

    layers = model.model.layers
    handles = [layer.mlp.gate.register_forward_hook(hook) for layer in layers]
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in handles:
            h.remove()
    assert len(found) == len(layers)
    return found


@pytest.fixture(scope="module", params=FAMILIES.values(), ids=FAMILIES.keys())
def family(request):
    """A model, its inputs, the routing and the closed form, built once per family."""
    torch.manual_seed(0)
    model, closed_form = request.param()
    model.eval()
    inputs = {"input_ids": torch.randint(1, 64, (B, S))}
    routed = routed_tokens(model, inputs)
    # every token goes to top-k experts; the routing is what the experts' MACs follow
    assert all(sum(n) == T * model.config.num_experts_per_tok for n in routed)
    return model, inputs, routed, closed_form(routed)


@pytest.mark.parametrize("method", ["auto", "symbolic", "export", "eager"])
def test_moe_macs_equal_closed_form(family, method):
    model, inputs, routed, expected = family
    # every tier captures these models today: one that stops is a failure, never a skip
    with torch.no_grad():
        report = fxinspect.analyze(model, inputs, method=method, timing=False, check_finite=False)
    assert report.uncounted == ()
    assert report.totals.partial is False
    assert report.totals.macs == expected
    # what each layer's experts ran, where the capture breaks the model down that far
    for i, counts in enumerate(routed):
        experts = report.modules[f"model.layers.{i}.mlp.experts"]
        if not experts.counted_in:
            per_expert = 3 * model.config.hidden_size * model.model.layers[i].mlp.experts.intermediate_dim
            assert experts.macs == sum(counts) * per_expert
