"""Virtual runs: models on the meta device, or ``device="meta"``, analysed without
allocating their weights. Shapes, parameters, FLOPs, MACs and bytes are exact; timing,
NaN/Inf counts and value statistics are unavailable (``None``, never zero)."""

from __future__ import annotations

import re

import pytest
import torch
import torchvision
from reference import assert_same_state, state_fingerprint, unique_param_count
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

import fxinspect
from fxinspect.errors import InputError
from fxinspect.run.virtual import fake_copy, is_virtual

FLOAT = ("float", "bfloat", "complex")


def _resnet18(on_meta: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    if on_meta:
        with torch.device("meta"):
            return torchvision.models.resnet18().eval()
    return torchvision.models.resnet18().eval()


def _assert_unavailable(report: fxinspect.Report) -> None:
    """Everything that needs real values is None, never 0."""
    assert report.timing is None
    assert report.totals.latency is None
    assert all(m.latency is None for m in report.modules.values())
    for node in report.nodes:
        assert node.latency is None, node.name
        assert all(m.stats is None for m in node.outputs + node.inputs), node.name
        if any(m.dtype.startswith(FLOAT) for m in node.outputs):
            assert node.nan_count is None and node.inf_count is None, node.name
    assert any(n.is_op for n in report.nodes)
    assert any("virtual run" in note for note in report.capture.notes)


# ------------------------------------------------------------------ resnet18: meta == real


@pytest.mark.parametrize("how", ["meta-model", "device-meta"])
def test_resnet18_virtual_run_matches_real_run(how):
    real = _resnet18(on_meta=False)
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        expected = fxinspect.analyze(real, x, timing=False)
        if how == "meta-model":
            report = fxinspect.analyze(_resnet18(on_meta=True), x.to("meta"))  # timing=True asked, not run
        else:
            report = fxinspect.analyze(real, x, device="meta")
    assert report.totals.params == expected.totals.params == unique_param_count(real) == 11_689_512
    for field in (
        "trainable_params",
        "buffers",
        "param_bytes",
        "buffer_bytes",
        "flops",
        "macs",
        "bytes_read",
        "bytes_written",
        "partial",
    ):
        assert getattr(report.totals, field) == getattr(expected.totals, field), field
    assert report.totals.macs == 1_814_073_344  # torchvision: 1.814 GMACs at 224x224
    for path, module in expected.modules.items():
        virtual = report.modules[path]
        assert (virtual.flops, virtual.macs, virtual.params) == (module.flops, module.macs, module.params), path
    for a, b in zip(report.nodes, expected.nodes):
        assert (a.name, [m.shape for m in a.outputs]) == (b.name, [m.shape for m in b.outputs])
    _assert_unavailable(report)


def test_virtual_run_with_grad_and_train_mode():
    with torch.device("meta"):
        model = torchvision.models.resnet18()  # train mode: BatchNorm updates (fake) running stats
    report = fxinspect.analyze(model, torch.empty(2, 3, 224, 224, device="meta"))
    assert report.totals.macs == 2 * 1_814_073_344
    assert model.bn1.running_mean.device.type == "meta" and not isinstance(model.bn1.running_mean, FakeTensor)
    _assert_unavailable(report)


def test_a_loss_over_labels_built_on_meta_is_the_real_runs_step():
    # A model and its labels built under torch.device("meta"): the loss meets the labels (a
    # real meta tensor) beside the output (a fake one standing for the host), in its forward
    # and in the backward that saved them; the step is the real one's, op for op.
    model, x, y = torch.nn.Linear(4, 3), torch.randn(2, 4), torch.tensor([0, 2])
    real = fxinspect.analyze(
        model, x, backward=True, loss_fn=lambda out: torch.nn.functional.cross_entropy(out, y), timing=False
    )
    on_meta, y_meta = model.to("meta"), y.to("meta")
    meta = fxinspect.analyze(
        on_meta, x.to("meta"), backward=True, loss_fn=lambda out: torch.nn.functional.cross_entropy(out, y_meta)
    )
    # forward: addmm 2*(2*4*3) + 2*3 bias = 54 FLOPs; backward: the weight's grad, mm 2*(3*2*4) = 48,
    # and the bias's, a sum of 2*3 = 6 (x requires no grad: no grad of the input)
    assert (meta.totals.flops, meta.totals.backward_flops) == (real.totals.flops, real.totals.backward_flops)
    assert (meta.totals.flops, meta.totals.backward_flops) == (54, 48 + 6)
    assert meta.memory.peak == real.memory.peak
    assert y_meta.device.type == "meta" and not isinstance(y_meta, FakeTensor)


def test_device_meta_leaves_the_real_model_untouched():
    model = _resnet18(on_meta=False).train()  # train mode: a real run would update running stats
    model.fc.weight.requires_grad_(False)
    before = state_fingerprint(model)
    report = fxinspect.analyze(model, torch.randn(2, 3, 224, 224), device="meta")
    assert_same_state(before, state_fingerprint(model))
    assert all(type(p) is torch.nn.Parameter and p.device.type == "cpu" for p in model.parameters())
    assert report.totals.trainable_params == 11_689_512 - 512 * 1000  # fc.weight frozen


# ------------------------------------------------------------------ no weight is allocated


def _peak_rss() -> int:
    return int(re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1)) * 1024


def _reset_peak_rss() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # Linux: reset the peak RSS (VmHWM) to the current RSS
    except OSError as exc:
        pytest.skip(f"cannot reset the peak RSS here: {exc}")


@pytest.mark.parametrize(
    "on_meta, width, depth",
    [
        (False, 4096, 6),  # a real model, device="meta": 6 * 4096*4096 * 4 B = 384 MiB of weights
        (True, 16384, 4),  # a meta model: 4 * 16384*16384 * 4 B = 4 GiB if it were allocated
    ],
    ids=["device-meta-384MiB", "meta-model-4GiB"],
)
def test_virtual_run_allocates_no_weights(on_meta, width, depth):
    layers = lambda: torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)])  # noqa: E731
    if on_meta:
        with torch.device("meta"):
            model = layers()
    else:
        model = layers()
    x = torch.empty(8, width, device="meta" if on_meta else "cpu")
    weight_bytes = depth * width * width * 4
    fxinspect.analyze(torch.nn.Linear(2, 2), torch.randn(1, 2), device="meta")  # warm imports and caches
    _reset_peak_rss()
    start = _peak_rss()
    report = fxinspect.analyze(model, x, device=None if on_meta else "meta")
    grown = _peak_rss() - start
    assert report.totals.param_bytes == weight_bytes + depth * width * 4
    assert report.totals.macs == 8 * depth * width * width  # tokens * weights
    assert grown < weight_bytes / 20, f"peak RSS grew by {grown / 2**20:.1f} MiB"


# ------------------------------------------------------------------ deciding and copying


@pytest.mark.parametrize(
    "model_device, input_device, device, expected",
    [
        ("cpu", "cpu", None, False),
        ("cpu", "cpu", "meta", True),
        ("cpu", "cpu", torch.device("meta"), True),
        ("meta", "cpu", None, True),
        ("cpu", "meta", None, True),
    ],
)
def test_is_virtual(model_device, input_device, device, expected):
    model = torch.nn.Linear(3, 2, device=model_device)
    assert is_virtual(model, (torch.empty(1, 3, device=input_device),), {}, device) is expected


@pytest.mark.parametrize("device", ["cpu", "cuda", "bogus"])
def test_device_other_than_meta_is_rejected(device):
    with pytest.raises(InputError, match="meta"):
        fxinspect.analyze(torch.nn.Linear(3, 2), torch.randn(1, 3), device=device)


def test_fake_copy_keeps_structure_ties_and_flags():
    with torch.device("meta"):
        model = torch.nn.ModuleDict(
            {
                "emb": torch.nn.Embedding(10, 4),
                "head": torch.nn.Linear(4, 10, bias=False),
                "bn": torch.nn.BatchNorm1d(4),
            }
        )
    model["head"].weight = model["emb"].weight
    model["bn"].weight.requires_grad_(False)
    model["head"].scale = torch.ones(3, device="meta")  # a plain tensor attribute
    copy = fake_copy(model, FakeTensorMode(allow_non_fake_inputs=True))
    assert copy["head"].weight is copy["emb"].weight  # tied stays tied
    for (name, p), (_, q) in zip(model.named_parameters(), copy.named_parameters()):
        assert isinstance(q, FakeTensor) and isinstance(q, torch.nn.Parameter), name
        assert (q.shape, q.dtype, q.requires_grad, q.device.type) == (p.shape, p.dtype, p.requires_grad, "cpu"), name
    assert isinstance(copy["bn"].running_mean, FakeTensor) and isinstance(copy["head"].scale, FakeTensor)
    assert model["emb"].weight.device.type == "meta" and not isinstance(model["emb"].weight, FakeTensor)


class _NoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.empty(4, 4, device="meta"))

    def forward(self):
        return self.w @ self.w


def test_no_timing_without_data_even_without_inputs():
    report = fxinspect.analyze(_NoInputs())  # timing=True is asked for; nothing has data
    assert report.totals.macs == 4 * 4 * 4
    _assert_unavailable(report)


# ------------------------------------------------------------------ a tiny HF Llama on meta


def _tiny_llama(device: str, tie: bool = False):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        tie_word_embeddings=tie,
    )
    torch.manual_seed(0)
    with torch.device(device):
        return transformers.LlamaForCausalLM(config).eval()


SEQ = 16
# Linear weights per layer: q 64*64 + k 64*32 + v 64*32 + o 64*64 (2 kv heads of 16) + MLP 3*64*128
#                         = 4096 + 2048 + 2048 + 4096 + 24576 = 36,864
# all Linears: 2 * 36,864 + lm_head 64*128 = 73,728 + 8,192 = 81,920
LLAMA_LINEAR_WEIGHTS = 2 * (64 * 64 + 64 * 32 + 64 * 32 + 64 * 64 + 3 * 64 * 128) + 64 * 128
ATTENTION_FLOPS = 4 * SEQ**2 * 64 * 2  # QK^T and AV: 2 * 2 * seq^2 * hidden per layer = 131,072
LLAMA_FLOPS = 2 * SEQ * LLAMA_LINEAR_WEIGHTS + ATTENTION_FLOPS  # 2*16*81,920 + 131,072 = 2,752,512
# params: Linears 81,920 + embedding 128*64 = 8,192 + RMSNorms (2 per layer + final) 5*64 = 320
LLAMA_PARAMS = LLAMA_LINEAR_WEIGHTS + 128 * 64 + 5 * 64  # 90,432


def test_llama_arithmetic():
    assert (LLAMA_LINEAR_WEIGHTS, LLAMA_FLOPS, LLAMA_PARAMS) == (81_920, 2_752_512, 90_432)


@pytest.mark.parametrize("method", ["auto", "export", "eager"])
def test_tiny_llama_on_meta(method):
    model = _tiny_llama("meta")
    ids = torch.zeros(1, SEQ, dtype=torch.long, device="meta")
    with torch.no_grad():
        report = fxinspect.analyze(model, {"input_ids": ids, "use_cache": False}, method=method)
    assert report.totals.params == LLAMA_PARAMS
    assert 2 * report.totals.macs == LLAMA_FLOPS
    assert not report.totals.partial, report.uncounted
    attention = [a for n in report.nodes for a in n.aten if "scaled_dot_product" in a.op]
    assert 2 * sum(a.macs for a in attention) == ATTENTION_FLOPS  # the fused CPU attention op is priced
    assert report.outputs[0].shape == (1, SEQ, 128)
    _assert_unavailable(report)


@pytest.mark.parametrize("method", ["auto", "eager"])
def test_tiny_llama_device_meta_matches_real_run(method):
    model = _tiny_llama("cpu", tie=True)
    ids = torch.randint(0, 128, (1, SEQ))
    inputs = {"input_ids": ids, "use_cache": False}
    before = state_fingerprint(model)
    with torch.no_grad():
        real = fxinspect.analyze(model, inputs, method=method, timing=False)
        virtual = fxinspect.analyze(model, inputs, method=method, device="meta")
    assert_same_state(before, state_fingerprint(model))
    # tied lm_head: counted once, 81,920 + 8,192 + 320 - 8,192
    assert virtual.totals.params == real.totals.params == LLAMA_PARAMS - 128 * 64
    assert [s.name for s in virtual.shared] == [s.name for s in real.shared] == ["model.embed_tokens.weight"]
    # bytes may differ: transformers builds an explicit causal mask when it sees fake tensors
    assert (virtual.totals.flops, virtual.totals.macs) == (real.totals.flops, real.totals.macs)
    assert 2 * virtual.totals.macs == LLAMA_FLOPS
    _assert_unavailable(virtual)


# ------------------------------------------------------------------ Llama-2-7B shapes (slow)


@pytest.mark.slow
def test_llama7b_on_meta():
    """benchmarks/llama7b_meta.py as a test: exact figures, bounded memory."""
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig()).eval()
    ids = torch.zeros(1, 2048, dtype=torch.long, device="meta")
    _reset_peak_rss()
    start = _peak_rss()
    with torch.no_grad():
        report = fxinspect.analyze(model, {"input_ids": ids, "use_cache": False}, timing=False)
    grown = _peak_rss() - start
    # embedding + lm_head 2 * 32000*4096 + 32 * (4*4096*4096 + 3*4096*11008 + 2*4096) + 4096
    assert report.totals.params == 6_738_415_616
    # Linears: 2 * 2048 tokens * 6,607,077,376 weights = 27,062,588,932,096
    # attention: 4 * 2048^2 * 4096 * 32 layers       =  2,199,023,255,552
    assert 2 * report.totals.macs == 29_261_612_187_648
    assert not report.totals.partial, report.uncounted
    assert grown < 4 * 2**30, f"peak RSS grew by {grown / 2**30:.2f} GiB"  # (its time: benchmarks/llama7b_meta.py)
