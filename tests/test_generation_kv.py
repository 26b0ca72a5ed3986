"""KV-cache bytes: the model's own cache on meta against a real generate() on CPU, and by hand."""

from __future__ import annotations

import pytest
import torch
import transformers
from generation_zoo import (
    BUILD,
    HELD_OUT,
    WINDOW,
    encoder_inputs,
    families,
    quiet_transformers,  # noqa: F401 - an autouse fixture
)

from fxinspect.serving.kv_cache import cache_bytes, closed_form_kv_bytes_per_token
from fxinspect.serving.kv_curve import kv_bytes_curve, kv_bytes_past_windows

BATCH, PROMPT, NEW = 2, 12, 4
ZOO = {f.name: f for f in families()}


def _build(name: str, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    torch.manual_seed(0)
    return ZOO[name].build().to(dtype)


def _generate(model: torch.nn.Module, prompt: int = PROMPT, **kwargs) -> tuple[object, dict, int]:
    """A real greedy generate() on CPU: its final cache, the encoder inputs and the cached context."""
    enc = model.config.is_encoder_decoder
    inputs = encoder_inputs(model, BATCH) if enc else {"input_ids": torch.randint(2, 128, (BATCH, prompt))}
    out = model.generate(
        **inputs, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, return_dict_in_generate=True, **kwargs
    )
    # the last generated token is never fed back: a decoder-only cache holds prompt + new - 1
    # tokens; a decoder's holds its start token + new - 1
    context = NEW if enc else prompt + NEW - 1
    assert out.sequences.shape[1] == (NEW + 1 if enc else prompt + NEW)
    return out.cache, (inputs if enc else {}), context


def _meta_matches_generate(name: str) -> None:
    model = _build(name)
    cache, enc, context = _generate(model)
    real = cache_bytes(cache)
    meta = kv_bytes_curve(model, BATCH, [context], encoder_inputs=enc or None).bytes[0]
    assert real.total > 0
    assert (meta.total, meta.logical, meta.by_kind, meta.by_layer) == (
        real.total,
        real.logical,
        real.by_kind,
        real.by_layer,
    )


@pytest.mark.parametrize("name", BUILD)
def test_meta_cache_equals_generate(name):
    _meta_matches_generate(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", HELD_OUT)
def test_meta_cache_equals_generate_held_out(name):
    _meta_matches_generate(name)


@pytest.mark.parametrize(
    "name, expected",
    [
        # 2 layers * 2 (k, v) * batch 2 * kv_heads 2 * context 16 * head_dim 16 * 4 B = 16,384
        ("llama", 2 * 2 * 2 * 2 * 16 * 16 * 4),
        # multi-query: 2 layers * 2 (k, v) * batch 2 * 1 kv head * context 16 * head_dim 16 * 4 B = 8,192
        ("falcon", 2 * 2 * 2 * 1 * 16 * 16 * 4),
    ],
)
def test_hand_computed_bytes(name, expected):
    model = _build(name)
    cache, _, context = _generate(model, prompt=13)  # 13 + 4 - 1 = 16 tokens cached
    assert context == 16
    assert cache_bytes(cache).total == expected
    assert kv_bytes_curve(model, BATCH, [16]).bytes[0].total == expected


def test_encoder_decoder_cross_part_is_constant():
    model = _build("t5")
    curve = kv_bytes_curve(model, BATCH, [4, 8, 9])  # encoder: 16 token ids by default
    # cross: 2 layers * 2 (k, v) * batch 2 * 4 heads * 16 encoder tokens * d_kv 16 * 4 B = 32,768
    assert [b.cross for b in curve.bytes] == [32768] * 3
    # self: 2 layers * 2 (k, v) * 4 heads * 16 * 4 B = 1,024 per decoder token of one sequence
    assert [b.self_attention for b in curve.bytes] == [BATCH * 1024 * c for c in (4, 8, 9)]
    assert curve.per_token == 1024 == closed_form_kv_bytes_per_token(model.config, torch.float32)


def test_sliding_window_caps_the_cache():
    model = _build("mistral")
    contexts = [4, WINDOW, 16, 32, 33]
    curve = kv_bytes_curve(model, BATCH, contexts)
    # per token, all layers: 2 layers * 2 (k, v) * batch 2 * kv_heads 2 * head_dim 16 * 4 B = 1,024;
    # a layer holds min(context, window) tokens (a view of its last window - 1 tokens in a window-token
    # buffer), plus one int64 window size per layer (2 * 8 B)
    assert list(curve.totals) == [1024 * min(c, WINDOW) + 16 for c in contexts]
    assert [b.logical for b in curve.bytes] == [1024 * min(c, WINDOW - 1) + 16 for c in contexts]
    assert curve.per_token == 0 and curve.shape == "sublinear"
    # the closed form ignores the window: 2 * 2 layers * 2 kv heads * 16 * 4 B = 512 per token
    assert closed_form_kv_bytes_per_token(model.config, torch.float32) == 512


def test_prefill_keeps_the_whole_prompt_in_a_sliding_layer():
    # right after a prefill (before any decode step) a sliding layer's window is a view of the
    # prompt's full key/value buffer, which therefore stays allocated: 32 tokens, not 8
    model = _build("mistral")
    with torch.device("meta"):
        meta = transformers.AutoModelForCausalLM.from_config(model.config).eval()
        cache = meta(input_ids=torch.zeros(BATCH, 32, dtype=torch.long), use_cache=True).cache
    held = cache_bytes(cache)
    assert held.total == 1024 * 32 + 16
    assert held.logical == 1024 * (WINDOW - 1) + 16


def test_hybrid_local_global_grows_by_its_global_layers():
    curve = kv_bytes_curve(_build("gemma2"), BATCH, [16, 32, 33])
    # one global layer of two: 1 layer * 2 (k, v) * kv_heads 2 * head_dim 16 * 4 B = 256 per token
    assert curve.per_token == 256
    assert closed_form_kv_bytes_per_token(_build("gemma2").config, torch.float32) == 512


@pytest.mark.parametrize(
    "dtype, conv, ssm",
    [
        # conv: 2 layers * batch 2 * 128 channels (expand 2 * hidden 64) * kernel 4 * 4 B = 8,192
        # ssm: 2 layers * batch 2 * 128 channels * state 8 * 4 B = 16,384
        (torch.float32, 8192, 16384),
        # in bfloat16 the conv state halves, and Mamba keeps its SSM state in float32
        (torch.bfloat16, 4096, 16384),
    ],
)
def test_state_space_state_is_constant(dtype, conv, ssm):
    model = _build("mamba", dtype)
    cache, _, context = _generate(model)
    real = cache_bytes(cache)
    assert (real.by_kind["conv_state"], real.by_kind["ssm_state"], real.total) == (conv, ssm, conv + ssm)
    curve = kv_bytes_curve(model, BATCH, [4, context, 32])
    assert list(curve.totals) == [conv + ssm] * 3 and curve.shape == "constant"
    assert closed_form_kv_bytes_per_token(model.config, torch.float32) is None


def test_latent_attention_caches_the_latent():
    model = _build("deepseek_v3")
    curve = kv_bytes_curve(model, BATCH, [16, 32, 33])
    # the cache holds, per layer and token, the compressed latent (kv_lora_rank 16) and one rope
    # key shared by all heads (qk_rope_head_dim 8): 2 layers * (16 + 8) * 4 B = 192 per token
    assert curve.per_token == 192
    # the closed form counts uncompressed keys and values for every head:
    # 2 * 2 layers * 4 heads * v_head_dim 16 * 4 B = 1,024 (5.3x more)
    assert closed_form_kv_bytes_per_token(model.config, torch.float32) == 1024


@pytest.mark.parametrize("name", ["gpt2", "llama", "falcon", "mixtral"])
def test_closed_form_holds_for_plain_attention(name):
    model = _build(name)
    curve = kv_bytes_curve(model, BATCH, [16, 17])
    assert curve.per_token == closed_form_kv_bytes_per_token(model.config, torch.float32)


def test_closed_form_full_size_by_hand():
    llama3 = transformers.LlamaConfig(num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8)
    # 2 * 32 layers * 8 kv heads * head_dim 4096 / 32 = 128 * 2 B (bf16) = 131,072
    assert closed_form_kv_bytes_per_token(llama3, torch.bfloat16) == 131072
    assert closed_form_kv_bytes_per_token(ZOO["jamba"].build().config, torch.bfloat16) is None


def _static(model):
    return lambda c: transformers.StaticCache(config=model.config, max_cache_len=c)


def _fp8(model):
    return lambda c: transformers.QuantizedCache("fp8", model.config)


@pytest.mark.parametrize(
    "name, implementation, new_cache, expected",
    [
        # 2 layers * 2 (k, v) * batch 2 * kv_heads 2 * 15 tokens * head_dim 16 * 4 B = 15,360
        # + an int64 token count per layer (2 * 8 B)
        ("llama", "static", _static, 15360 + 16),
        # layer 0 slides: 8 tokens (the window) instead of 15: 2 * 2 * 2 * 16 * 4 B * (8 + 15) + 16
        ("gemma2", "static", _static, 2 * 2 * 2 * 16 * 4 * (WINDOW + 15) + 16),
        # float8 keys and values, 1 B each: 15,360 / 4 = 3,840, + a float32 scale per tensor (4 * 4 B)
        ("llama", "quantized", _fp8, 3840 + 16),
    ],
)
def test_other_cache_classes_meta_equals_generate(name, implementation, new_cache, expected):
    model = _build(name)
    extra = {"cache_config": {"backend": "fp8"}} if implementation == "quantized" else {}
    cache, _, context = _generate(model, cache_implementation=implementation, **extra)
    curve = kv_bytes_curve(model, BATCH, [context], new_cache=new_cache(model))
    assert curve.bytes[0] == cache_bytes(cache)
    assert curve.bytes[0].total == expected


def test_legacy_tuples_and_aliases_count_each_storage_once():
    k = torch.zeros(2, 4, 10, 16)  # 2 * 4 * 10 * 16 * 4 B = 5,120
    v = torch.zeros(2, 4, 10, 16)
    ck, cv = torch.zeros(2, 4, 6, 16), torch.zeros(2, 4, 6, 16)  # 3,072 each
    counted = cache_bytes(((k, v, ck, cv), (k, v[:, :, :5], ck, cv)))  # layer 1 reuses layer 0's storages
    assert counted.total == 2 * 5120 + 2 * 3072
    assert counted.by_kind == {"key": 5120, "value": 5120, "cross_key": 3072, "cross_value": 3072}
    assert counted.by_layer == {0: 16384}
    assert counted.logical == 2 * 5120 + 2 * 3072 + 2560  # the half view of v is a tensor of its own


def test_unknown_cache_class_by_duck_typing():
    class OldStyleCache:  # transformers 4.x kept per-layer lists of keys and values
        def __init__(self):
            self.key_cache = [torch.zeros(1, 2, 8, 4) for _ in range(3)]  # 1 * 2 * 8 * 4 * 4 B = 256
            self.value_cache = [torch.zeros(1, 2, 8, 4, dtype=torch.bfloat16) for _ in range(3)]  # 128
            self.seen_tokens = torch.zeros((), dtype=torch.long)  # 8 B of bookkeeping

    counted = cache_bytes(OldStyleCache())
    assert counted.by_kind == {"key": 3 * 256, "value": 3 * 128, "other": 8}
    assert counted.by_layer == {0: 384, 1: 384, 2: 384, None: 8}


def test_the_model_is_not_changed():
    model = _build("mixtral")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    implementation = model.config._experts_implementation
    kv_bytes_curve(model, BATCH, [8], dtype=torch.bfloat16)
    assert model.config._experts_implementation == implementation
    after = model.state_dict()
    assert all(after[k].device.type == "cpu" and torch.equal(after[k], v) for k, v in before.items())


@pytest.mark.parametrize(
    "name, per_token",
    [
        ("llama", 512),  # 2 layers * 2 (k, v) * kv_heads 2 * head_dim 16 * 4 B
        ("mistral", 0),  # every layer slides
        ("gemma2", 256),  # its one global layer: 1 * 2 * 2 * 16 * 4 B
        ("deepseek_v3", 192),  # 2 layers * (latent 16 + rope key 8) * 4 B
        ("mamba", 0),  # a state
    ],
)
def test_past_windows_finds_the_steady_growth(name, per_token):
    model = _build(name)
    curve = kv_bytes_past_windows(model, BATCH, start=4)  # below the window of 8
    windows = WINDOW if name in ("mistral", "gemma2") else 4
    assert curve.contexts == (4, windows + 1, windows + 2)
    assert curve.per_token == per_token
    # extrapolated past the analysed contexts, checked against a measurement there
    assert curve.extrapolate(40) == kv_bytes_curve(model, BATCH, [40]).totals[0]
