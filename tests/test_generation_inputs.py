"""The prefill and decode calls of generation, as the model's own ``generate()`` makes them.

Each family is a tiny model built from a config (hidden 64, 2 layers, vocabulary 128,
random weights). ``decode_inputs`` is checked against the kwargs a real ``generate()``
passes at the same step (captured by a forward pre-hook), its cache's shapes against
the config by hand, and the analysed decode step against ``FlopCounterMode`` on the
same real call; the caller's cache and the model stay as they were.
"""

from __future__ import annotations

import copy

import pytest
import torch
from reference import CUSTOM, assert_same_state, state_fingerprint
from torch.utils.flop_counter import FlopCounterMode

import fxinspect
from fxinspect.capture.states import held_states, state_tensors
from fxinspect.records import TensorRole
from fxinspect.run.memory.allocator import AllocatorWatch
from fxinspect.serving import decode_inputs, prefill_inputs
from fxinspect.serving.inputs import _tokens

transformers = pytest.importorskip("transformers")

B = 2  # batch
H, HEADS, HEAD_DIM, VOCAB = 64, 4, 16, 128  # hidden 64 = 4 heads * 16
WINDOW = 8  # Mistral's sliding window: it caches the last WINDOW - 1 = 7 tokens
COMMON = dict(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=2, num_attention_heads=HEADS, intermediate_size=128)
SPECIAL = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)


def llama():  # grouped-query attention: 4 query heads share 2 key/value heads
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(num_key_value_heads=2, **COMMON, **SPECIAL))


def gpt2():  # multi-head attention, learned positions
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=H, n_layer=2, n_head=HEADS, **SPECIAL)
    return transformers.GPT2LMHeadModel(config)


def mistral():
    config = transformers.MistralConfig(num_key_value_heads=2, sliding_window=WINDOW, **COMMON, **SPECIAL)
    return transformers.MistralForCausalLM(config)


def qwen2_moe():  # 4 experts, top-2, and a shared expert
    config = transformers.Qwen2MoeConfig(
        num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        shared_expert_intermediate_size=64, **COMMON, **SPECIAL,
    )  # fmt: skip
    return transformers.Qwen2MoeForCausalLM(config)


def t5():  # encoder-decoder: self-attention and cross-attention caches
    config = transformers.T5Config(
        vocab_size=VOCAB, d_model=H, d_kv=HEAD_DIM, d_ff=128, num_layers=2, num_heads=HEADS,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    return transformers.T5ForConditionalGeneration(config)


def mamba():  # a state, not a cache: conv and SSM states per layer
    config = transformers.MambaConfig(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=2, state_size=8, **SPECIAL)
    return transformers.MambaForCausalLM(config)


FAMILIES = {"llama": llama, "gpt2": gpt2, "mistral": mistral, "qwen2_moe": qwen2_moe, "t5": t5, "mamba": mamba}


def cache_shapes(name: str, context: int, encoder: int) -> list[tuple[int, ...]]:
    """The cache's tensors after ``context`` tokens, per layer, from the config by hand."""
    if name in ("llama", "qwen2_moe"):  # (batch, kv_heads 2, context, head_dim 16): keys, values
        return [(B, 2, context, HEAD_DIM)] * 4
    if name == "gpt2":  # all 4 heads cached
        return [(B, HEADS, context, HEAD_DIM)] * 4
    if name == "mistral":  # the last WINDOW - 1 tokens only (and the window itself, a 0-d tensor)
        return [(B, 2, min(context, WINDOW - 1), HEAD_DIM), (B, 2, min(context, WINDOW - 1), HEAD_DIM), ()] * 2
    if name == "t5":  # self-attention over the decoder's tokens, then cross-attention over the encoder's
        return [(B, HEADS, context, HEAD_DIM)] * 4 + [(B, HEADS, encoder, HEAD_DIM)] * 4
    # mamba: inner = expand 2 * hidden 64 = 128; conv state (B, 128, conv_kernel 4), SSM (B, 128, state 8)
    return [(B, 128, 4), (B, 128, 8)] * 2


def _grouped_mm(a, b, offs=None, *args, out_val=None, **kwargs):
    # FlopCounterMode counts aten._grouped_mm as zero: (M, K) x (G, K, N), the rows split
    # into groups at offs (cumulative ends): every row meets one expert's K x N weight
    return 2 * int(offs[-1]) * a.shape[1] * b.shape[2]


_grouped_mm._get_raw = True  # (FlopCounterMode hands it the tensors, offs' values included)


def reference_flops(model, kwargs) -> int:
    """Corrected FlopCounterMode over the real call, made on a copy of the inputs (the
    call grows or writes the cache)."""
    mapping = {**CUSTOM, torch.ops.aten._grouped_mm: _grouped_mm}
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        model(**copy.deepcopy(kwargs))
    return counter.get_total_flops()


@pytest.fixture(scope="module", params=FAMILIES, ids=list(FAMILIES))
def family(request):
    torch.manual_seed(0)
    return request.param, FAMILIES[request.param]().eval()


def ops(report) -> list[str]:
    return [str(n.target) for n in report.nodes if n.is_op]


def analyzed(model, inputs, **options):
    with torch.no_grad():
        return fxinspect.analyze(model, inputs, timing=False, check_finite=False, **options)


# --- decode_inputs is what generate() passes ---------------------------------------------


class _Stop(Exception):
    pass


def generated_step(model, context: int, encoder: int) -> dict:
    """The kwargs of the second forward of a real greedy ``generate()``: its first decode
    step, with the prompt's ``context`` tokens cached (the same tokens decode_inputs uses)."""
    calls = []

    def hook(module, args, kwargs):
        calls.append(dict(kwargs))
        if len(calls) == 2:
            raise _Stop

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        if model.config.is_encoder_decoder:
            decoder = _tokens(model, B, context, torch.device("cpu"))
            decoder[:, 0] = model.config.decoder_start_token_id
            source = _tokens(model, B, encoder, torch.device("cpu"))
            model.generate(input_ids=source, decoder_input_ids=decoder, max_new_tokens=2, min_new_tokens=2, do_sample=False)  # fmt: skip
        else:
            prompt = _tokens(model, B, context, torch.device("cpu"))
            model.generate(prompt, max_new_tokens=2, min_new_tokens=2, do_sample=False)
    except _Stop:
        pass
    finally:
        handle.remove()
    return calls[1]


def test_decode_inputs_are_what_generate_passes(family):
    name, model = family
    context, encoder = 5, 6
    ours = decode_inputs(model, B, context, encoder_length=encoder)
    theirs = generated_step(model, context, encoder)
    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        mine = ours[key]
        if key in ("input_ids", "decoder_input_ids"):  # the next token: generate's argmax, ours fixed
            assert mine.shape == value.shape == (B, 1)
        elif key == "cache":
            assert type(mine) is type(value)
            expected = [(p, tuple(t.shape)) for p, t in state_tensors(value)]
            assert [(p, tuple(t.shape)) for p, t in state_tensors(mine)] == expected
            assert [shape for _, shape in expected] == cache_shapes(name, context, encoder)
            for (_, a), (_, b) in zip(state_tensors(mine), state_tensors(value)):
                torch.testing.assert_close(a, b)  # the same prompt through the same model
        elif key == "encoder_outputs":
            torch.testing.assert_close(mine.last_hidden_state, value.last_hidden_state)
        elif isinstance(value, torch.Tensor):
            assert torch.equal(mine, value), key
        else:
            assert mine == value, key


def test_a_static_cache_as_the_generation_config_asks():
    model = llama().eval()
    model.generation_config.cache_implementation = "static"
    context = 5
    ours = decode_inputs(model, B, context)
    theirs = generated_step(model, context, 0)
    assert type(ours["cache"]).__name__ == type(theirs["cache"]).__name__ == "StaticCache"
    # generate()'s static cache holds max_length - 1 = 5 + 2 - 1 = 6 tokens: decode_inputs' default context + 1
    shapes = [tuple(t.shape) for _, t in state_tensors(ours["cache"]) if t.dim() == 4]
    assert shapes == [tuple(t.shape) for _, t in state_tensors(theirs["cache"]) if t.dim() == 4] == [(B, 2, 6, 16)] * 4
    assert ours["attention_mask"].shape == theirs["attention_mask"].shape == (B, 1, 1, 6)  # the 4-D mask it builds
    assert torch.equal(ours["attention_mask"], theirs["attention_mask"])


# --- the decode step analysed ------------------------------------------------------------


@pytest.mark.parametrize("context", [16, 64])
def test_decode_flops_equal_flop_counter_mode_on_the_real_step(family, context):
    name, model = family
    step = decode_inputs(model, B, context)
    report = analyzed(model, step)
    assert report.totals.partial is False
    # FlopCounterMode counts the matmul-like ops (and attention), 2 FLOPs per MAC
    assert 2 * report.totals.macs == reference_flops(model, step)
    assert [tuple(t.shape) for _, t in state_tensors(step["cache"])] == cache_shapes(name, context, context)


def test_the_decode_graph_is_the_same_at_every_context(family):
    name, model = family
    short, long = (analyzed(model, decode_inputs(model, B, c)) for c in (16, 64))
    assert ops(short) == ops(long)
    if name == "llama":
        # 48 more tokens: per layer QK^T and PV over them, 2 MACs * batch 2 * 4 heads * 16
        assert long.totals.macs - short.totals.macs == 48 * 2 * 2 * B * HEADS * HEAD_DIM  # 2 layers: 24576
    if name in ("mistral", "mamba"):  # past the window / a fixed state: a step costs the same
        assert long.totals.macs == short.totals.macs


# (Qwen2-MoE: torch's meta kernel of aten._grouped_mm takes bf16/fp16 only, and on meta
# the experts' MACs need the routing's values: item 3's expected experts per token)
@pytest.mark.parametrize("name, cache", [(n, None) for n in FAMILIES if n != "qwen2_moe"] + [("llama", "static")])
def test_the_decode_step_on_meta_counts_what_the_cpu_step_counts(name, cache):
    torch.manual_seed(0)
    model = FAMILIES[name]().eval()
    with torch.device("meta"):
        on_meta = FAMILIES[name]().eval()
    cpu = analyzed(model, decode_inputs(model, B, 16, cache=cache))
    meta_step = decode_inputs(on_meta, B, 16, cache=cache)
    assert all(t.device.type == "meta" for _, t in state_tensors(meta_step))
    meta = analyzed(on_meta, meta_step)
    assert (meta.totals.flops, meta.totals.macs, meta.totals.params) == (
        cpu.totals.flops,
        cpu.totals.macs,
        cpu.totals.params,
    )
    assert ops(meta) == ops(cpu)
    assert meta.capture.method == cpu.capture.method


@pytest.mark.parametrize("cache", ["dynamic", "static"])
@pytest.mark.parametrize("method", ["auto", "eager"])
def test_analyze_leaves_the_callers_cache_and_the_model_as_they_were(cache, method):
    model = llama().eval()
    step = decode_inputs(model, B, 6, cache=cache)
    held = state_tensors(step["cache"])
    before = [(p, t, t.clone()) for p, t in held]
    fingerprint = state_fingerprint(model)
    report = analyzed(model, step, method=method)
    assert 2 * report.totals.macs == reference_flops(model, step)  # the step on 6 cached tokens, not 7
    after = state_tensors(step["cache"])
    assert [(p, id(t)) for p, t in after] == [(p, id(t)) for p, t, _ in before]  # nothing rebound
    assert all(torch.equal(t, value) for _, t, value in before)  # nothing written in place
    assert_same_state(fingerprint, state_fingerprint(model))


@pytest.mark.parametrize("method", ["auto", "eager"])
def test_the_cache_tensors_are_named_inputs_of_the_step(method):
    # (the eager tier runs the model on a fresh cache object around the same tensors: the
    # one it was given, grown by the run, would hold the step's output instead)
    model = llama().eval()
    report = analyzed(model, decode_inputs(model, B, 16), memory=True, method=method)
    # the token ids (2 * 8 B) and the positions (2 * 8 B) are resident inputs; the 4 cache
    # tensors of B 2 * 2 heads * 16 tokens * 16 * 4 B = 4096 B are the step's from its start
    # (the step replaces them: fxinspect.run.memory.donated), not resident
    assert report.memory.inputs == 16 + 16
    assert [bytes_alive for _, bytes_alive in report.memory.timeline[1:5]] == [4096, 8192, 12288, 16384]
    placeholders = [n.name for n in report.nodes if n.op == "placeholder"]
    assert [n for n in placeholders if n.startswith("cache_")] == [
        f"cache_layers_{i}_{kind}" for i in range(2) for kind in ("keys", "values")
    ]


def owned_step_peak(model, step):
    """The allocator's peak over a decode step whose cache object is the only holder of its
    tensors, as in generate(): fresh clones of them, made inside the watch (the CPU profiler
    sees no free of memory allocated before it started)."""
    watch = AllocatorWatch(torch.device("cpu"))
    with torch.no_grad(), watch:
        with held_states((), step) as (_, owned):  # (a copy of the cache around clones of its tensors)
            model(**owned)
            del owned
    return watch.peak


@pytest.mark.parametrize("context", [16, 64])
@pytest.mark.parametrize("cache", ["dynamic", "static"])
@pytest.mark.parametrize("name", ["llama", "qwen2_moe"])
def test_the_decode_step_memory_is_the_allocators_on_a_step_that_owns_its_cache(name, cache, context):
    # as in generate(), the cache object is the only holder of its tensors: a DynamicCache's
    # torch.cat drops each old layer as it grows it, a StaticCache is written in place.
    # Qwen2-MoE's experts run torch's grouped matmul in float32 on CPU, as its call does
    # (not the branch kept for compilers: there decode attention copies the cache per head)
    torch.manual_seed(0)
    model = FAMILIES[name]().eval()
    step = decode_inputs(model, B, context, cache=cache)
    m = analyzed(model, step, memory=True).memory
    cached = sum(t.untyped_storage().nbytes() for _, t in state_tensors(step["cache"]))
    if cache == "dynamic":  # keys and values of 2 layers: 4 * B 2 * 2 heads * context * 16 * 4 B
        assert cached == 4 * B * 2 * context * HEAD_DIM * 4
    assert m.peak == owned_step_peak(model, step)
    states = [t for t in m.alive_at_peak if t.role is TensorRole.STATE]
    if cache == "static":  # written in place and returned: the whole cache lives through the step
        assert sum(t.nbytes for t in states) == cached
    if cache == "dynamic":  # each old layer is freed as the step replaces it: never both caches whole
        assert m.peak < cached + 4 * B * 2 * (context + 1) * HEAD_DIM * 4


# --- prefill_inputs ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llama", "t5"])
def test_prefill_is_the_first_call_of_generation_and_fills_no_cache_of_the_caller(name):
    torch.manual_seed(0)
    model = FAMILIES[name]().eval()
    inputs = prefill_inputs(model, B, 12)
    key = "decoder_input_ids" if name == "t5" else "input_ids"
    assert inputs[key].shape == ((B, 1) if name == "t5" else (B, 12))
    if name == "t5":
        assert inputs["input_ids"].shape == (B, 12)  # the source: the encoder runs in this call
    report = analyzed(model, inputs)
    assert 2 * report.totals.macs == reference_flops(model, inputs)
    assert state_tensors(inputs["cache"]) == []  # still empty: analysis filled a copy
