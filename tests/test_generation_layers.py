"""A deep decoder's fitted steps from shallow copies (fxinspect.serving.layers): the same figures.

The shortcut analyses copies of 2, 3 and 4 blocks of layers and extrapolates; every figure
of a generation must be what analysing the whole model gives (``shallow=False``, computed
here, not written down), on every family of the zoo made deep enough for it to apply.
"""

from __future__ import annotations

import copy

import pytest
import torch
import transformers as tf
from generation_zoo import WINDOW, families, quiet_transformers  # noqa: F401  (the fixture)

import fxinspect
from fxinspect.serving.layers import extrapolate, repeating, shallow_copy

_LM = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2)


def _deep(model: torch.nn.Module, layers: int) -> torch.nn.Module:
    """``model``'s architecture with ``layers`` layers (per-layer lists repeated)."""
    config = copy.deepcopy(model.config)
    count = config.num_hidden_layers
    for key, value in list(vars(config).items()):
        if isinstance(value, list) and len(value) == count:
            setattr(config, key, [value[i % count] for i in range(layers)])
    config.num_hidden_layers = layers
    return type(model)(config).eval()


@pytest.mark.parametrize(
    "config, expected",
    [
        (tf.LlamaConfig(**_LM, num_hidden_layers=10), ("model.layers", 10, 1)),
        (tf.LlamaConfig(**_LM, num_hidden_layers=9), None),  # (fewer than 10 blocks: nothing to gain)
        (  # sliding and global alternating: a period of 2 layers
            tf.Gemma2Config(
                **_LM,
                num_hidden_layers=20,
                head_dim=8,
                sliding_window=WINDOW,
                layer_types=["sliding_attention", "full_attention"] * 10,
            ),
            ("model.layers", 20, 2),
        ),  # fmt: skip
        (  # the first layer dense, the others experts: no period
            tf.DeepseekV3Config(
                **_LM,
                num_hidden_layers=10,
                first_k_dense_replace=1,
                n_routed_experts=4,
                num_experts_per_tok=2,
                n_group=1,
                topk_group=1,
                moe_intermediate_size=16,
                kv_lora_rank=8,
                q_lora_rank=16,
                qk_rope_head_dim=4,
                qk_nope_head_dim=4,
                v_head_dim=8,
            ),
            None,
        ),  # fmt: skip
    ],
    ids=["llama", "llama-9", "gemma2-alternating", "deepseek-first-dense"],
)
def test_repeating_finds_the_layers_period(config, expected):
    with torch.device("meta"):
        model = tf.AutoModelForCausalLM.from_config(config)
    assert repeating(model) == expected


def test_shallow_copy_leaves_the_model_as_it_is():
    config = tf.Gemma2Config(**_LM, num_hidden_layers=10, head_dim=8, sliding_window=WINDOW,
                             layer_types=["sliding_attention", "full_attention"] * 5)  # fmt: skip
    with torch.device("meta"):
        model = tf.AutoModelForCausalLM.from_config(config)
    layers, inner = model.model.layers, model.model
    made = shallow_copy(model, "model.layers", 4)
    assert len(made.model.layers) == 4 and made.config.num_hidden_layers == 4
    assert made.config.layer_types == ["sliding_attention", "full_attention"] * 2
    assert all(a is b for a, b in zip(made.model.layers, layers))  # (the layers shared, not copied)
    assert made.model.config is made.config and made.lm_head is model.lm_head
    # the model: its own modules, its 10 layers and its config
    assert model.model is inner and model.model.layers is layers and len(layers) == 10
    assert model.config.num_hidden_layers == 10 and len(model.config.layer_types) == 10
    assert model.model.config is model.config


def test_extrapolate_names_and_events_of_each_block():
    # a timeline by node: 'emb' allocates 2 tensors a block; 'silu' (bare the first time)
    # runs once a block at 100 + 8·block + 50·count bytes; 'out' frees one per block
    def seen(k):
        blocks = {("silu" if i == 0 else f"silu_{i}"): {"0": 100 + 8 * i + 50 * k} for i in range(k)}
        return {"emb": {str(r): 10 * r for r in range(2 * k)}, **blocks, "out": {str(r): 7 for r in range(k + 1)}}

    # blocks 1, 2, 3 of the copies (their first block is its own: ``seen`` from 2 blocks)
    got = extrapolate([seen(2), seen(3), seen(4)], 4)  # 4 blocks after the first: 5 in all
    assert got == seen(5)
    assert got["silu_4"] == {"0": 100 + 8 * 4 + 50 * 5}  # 382
    wrong = seen(4)
    wrong["out"]["0"] = 8  # (the third copy not what the first two predict)
    assert extrapolate([seen(2), seen(3), wrong], 4) is None


def _figures(gen) -> dict:
    """Every figure a generation gives, at sizes on both sides of the sliding window."""
    out = {name: (str(c), c.verified) for name, c in gen.curves.items()}
    out |= {"kv": gen.kv_bytes_per_token, "ttft": gen.ttft, "tpot": gen.tpot, "peak": gen.peak}
    out |= {"memory": gen.memory, "weights": gen.weights_bytes, "tps": gen.tokens_per_second}
    out |= {"max_batch": gen.max_batch("2MiB")}
    if gen.kv_bytes_per_token:  # (a cache that stops growing fits every context a budget fits: no longest)
        out["max_context"] = gen.max_context("2MiB", batch=2)
    out |= {f"cost {c}": gen.cost(c) for c in (3, WINDOW - 1, WINDOW, WINDOW + 2, 20, 40)}
    return out


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    if isinstance(a, tuple) and isinstance(b, tuple) or hasattr(a, "__dataclass_fields__"):
        fields = vars(a).values() if hasattr(a, "__dataclass_fields__") else a
        other = vars(b).values() if hasattr(b, "__dataclass_fields__") else b
        return type(a) is type(b) and all(_close(x, y) for x, y in zip(fields, other, strict=True))
    return a == b


@pytest.mark.slow
@pytest.mark.parametrize("family", families("all"), ids=lambda f: f.name)
def test_shallow_copies_give_the_whole_models_figures(family):
    if family.name == "whisper":  # (generation's decode inputs give an encoder token ids, not Whisper's features)
        pytest.skip("fxinspect.generation does not make Whisper's input_features (as on main); no layers' shortcut")
    model = family.build()
    if not model.config.is_encoder_decoder:  # (10 blocks of the model's own period of layers)
        period = 2 if family.name in ("gemma2", "cohere2", "jamba", "bamba") else 1
        model = _deep(model, 10 * period)
    kwargs = dict(batch=2, prompt=12, new_tokens=6, device_spec="h100-sxm", progress=False)
    whole = _figures(fxinspect.generation(model, **kwargs, shallow=False))
    gen = fxinspect.generation(model, **kwargs)
    fast = _figures(gen)
    assert whole.keys() == fast.keys()
    differ = [k for k in whole if not _close(whole[k], fast[k])]
    assert not differ, f"{family.name}: {differ[:5]}"
    if family.name in ("llama", "qwen2", "gpt_neox"):  # (layers alike: the shortcut taken, no step analysed whole)
        assert gen._shallow is not None and gen._steps == {}
