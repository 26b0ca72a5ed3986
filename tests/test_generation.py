"""fxinspect.generation: exact decode costs at unseen sizes, the KV cache and the peak of a real generate().

The truths: analyses of decode steps at sizes the curves were not fitted from, the cache a
real ``generate()`` leaves, and the allocator over a real ``generate()`` on CPU.
"""

from __future__ import annotations

import pytest
import torch
from generation_zoo import families
from reference import assert_same_state, state_fingerprint

import fxinspect
from fxinspect.run.memory.allocator import AllocatorWatch
from fxinspect.serving.inputs import _tokens
from fxinspect.serving.kv_cache import cache_bytes

FAMILIES = {f.name: f for f in families("all")}
FAST = ["llama", "gemma2"]  # grouped-query; local/global layers with a sliding window
SLOW = [f.name for f in families("build") if f.name not in FAST]
HELD_OUT = [f.name for f in families("held_out") if f.kind != "encoder-decoder"]
UNSEEN = [(5, 100), (3, 33), (1, 257)]  # (batch, context): never analysed for a fit (contexts <= 45 are)


def model_of(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return FAMILIES[name].build().eval()


def analysed_step(gen, batch: int, context: int):
    """A decode step analysed on its own, outside the generation's curves."""
    with torch.no_grad():
        return fxinspect.analyze(gen.model, fxinspect.decode_inputs(gen.model, batch, context), timing=False)


def check_exact_at_unseen_sizes(name: str) -> None:
    gen = fxinspect.generation(model_of(name), batch=4, prompt=40, new_tokens=20)
    for batch, context in UNSEEN:
        cost, step = gen.cost(context, batch), analysed_step(gen, batch, context)
        assert (cost.flops, cost.macs, cost.bytes) == (step.totals.flops, step.totals.macs, step.totals.bytes_moved)
        assert cost.peak == step.memory.total_peak
    assert len({(b, c) for b, c in gen._steps}) <= 7  # 6 fitted steps (and the last one's own, for the peak)


@pytest.mark.parametrize("name", FAST)
def test_decode_costs_are_exact_at_sizes_never_analysed(name):
    check_exact_at_unseen_sizes(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW + HELD_OUT)
def test_decode_costs_are_exact_at_sizes_never_analysed_on_every_family(name):
    check_exact_at_unseen_sizes(name)


def test_a_windowed_model_is_fitted_on_each_side_of_its_window():
    # Mistral, window 8: a decode step's FLOPs grow with the context below the window
    # (512 a token: the scores and the weighted sum of 2 layers, 4 heads of 16, 2 * 2*16*4 *2)
    # and stop growing past it, where transformers' attention takes another path
    gen = fxinspect.generation(model_of("mistral"), batch=1, prompt=3, new_tokens=40)
    assert gen.segments.ranges == [(1, 5), (10, None)]
    assert gen.cost(4).flops - gen.cost(3).flops == 512
    assert gen.cost(40).flops == gen.cost(30).flops == analysed_step(gen, 1, 35).totals.flops
    assert gen.cost(7).flops == analysed_step(gen, 1, 7).totals.flops  # next to the window: analysed itself


@pytest.mark.parametrize("name", ["llama", "gemma2"])
def test_kv_bytes_equal_the_cache_of_a_real_generate(name):
    model = model_of(name)
    batch, prompt, new = 2, 12, 9
    gen = fxinspect.generation(model, batch=batch, prompt=prompt, new_tokens=new)
    with torch.no_grad():
        out = model.generate(
            _tokens(model, batch, prompt, torch.device("cpu")),
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            return_dict_in_generate=True,
        )
    cache = getattr(out, "cache", None) or out.past_key_values
    assert gen.kv_bytes(prompt + new - 1) == cache_bytes(cache).total  # the cache holds prompt + new - 1 tokens
    if name == "llama":  # 2 layers * (k, v) * 2 kv heads * 16 dims * 4 B = 512 B a token
        assert gen.kv_bytes_per_token == 512


def real_generate_growth(model, batch: int, prompt: int, new: int) -> int:
    """The allocator's peak growth over a real greedy generate() on CPU."""
    ids = _tokens(model, batch, prompt, torch.device("cpu"))
    watch = AllocatorWatch(torch.device("cpu"))
    with torch.no_grad(), watch:
        model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new, do_sample=False
        )
    return watch.peak


@pytest.mark.parametrize(("name", "batch", "prompt", "new", "phase"), [
    ("llama", 3, 24, 12, "prefill"),   # a long prompt: the prefill's activations hold the peak
    ("gemma2", 2, 4, 60, "decode"),    # a long generation: the last step's cache holds it
])  # fmt: skip
def test_the_peak_is_the_allocators_over_a_real_generate(name, batch, prompt, new, phase):
    model = model_of(name)
    memory = fxinspect.generation(model, batch=batch, prompt=prompt, new_tokens=new, device=None).memory
    assert memory.phase == phase
    assert memory.peak == memory.weights + memory.kv_cache + memory.activations + memory.loop
    # the allocator counts what the call allocates: the weights were there before it
    growth = real_generate_growth(model, batch, prompt, new)
    assert abs((memory.peak - memory.weights) / growth - 1) < 0.01  # measured: 0.02-0.1 % (generate()'s flags)


def test_what_is_said_to_fit_fits():
    model = model_of("llama")
    gen = fxinspect.generation(model, batch=2, prompt=4, new_tokens=60, device=None)
    budget = gen.memory.peak + 100  # just above this generation's own peak
    assert gen.max_batch(budget) == 2
    assert gen.max_batch(budget + 200_000) > 2
    fitting = gen.max_batch(budget + 200_000)
    estimated = fxinspect.generation(model, batch=fitting, prompt=4, new_tokens=60, device=None).peak
    assert estimated <= budget + 200_000 < fxinspect.generation(model, batch=fitting + 1, prompt=4, new_tokens=60).peak
    assert gen.memory.weights + real_generate_growth(model, fitting, 4, 60) <= budget + 200_000
    # the longest context at batch 2 under the same budget is this generation's last (62 + 1 tokens cached)
    assert gen.max_context(budget) >= gen.final_context + 1


@pytest.mark.parametrize("name", ["mistral", "mamba"])
def test_a_cache_that_stops_growing_reaches_the_models_own_limit(name):
    # every layer of the tiny Mistral slides over 8 tokens; Mamba keeps a fixed state: past the
    # window the memory stops growing, so it bounds no context (the search once ran forever)
    gen = fxinspect.generation(model_of(name), batch=2, prompt=16, new_tokens=8)
    assert gen.kv_bytes(64) == gen.kv_bytes(4096)
    limit = getattr(gen.model.config, "max_position_embeddings", None)
    # the model's positions: MistralConfig's default 131,072 (4096 * 32); Mamba states none: 2**31
    assert gen.max_context("1GiB") == (131_072 if name == "mistral" else 2**31) == (limit or 2**31)
    assert gen.max_context(gen.prefill_peak(2) - 1) == 0


# a calibrated spec: each kernel class at its own share of the roofs (pricing per class, not the roofline)
_CALIBRATED = fxinspect.devices.DeviceSpec(
    "calibrated toy",
    {"float32": 1e11},
    1e10,
    launch_overhead=2e-6,
    efficiency={"gemm": [(1.0, 0.05), (100.0, 0.6)], "elementwise": [(1e2, 0.02), (1e5, 0.8)], "bmm": [(1.0, 0.3)]},
)


@pytest.mark.parametrize("spec", ["h100-sxm", _CALIBRATED], ids=["preset", "calibrated"])
def test_ttft_and_tpot_are_the_steps_predicted_times(spec):
    gen = fxinspect.generation(model_of("llama"), batch=2, prompt=10, new_tokens=5, device_spec=spec)
    assert gen.ttft == gen.prefill.totals.predicted_latency
    # contexts 10..prompt+new-2, each step analysed whole and priced on the same spec
    steps = [analysed_step_on(gen, c, spec).totals.predicted_latency for c in range(10, 14)]
    assert gen.tpot == pytest.approx(sum(steps) / len(steps), rel=1e-12)
    assert gen.tokens_per_second == pytest.approx(2 * 5 / (gen.ttft + 4 * gen.tpot), rel=1e-12)
    untimed = fxinspect.generation(model_of("llama"), batch=2, prompt=10, new_tokens=5)
    assert (untimed.ttft, untimed.tpot, untimed.tokens_per_second) == (None, None, None)


def analysed_step_on(gen, context: int, spec="h100-sxm"):
    with torch.no_grad():
        inputs = fxinspect.decode_inputs(gen.model, gen.batch, context)
        return fxinspect.analyze(gen.model, inputs, timing=False, device_spec=spec)


def test_the_model_is_left_as_it_was():
    model = model_of("llama")
    before = state_fingerprint(model)
    gen = fxinspect.generation(model, batch=2, prompt=6, new_tokens=4, device=None)
    gen.table()
    assert_same_state(before, state_fingerprint(model))


@pytest.mark.parametrize(("name", "device", "said"), [
    ("deepseek_v3", "meta", "top-k experts (transformers' batched_mm)"),  # no values on meta: each token's top-k
    ("deepseek_v3", None, "own experts are analysed (transformers' grouped_mm)"),  # what its generate() runs
    ("llama", None, None),  # no experts: nothing said
])  # fmt: skip
def test_the_notes_say_which_experts_a_mixture_of_experts_is_analysed_with(name, device, said):
    model = model_of(name)
    gen = fxinspect.generation(model, batch=1, prompt=4, new_tokens=2, device=device)
    experts = [note for note in gen.notes if "mixture of experts" in note]
    if said is None:
        assert experts == []
    else:
        assert len(experts) == 1 and said in experts[0]
    assert model.config._experts_implementation == ("grouped_mm" if said else "eager")  # the user's, as it was


def test_bad_arguments_say_what_was_expected():
    with pytest.raises(fxinspect.InputError, match="batch, prompt and new_tokens >= 1"):
        fxinspect.generation(model_of("llama"), batch=0)
    with pytest.raises(fxinspect.InputError, match="Hugging Face generative model"):
        fxinspect.generation(torch.nn.Linear(2, 2), batch=1, prompt=2, new_tokens=2)


_BY_KIND = fxinspect.devices.DeviceSpec(
    "calibrated by kind",
    {"float32": 1e11},
    1e10,
    launch_overhead=2e-6,
    efficiency={"conv": [(1.0, 1.0)], "conv.depthwise": [(1.0, 0.001)]},
)


def test_a_decode_step_s_depthwise_convolution_is_priced_on_its_kind_s_curve():
    # Mamba's decode step runs a depthwise conv1d over its cached window: the step's time
    # curves keep its kind, so TPOT is the analysed steps' (priced on "conv.depthwise")
    gen = fxinspect.generation(model_of("mamba"), batch=2, prompt=10, new_tokens=5, device_spec=_BY_KIND)
    steps = [analysed_step_on(gen, c, _BY_KIND) for c in range(10, 14)]
    kinds = {c.kind for s in steps for n in s.nodes for c in n.aten if "convolution" in c.op}
    assert kinds == {"depthwise"}
    assert gen.tpot == pytest.approx(sum(s.totals.predicted_latency for s in steps) / len(steps), rel=1e-12)
    # at its class's efficiency (1.0, not 0.001) the same steps take far less: the kind was used
    plain = fxinspect.devices.DeviceSpec(
        "by class", {"float32": 1e11}, 1e10, launch_overhead=2e-6, efficiency={"conv": [(1.0, 1.0)]}
    )
    assert gen.tpot > 2 * analysed_step_on(gen, 12, plain).totals.predicted_latency
