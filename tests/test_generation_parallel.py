"""Generation per rank under tensor parallelism: ``generation(..., parallel=Parallel.tp(n))``.

The tiny Llama of ``generation_zoo`` (hidden 64, 2 layers, 4 query heads and 2 key/value
heads of 16, intermediate 128, vocabulary 128, float32) on 2 ranks with its own
transformers plan: q, k, v, gate, up column-wise, o and down row-wise, the embedding's
vocabulary split, the head's columns split and its logits gathered. Figures are checked
by hand, against the single-device analysis of the same step (each rank computes half of
every projection), and against a real 2-process gloo run (marked ``distributed``).
"""

from __future__ import annotations

import collections

import pytest
import torch
from generation_zoo import families

import fxinspect
from fxinspect.errors import InputError
from fxinspect.parallel.plans import model_tp_plan
from fxinspect.serving.inputs import decode_inputs
from fxinspect.serving.kv_cache import cache_bytes

transformers = pytest.importorskip("transformers")

B = 2


def _build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return next(f for f in families("build") if f.name == name).build()


def _cache(inputs: dict) -> object:
    return inputs.get("cache", inputs.get("past_key_values"))


def test_the_models_own_plan_is_translated_to_torchs_styles():
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan = model_tp_plan(_build("llama"), 2)
    kinds = {k: type(v).__name__ for k, v in plan.items()}
    assert kinds == {
        "lm_head": "ColwiseParallel",
        "model.embed_tokens": "RowwiseParallel",
        **{f"model.layers.*.self_attn.{p}_proj": "ColwiseParallel" for p in "qkv"},
        "model.layers.*.self_attn.o_proj": "RowwiseParallel",
        "model.layers.*.mlp.gate_proj": "ColwiseParallel",
        "model.layers.*.mlp.up_proj": "ColwiseParallel",
        "model.layers.*.mlp.down_proj": "RowwiseParallel",
    }
    # "colwise_gather_output": the logits gathered; "embedding_rowwise": the token ids replicated
    assert isinstance(plan["lm_head"], ColwiseParallel) and plan["lm_head"].output_layouts == (Replicate(),)
    assert isinstance(plan["model.embed_tokens"], RowwiseParallel)
    assert plan["model.embed_tokens"].input_layouts == (Replicate(),)


@pytest.mark.parametrize(
    ("name", "world", "said"),
    [
        ("llama", 4, "num_key_value_heads=2 does not divide"),  # 2 key/value heads over 4 ranks: half a head each
        ("llama", 3, "num_attention_heads=4 does not divide"),
        ("mixtral", 2, "'moe_tp_experts' (model.layers.*.mlp.experts)"),  # no torch style for the experts
    ],
)
def test_a_plan_that_cannot_shard_the_model_is_refused_by_name(name, world, said):
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        model_tp_plan(_build(name), world)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        # floats per rank: embedding 128 / 2 * 64 and head 64 * 128 / 2 (4096 each), final norm 64;
        # per layer (q 64*64 + k 64*32 + v 64*32 + o 64*64 + gate, up, down 3 * 64*128) / 2 = 18432
        # and its 2 norms 128: 4096 * 2 + 64 + 2 * 18560 = 45376 floats = 181504 B
        ("llama", 181_504),
        ("qwen2", 181_504 + 512),  # and the q, k, v biases (64 + 32 + 32) / 2 per layer: 2 * 64 * 4 B
    ],
)
def test_a_rank_holds_its_share_of_the_weights_and_of_the_key_value_heads(name, params):
    model = _build(name)
    spec = fxinspect.Parallel.tp(2)
    gen = fxinspect.generation(model, batch=B, prompt=16, new_tokens=4, parallel=spec)
    assert gen.prefill.memory.params == params
    # (the rotary embedding's inv_freq and original_inv_freq buffers, 8 floats each, on every rank)
    assert gen.weights_bytes == params + 64
    # one key/value head of 16 per rank: 2 layers * (key, value) * 16 * 4 B = 256 B per token,
    # half the single device's 512
    full, rank = (
        [cache_bytes(_cache(decode_inputs(model, 1, c, device="meta", parallel=p))).total for c in (16, 17)]
        for p in (None, spec)
    )
    assert (rank[1] - rank[0], full[1] - full[0]) == (256, 512)
    assert rank[0] == 16 * 256  # (a DynamicCache holds only keys and values)


@pytest.mark.parametrize("world", [1, 8])
def test_a_ranks_kv_bytes_per_token_is_the_single_devices_over_the_ranks_sharing_the_heads(world):
    """Llama-2-70B's shape of attention in small: 8 key/value heads (of 8 query heads), each
    rank caching 8 / world of them, as Llama-2-70B's 8 over 8 H100s cache one each."""
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=8
    )
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    spec = fxinspect.Parallel.tp(world) if world > 1 else None
    gen = fxinspect.generation(model, batch=2, prompt=8, new_tokens=2, dtype=torch.bfloat16, parallel=spec)
    # 2 layers * (key + value) * (8 / world) heads * head_dim 64 / 8 = 8 * 2 B: 512 B on one device
    assert gen.kv_bytes_per_token == 2 * 2 * (8 // world) * 8 * 2 == 512 // world


def test_under_tensor_parallelism_the_curves_are_exact_at_steps_never_analysed_and_batch_1_is_its_own():
    """At batch 1 a rank's step is another graph (DTensor gathers the head's logits, split
    along their last dim, by a view; from batch 2 by a split and a cat): the curves are fitted
    from batch 2 and match analyses they were not fitted from; batch 1 is analysed."""
    spec = fxinspect.Parallel.tp(2)
    gen = fxinspect.generation(_build("llama"), batch=B, prompt=16, new_tokens=4, parallel=spec)
    names = ("flops", "macs", "bytes", "peak", "resident", "kv")
    assert all(gen.curves[n].verified for n in names), {n: gen.curves[n].why for n in names}
    analysed = set(gen._steps)
    for b, c in ((5, 40), (1, 30)):
        assert (b, c) not in analysed
        with torch.no_grad():  # (as generate() runs the step)
            inputs = decode_inputs(gen.model, b, c, device="meta", parallel=spec)
            truth = fxinspect.analyze(gen.model, inputs, device="meta", parallel=spec, timing=False)
        cost = gen.cost(c, batch=b)
        assert (cost.flops, cost.bytes) == (truth.totals.flops, truth.totals.bytes_moved), (b, c)
        assert gen.decode_peak(b, c) == truth.memory.total_peak, (b, c)
    # batch 1's gather is a view: the curve (from batch 2) would count the cat that joins the
    # gathered halves, reading and writing the (1, 1, 128) float32 logits: 2 * 128 * 4 B more
    assert gen.curves["bytes"](1, 30) - gen.cost(30, batch=1).bytes == 2 * 128 * 4


def test_a_decode_step_is_one_ranks_share_and_all_reduces_after_each_row_parallel_layer():
    model = _build("llama")
    inputs = {p: decode_inputs(model, B, 16, device="meta", parallel=p) for p in (None, fxinspect.Parallel.tp(2))}
    single = fxinspect.analyze(model, inputs[None], device="meta")
    rank = fxinspect.analyze(model, inputs[max(inputs, key=bool)], device="meta", parallel=max(inputs, key=bool))
    # the cache given is the step's own: 16 tokens cached, so the keys it grows hold 17, one head of 16
    grown = [n.outputs[0].shape for n in rank.nodes if n.target.endswith("aten.cat.default")]
    assert grown.count((B, 1, 17, 16)) == 4  # keys and values of 2 layers
    # each projection and the head: exactly half the single device's FLOPs (columns or rows split)
    by_module = collections.defaultdict(lambda: [0, 0])
    for i, report in enumerate((single, rank)):
        for n in report.nodes:
            if n.module_type == "Linear":
                by_module[n.module_path][i] += n.flops
    assert len(by_module) == 15 and all(s == 2 * r > 0 for s, r in by_module.values())  # 7 per layer, the head
    # the embedding's and each o_proj's and down_proj's partial sums all-reduced: B * 64 floats;
    # the head's logits gathered: B * 128 floats
    said = collections.Counter(
        (c.module_path, c.kind, c.tensor_bytes, c.group_size) for c in rank.communication.collectives
    )
    assert said == collections.Counter(
        [("model.embed_tokens", "all_reduce", B * 64 * 4, 2)]
        + [
            (f"model.layers.{i}.{m}", "all_reduce", B * 64 * 4, 2)
            for i in range(2)
            for m in ("self_attn.o_proj", "mlp.down_proj")
        ]
        + [("lm_head", "all_gather", B * 128 * 4, 2)]
    )


def test_a_plan_of_the_users_that_splits_a_head_fails_as_the_model_does_and_says_where():
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    # 2 key/value heads of 16 over 4 ranks: k_proj's 32 columns give 8 per rank, half a head
    plan = {f"model.layers.*.self_attn.{p}_proj": ColwiseParallel() for p in "qkv"}
    plan["model.layers.*.self_attn.o_proj"] = RowwiseParallel()
    with pytest.raises(RuntimeError, match="invalid for input of size") as raised:
        decode_inputs(_build("llama"), B, 4, device="meta", parallel=fxinspect.Parallel.tp(4, plan))
    assert (
        "fxinspect: raised while the model parallelised as rank 0 of 4 filled its cache" in raised.value.__notes__[-1]
    )


def test_decode_inputs_for_a_rank_need_the_meta_device():
    with pytest.raises(InputError, match="builds one rank's cache on the meta device"):
        decode_inputs(_build("llama"), B, 4, parallel=fxinspect.Parallel.tp(2))


@pytest.mark.distributed
@pytest.mark.parametrize(
    ("cache", "kv"),
    [
        (None, 8192),  # a DynamicCache: keys and values of 2 layers, 4 * B 2 * 1 head * 16 tokens * 16 * 4 B
        ("static", 8720),  # a StaticCache of 17 tokens: 4 * 2 * 1 * 17 * 16 * 4 B, and 2 int64 per layer
    ],
)
def test_each_ranks_cache_collectives_and_decode_peak_match_a_real_gloo_run(cache, kv):
    from distributed_decode import real_decode_ranks, tiny_llama

    real = real_decode_ranks(2, B, 16, cache)
    model = tiny_llama()
    for measured in real:
        spec = fxinspect.Parallel.tp(2, rank=measured["rank"])
        inputs = decode_inputs(model, B, 16, device="meta", cache=cache, parallel=spec)
        assert cache_bytes(_cache(inputs)).total == measured["kv"] == kv
        with torch.no_grad():  # (as generate() runs it)
            report = fxinspect.analyze(model, inputs, device="meta", parallel=spec)
        ours = collections.Counter((c.kind, c.tensor_bytes, c.group_size) for c in report.communication.collectives)
        assert ours == collections.Counter(tuple(c) for c in measured["collectives"])
        # the step's peak above the resident weights, the step owning its cache (as in generate()):
        # with the DynamicCache equal to the byte (13,056 B; once 512 B under on rank 1: gloo held
        # a buffer a while longer); with the StaticCache 512 B over on both ranks (13,072 B against
        # 12,560 B), one (B, 1, 64) float tensor more alive at the peak than the allocator saw,
        # not yet explained (the single-device static step is equal: test_generation_inputs.py)
        assert abs(measured["peak"] - report.memory.peak) <= B * 64 * 4, measured["rank"]
