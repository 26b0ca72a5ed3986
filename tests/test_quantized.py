"""Models quantized with torchao's ``quantize_``: bytes as stored, the matmuls counted.

One MLP, ``Linear(256, 256) -> ReLU -> Linear(256, 128)`` on a ``(4, 256)`` input, under
each weight configuration torchao 0.18 runs on a CPU. ``Int4WeightOnlyConfig`` runs on
none of its layouts here (``plain`` needs the mslk kernels, ``plain_int32`` XPU,
``tile_packed_to_4d`` CUDA), nor ``Float8DynamicActivationFloat8WeightConfig`` (CUDA
capability 8.9): int4 is ``PrototypeInt4WeightOnlyConfig`` (``Int4OpaqueTensor``, the
CPU's tinygemm layout, ``_weight_int4pack_mm_for_cpu``), and ``IntxWeightOnlyConfig``
with ``torch.int4`` (values kept one per int8) beside it.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import fxinspect
from fxinspect.guard import ModelChangedError

torchao = pytest.importorskip("torchao", reason="quantized weights need torchao: pip install fxinspect[quant]")
from torchao import quantization as Q  # noqa: E402
from torchao.prototype.quantization.int4 import PrototypeInt4WeightOnlyConfig  # noqa: E402
from torchao.quantization import quantize_  # noqa: E402

M, K, N1, N2 = 4, 256, 256, 128
F32, BF16 = 4, 2

# Bytes as stored, per layer: (fc1 weight, fc2 weight), and the biases (f32: (256 + 128) * 4
# = 1,536; bf16: 768). Per-row int8 (Int8Tensor, IntxUnpackedToInt8Tensor): N * K int8
# values, N float32 scales, N int8 zero points: 65,536 + 1,024 + 256 = 66,816 and
# 32,768 + 512 + 128 = 33,408. float8: N * K float8 values and N float32 scales: 65,536 +
# 1,024 = 66,560 and 32,768 + 512 = 33,280. int4, groups of 32: two values a byte, N * K / 2
# uint8, and a bf16 scale and zero per group and row, (K / 32) * N * 2 * 2 B: 32,768 + 8,192
# = 40,960 and 16,384 + 4,096 = 20,480.
INT8_WEIGHTS = (65536 + 1024 + 256) + (32768 + 512 + 128)
CONFIGS = {
    # name: (config, dtype, stored parameter bytes, the matmul kernel, what FlopCounterMode counts)
    "int8_weight_only": (Q.Int8WeightOnlyConfig, torch.float32, INT8_WEIGHTS + 1536, "aten.mm.default", True),
    "int8_dynamic_int8_weight": (
        Q.Int8DynamicActivationInt8WeightConfig,
        torch.float32,
        INT8_WEIGHTS + 1536,
        "aten._int_mm.default",
        False,  # (FlopCounterMode has no formula for _int_mm)
    ),
    "float8_weight_only": (
        Q.Float8WeightOnlyConfig,
        torch.float32,
        (65536 + 1024) + (32768 + 512) + 1536,
        "aten.mm.default",
        True,
    ),
    "int4_weight_only_cpu": (
        lambda: PrototypeInt4WeightOnlyConfig(group_size=32),
        torch.bfloat16,
        (32768 + 8192) + (16384 + 4096) + 768,
        "aten._weight_int4pack_mm_for_cpu.default",
        False,  # (nor for the packed int4 kernels)
    ),
    "intx_int4_weight_only": (
        lambda: Q.IntxWeightOnlyConfig(weight_dtype=torch.int4),
        torch.float32,
        INT8_WEIGHTS + 1536,  # int4 values unpacked, one per int8: as many bytes as int8
        "aten.addmm.default",
        True,
    ),
}
# fc1's matmul kernel, its bytes (read, written): the dense copy when the weight is
# dequantised first, the packed weight when the kernel reads it.
KERNEL_BYTES = {
    "int8_weight_only": (K * N1 * F32 + M * K * F32, M * N1 * F32),  # dense f32 copy 262,144 + x 4,096
    "int8_dynamic_int8_weight": (K * N1 + M * K, M * N1 * 4),  # int8 weight 65,536 + int8 x 1,024; int32 out
    "float8_weight_only": (K * N1 * F32 + M * K * F32, M * N1 * F32),
    "int4_weight_only_cpu": (M * K * BF16 + 32768 + 8192, M * N1 * BF16),  # x 2,048 + packed 40,960
    "intx_int4_weight_only": (K * N1 * F32 + M * K * F32 + N1 * F32, M * N1 * F32),  # + the bias addmm reads
}
# where the weight is dequantised first, fc1's casts to f32 (bytes read, written): its
# 65,536 int8/float8 values -> 262,144 B; intx casts its 256 int8 zero points too (-> 1,024 B)
DEQUANTISED = {
    "int8_weight_only": (K * N1, K * N1 * F32),
    "float8_weight_only": (K * N1, K * N1 * F32),
    "intx_int4_weight_only": (K * N1 + N1, (K * N1 + N1) * F32),
}


def _quantized(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    config, dtype, *_ = CONFIGS[name]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(K, N1), torch.nn.ReLU(), torch.nn.Linear(K, N2)).to(dtype).eval()
    quantize_(model, config())
    return model, torch.randn(M, K, dtype=dtype)


def _analyze(model, x, **options):
    with torch.no_grad():
        return fxinspect.analyze(model, x, timing=False, **options)


def _fc1(report):
    return next(n for n in report.nodes if n.module_path == "0")


@pytest.mark.parametrize("name", CONFIGS)
def test_parameters_counted_as_stored(name):
    model, x = _quantized(name)
    expected = CONFIGS[name][2]
    report = _analyze(model, x)
    assert report.totals.param_bytes == report.memory.params == expected
    # the logical count stays the number of weights: 256 * 256 + 256 + 256 * 128 + 128
    assert report.totals.params == 98688


@pytest.mark.parametrize("name", CONFIGS)
def test_quantized_matmuls_counted_as_the_dense_product(name):
    model, x = _quantized(name)
    _, _, _, kernel, flop_counter_counts = CONFIGS[name]
    report = _analyze(model, x, backward=False)
    assert report.uncounted == ()
    # MACs come from the matmuls alone: 4 * 256 * 256 + 4 * 256 * 128 = 393,216
    assert report.totals.macs == M * K * N1 + M * K * N2 == 393216
    (call,) = [c for c in _fc1(report).aten if c.op == kernel]
    assert (call.macs, call.flops - 2 * call.macs) == (M * K * N1, N1 * M if kernel == "aten.addmm.default" else 0)
    assert (call.bytes_read, call.bytes_written) == KERNEL_BYTES[name]
    if name in DEQUANTISED:  # the dequantisation, its own ops: reads the stored values, writes the dense copy
        copy = next(c for c in _fc1(report).aten if c.op == "aten._to_copy.default")
        assert (copy.bytes_read, copy.bytes_written) == DEQUANTISED[name]
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    # FlopCounterMode counts the dense mm after a dequantisation, nothing for _int_mm or
    # the packed int4 kernel: 2 * 393,216 = 786,432 or 0
    assert counter.get_total_flops() == (2 * report.totals.macs if flop_counter_counts else 0)


@pytest.mark.parametrize("name", CONFIGS)
def test_meta_equals_cpu(name):
    model, x = _quantized(name)
    real, meta = _analyze(model, x), _analyze(model, x, device="meta")
    assert meta.environment.virtual and not real.environment.virtual
    assert meta.totals.param_bytes == real.totals.param_bytes == CONFIGS[name][2]
    for figure in ("flops", "macs", "bytes_read", "bytes_written"):
        assert getattr(meta.totals, figure) == getattr(real.totals, figure), figure
    assert [n.aten for n in meta.nodes if n.is_op] == [n.aten for n in real.nodes if n.is_op]
    assert (meta.memory.params, meta.memory.peak) == (real.memory.params, real.memory.peak)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the allocator figures here are the CPU's")
@pytest.mark.parametrize("name", CONFIGS)
def test_memory_estimate_against_the_allocator(name):
    model, x = _quantized(name)
    memory = _analyze(model, x, measure_memory=True).memory
    assert memory.measured_by == "torch.profiler"
    assert memory.measured_peak == pytest.approx(memory.peak, rel=0.02)
    if name == "int8_weight_only":  # at fc1: its dense f32 weight 256 * 256 * 4 + its output 4 * 256 * 4
        assert memory.peak == 262144 + 4096


def test_a_quantized_embedding_runs_its_dequantisation_and_is_counted_so():
    # Int8Tensor's embedding is a dispatch-level op: it dequantises the whole table
    # (torchao::dequantize_affine), then gathers from the dense copy
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(1000, 64), torch.nn.Linear(64, 64)).eval()
    quantize_(
        model, Q.Int8WeightOnlyConfig(), filter_fn=lambda m, _: isinstance(m, (torch.nn.Embedding, torch.nn.Linear))
    )
    ids = torch.randint(0, 1000, (4, 8))
    real, meta = _analyze(model, ids, measure_memory=True), _analyze(model, ids, device="meta")
    assert real.uncounted == meta.uncounted == ()
    (dequant,) = [c for n in real.nodes for c in n.aten if c.op == "torchao.dequantize_affine.default"]
    # (q - zero point) * scale over 1000 * 64 = 64,000 values: 128,000 flops; reads the
    # 64,000 int8 values, 1,000 float32 scales and 1,000 int8 zero points; writes 256,000 B
    assert (dequant.flops, dequant.bytes_read, dequant.bytes_written) == (128000, 69000, 256000)
    (gather,) = [c for n in real.nodes for c in n.aten if c.op == "aten.embedding.default"]
    assert gather.bytes_written == 4 * 8 * 64 * F32  # 32 rows of the dense copy
    # the op holds two dense temporaries inside (probed as kernel scratch); the allocator agrees
    assert real.memory.measured_peak == pytest.approx(real.memory.peak, rel=0.02)
    assert meta.memory.peak == real.memory.peak and meta.totals.flops == real.totals.flops


def _fingerprint(model):
    """Per parameter: its class, and its inner tensors' (or its own) ids, versions and values."""
    inner = lambda p: [getattr(p, n) for n in p.__tensor_flatten__()[0]] if type(p) is not torch.nn.Parameter else [p]  # noqa: E731
    return [(name, type(p), [(id(t), t._version, t.clone()) for t in inner(p)]) for name, p in model.named_parameters()]


@pytest.mark.parametrize("options", [{}, {"device": "meta"}, {"measure_memory": True}])
def test_quantized_model_unchanged(options):
    model, x = _quantized("int8_weight_only")
    before = _fingerprint(model)
    _analyze(model, x, **options)
    after = _fingerprint(model)
    assert [(n, c, [(i, v) for i, v, _ in ts]) for n, c, ts in before] == [
        (n, c, [(i, v) for i, v, _ in ts]) for n, c, ts in after
    ]
    for (_, _, old), (_, _, new) in zip(before, after):
        assert all(torch.equal(a, b) for (_, _, a), (_, _, b) in zip(old, new))


def test_a_forward_writing_its_quantized_weight_is_reported():
    model, x = _quantized("int8_weight_only")

    class Writes(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, x):
            self.inner[0].weight.qdata.add_(1)  # the int8 values, under an unchanged wrapper
            return self.inner(x)

    with pytest.raises(ModelChangedError, match=r"inner\.0\.weight"):
        _analyze(Writes(), x)


@pytest.mark.parametrize("nbits", [4, 2])
def test_quanto_kv_cache_bytes_as_stored(nbits):
    pytest.importorskip("optimum.quanto", reason="transformers' int-bit QuantizedCache needs optimum-quanto")
    transformers = pytest.importorskip("transformers")
    from generation_zoo import families

    from fxinspect.serving.kv_cache import cache_bytes

    torch.manual_seed(0)
    model = next(f for f in families() if f.name == "llama").build().eval()  # 2 layers, 2 kv heads, head_dim 16
    cache = transformers.QuantizedCache("quanto", model.config, nbits=nbits, residual_length=2, q_group_size=16)
    ids = torch.randint(2, 128, (2, 12))
    model.generate(input_ids=ids, max_new_tokens=4, min_new_tokens=4, do_sample=False, past_key_values=cache)
    # 15 tokens cached per layer: 14 quantized, the last 1 kept in float32 (the residual).
    # Quantized, per layer and kind: batch 2 * 2 heads * 14 tokens * 16 = 896 values at nbits
    # (896 * nbits / 8 B) and a float32 scale and shift per group of 16 (56 * 2 * 4 = 448 B);
    # the residual 2 * 2 * 1 * 16 * 4 = 256 B. Times 2 layers * 2 kinds.
    per_kind_layer = 896 * nbits // 8 + 448 + 256
    counted = cache_bytes(cache)
    assert counted.total == 2 * 2 * per_kind_layer  # nbits 4: 4,608 B; 2: 3,712 B
    assert counted.by_kind == {"key": 2 * per_kind_layer, "value": 2 * per_kind_layer}
