"""Kernel classes, the calibration of their efficiencies, and the pricing with them."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import fxinspect
from fxinspect import devices
from fxinspect.timemodel import calibration, host, host_cache, kernel_probes
from fxinspect.timemodel.kernel_classes import CLASSES, KIND_CURVES, kernel_class, priced_class, scale


class _Args(TorchDispatchMode):
    """The aten calls a function makes, with their arguments, as a report's counting sees them."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append((func, args))
        return func(*args, **(kwargs or {}))


def _conv_call(in_channels, out_channels, groups):
    with _Args() as seen:
        F.conv2d(
            torch.randn(1, in_channels, 6, 6), torch.randn(out_channels, in_channels // groups, 3, 3), groups=groups
        )
    return next((f, a) for f, a in seen.calls if "convolution" in str(f))


@pytest.mark.parametrize(
    ("channels", "groups", "kind"),
    [
        ((8, 8), 8, "conv.depthwise"),
        ((8, 16), 8, "conv.depthwise"),
        ((8, 8), 2, "conv.grouped"),
        ((8, 8), 1, "conv.dense"),
    ],
)
def test_a_convolution_s_kind_is_told_by_its_groups(channels, groups, kind):
    func, args = _conv_call(*channels, groups)  # the call as aten receives it: groups is its 9th argument
    assert kernel_class(func, args) == kind and kernel_class(str(func)) == "conv" and priced_class(kind) == "conv"


@pytest.mark.parametrize(
    ("op", "cls"),
    [
        ("aten.addmm.default", "gemm"),
        ("aten.mm.default", "gemm"),
        ("aten.bmm.default", "bmm"),
        ("aten.convolution_backward.default", "conv"),
        ("aten._scaled_dot_product_flash_attention_for_cpu.default", "attention"),
        ("aten._scaled_dot_product_flash_attention_for_cpu_backward.default", "attention"),
        ("aten._native_multi_head_attention.default", "attention"),  # nn.MultiheadAttention in eval
        ("aten.add.Tensor", "elementwise"),
        ("aten.hardswish.default", "elementwise"),
        ("aten.threshold_backward.default", "elementwise"),
        ("aten.gelu.default", "activation"),
        ("aten.gelu_backward.default", "activation"),
        ("aten._softmax.default", "reduction"),
        ("aten.mean.dim", "reduction"),
        ("aten.max.dim", "reduction"),
        ("aten.max.other", "elementwise"),  # two tensors' maximum, element by element
        ("aten.gelu_.default", "activation"),  # in place
        ("aten.native_layer_norm_backward.default", "layer_norm"),
        ("aten._native_batch_norm_legit_no_training.default", "batch_norm"),
        ("aten.native_batch_norm_backward.default", "batch_norm"),
        ("aten.max_pool2d_with_indices_backward.default", "pool"),
        ("aten.embedding_dense_backward.default", "index"),
        ("aten.bernoulli_.float", "random"),  # dropout's mask: 0 FLOPs, its bytes written
        ("aten.native_dropout_backward.default", "elementwise"),
    ],
)
def test_each_op_has_its_kernel_class(op, cls):
    assert kernel_class(op) == cls and kernel_class(op) in CLASSES


def test_a_class_s_measure_is_intensity_or_bytes_per_call():
    # a convolution of 14,400 FLOPs over 6,688 bytes: 2.153 FLOPs a byte; 3 relus moving 24,000 bytes: 8,000 each
    assert scale("conv.depthwise", 14_400, 6_688, 1) == pytest.approx(14_400 / 6_688)
    assert scale("elementwise", 3_000, 24_000, 3) == 8_000


_TOY = devices.DeviceSpec(
    "toy",
    {"float32": 1e9},
    1e9,
    launch_overhead=1e-6,
    efficiency={"conv": [(100.0, 0.5), (1.0, 0.1)], "elementwise": [(1e3, 0.5), (1e6, 1.0)]},
)


def test_the_efficiency_curve_is_interpolated_in_log_log():
    # halfway in log between 1e3 and 1e6 (3.162e4): 0.5 · 2^(1/2); its end points' beyond them
    assert _TOY.efficiency_at("elementwise", 10**4.5) == pytest.approx(0.5 * 2**0.5)
    assert (_TOY.efficiency_at("elementwise", 10.0), _TOY.efficiency_at("elementwise", 1e9)) == (0.5, 1.0)
    assert _TOY.efficiency_at("pool", 5.0) == 1.0  # a class without a curve: the roofline


@pytest.mark.parametrize(
    ("module", "x", "expected"),
    [
        # depthwise 3×3 on 8 channels of 10×10: 2·8·100·9 = 14,400 FLOPs, (3,200 + 288) read +
        # 3,200 written = 6,688 bytes; roof max(14.4 µs, 6.688 µs) = 14.4 µs; 2.1531 FLOPs a byte:
        # efficiency 0.1 · 5^(ln 2.1531 / ln 100) = 0.13074; 14.4 / 0.13074 = 110.14 µs + 1 µs launch
        (torch.nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), torch.randn(1, 8, 10, 10), 111.144e-6),
        # relu of 1,000 floats: 8,000 bytes, roof max(1 µs, 8 µs) = 8 µs; efficiency
        # 0.5 · 2^(ln 8 / ln 1000) = 0.61601; 8 / 0.61601 = 12.987 µs + 1 µs launch
        (torch.nn.ReLU(), torch.randn(1000), 13.987e-6),
    ],
)
def test_a_calibrated_spec_prices_each_op_at_its_class_s_efficiency(module, x, expected):
    report = fxinspect.analyze(module, x, timing=False, device_spec=_TOY)
    assert report.totals.predicted_latency == pytest.approx(expected, rel=1e-4)
    assert fxinspect.Report.from_json(report.to_json()).time_model == _TOY  # its curves kept in the JSON


_BY_KIND = devices.DeviceSpec(
    "toy by kind",
    {"float32": 1e9},
    1e9,
    launch_overhead=1e-6,
    efficiency={
        "conv": [(1.0, 0.5)],
        "conv.depthwise": [(1.0, 0.05)],
        "conv.depthwise.backward": [(1.0, 0.01)],
        "batch_norm.train": [(1.0, 0.2)],
        "random": [(1.0, 0.1)],
    },
)


def test_dropout_s_mask_is_priced_on_the_random_class_s_curve():
    report = fxinspect.analyze(torch.nn.Dropout(0.1).train(), torch.randn(128, 768), timing=False, device_spec=_BY_KIND)
    (node,) = [n for n in report.nodes if n.is_op]
    # bernoulli_ writes the 393,216-byte mask: 393.216 µs at 1 GB/s, over 0.1: 3,932.16 µs + 1 µs;
    # div_ on it reads and writes it (no curve: the roofline) 786.432 µs + 1 µs; the multiply
    # reads x and the mask and writes the output, 1,179.648 µs + 1 µs; empty_like is free
    assert [c.op.split(".")[1] for c in node.aten] == ["empty_like", "bernoulli_", "div_", "mul"]
    assert node.predicted_latency == pytest.approx((3932.16 + 1 + 786.432 + 1 + 1179.648 + 1) * 1e-6, rel=1e-9)


def test_a_convolution_is_priced_on_its_kind_s_curve_forward_and_backward():
    depthwise = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
    dense = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
    x = torch.randn(1, 8, 10, 10)
    for module, kind, efficiency in ((depthwise, "depthwise", 0.05), (dense, "dense", 0.5)):
        report = fxinspect.analyze(module, x, timing=False, backward=True, device_spec=_BY_KIND)
        (node,) = [n for n in report.nodes if n.is_op]
        (forward,) = [c for c in node.aten if c.status.value != "free"]
        backward = next(c for c in node.backward_aten if "convolution_backward" in c.op)
        assert (forward.kind, backward.kind) == (kind, kind)
        # depthwise: 2·8·100·9 = 14,400 FLOPs: 14.4 µs at 1 GFLOP/s (bytes 6,688: 6.7 µs), over
        # 0.05: 288 µs + 1 µs launch; dense: 8 times the FLOPs, 115.2 µs over 0.5 (its own curve
        # missing: its class's) = 230.4 µs + 1 µs
        roof = max(forward.flops, forward.bytes_read + forward.bytes_written) / 1e9
        assert node.predicted_latency == pytest.approx(roof / efficiency + 1e-6, rel=1e-9)
        assert forward.flops == 14_400 * (8 if kind == "dense" else 1)
    # the depthwise one's backward (the weight's gradient alone, x needs none): 14,400 FLOPs,
    # 14.4 µs (6,976 bytes: 7.0 µs), on its kind's backward curve, 0.01: 1,440 µs + 1 µs
    report = fxinspect.analyze(depthwise, x, timing=False, backward=True, device_spec=_BY_KIND)
    (node,) = [n for n in report.nodes if n.is_op]
    assert node.backward_predicted_latency == pytest.approx(1441e-6, rel=1e-9)


def test_a_batch_norm_in_training_is_priced_on_its_kind_s_curve():
    norm, x = torch.nn.BatchNorm2d(8), torch.randn(2, 8, 10, 10)
    report = fxinspect.analyze(norm, x, timing=False, backward=True, device_spec=_BY_KIND)
    (node,) = [n for n in report.nodes if n.is_op]
    assert {c.kind for c in (*node.aten, *node.backward_aten) if "batch_norm" in c.op} == {"train"}
    # native_batch_norm: 13,056 bytes (1,600 elements in and out, the statistics) over 11,200
    # FLOPs: 13.056 µs / 0.2 = 65.28 µs + 1 µs, and the batch counter's add_ (16 bytes) + 1 µs
    assert node.predicted_latency == pytest.approx(67.296e-6, rel=1e-9)
    # its backward (no backward curve: the forward's kind's): 22,400 FLOPs, 22.4 µs / 0.2 + 1 µs
    assert node.backward_predicted_latency == pytest.approx(113e-6, rel=1e-9)
    # in eval it reads its running statistics: no kind, the class's curve (none here: the roofline)
    report = fxinspect.analyze(norm.eval(), x, timing=False, device_spec=_BY_KIND)
    (node,) = [n for n in report.nodes if n.is_op]
    assert node.predicted_latency == pytest.approx(12.928e-6 + 1e-6, rel=1e-9)


def test_a_spec_scaled_to_another_of_its_family_keeps_its_efficiencies():
    spec = devices.DeviceSpec(
        "measured (cuda: NVIDIA H100 80GB HBM3)",
        {"float32": 50e12, "bfloat16": 600e12},
        3e12,
        launch_overhead=4e-6,
        efficiency={"conv": [(10.0, 0.4)]},
    )
    h200 = devices.scaled_to(spec, "h200")  # the reference, h100-sxm, found from the name
    # the H200's compute is the H100 SXM's (67 / 67, 989.4 / 989.4); its bandwidth 3e12 · 4.8 / 3.35
    assert (h200.peak("float32"), h200.peak("bfloat16")) == (pytest.approx(50e12), pytest.approx(600e12))
    assert h200.memory_bandwidth == pytest.approx(4.2985e12, rel=1e-4)
    assert (h200.efficiency, h200.launch_overhead) == (spec.efficiency, 4e-6)
    assert "scaled to h200 by its roofs over h100-sxm's" in h200.source
    pcie = devices.scaled_to(spec, "h100-pcie")
    # 50e12 · 51 / 67 = 38.06e12; 600e12 · 756.5 / 989.4 = 458.76e12; 3e12 · 2 / 3.35 = 1.791e12
    assert pcie.peak("float32") == pytest.approx(38.06e12, rel=1e-3)
    assert pcie.peak("bfloat16") == pytest.approx(458.76e12, rel=1e-4)
    assert pcie.memory_bandwidth == pytest.approx(1.791e12, rel=1e-3)


def _roofs():
    return {
        "format": host_cache.FORMAT,
        "device": "cpu",
        "host": "here",
        "torch": torch.__version__,
        "threads": 2,
        "taken_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "peak_flops": {"float32": 1e11, "float64": 5e10, "bfloat16": 1e11},
        "memory_bandwidth": 2e10,
        "launch_overhead": 3e-6,
        "trials": {"float32": [{"work": 1.0, "seconds": [1e-11]}], "launch": [{"work": 1.0, "seconds": [3e-6]}]},
    }


@pytest.fixture
def here(tmp_path, monkeypatch):
    """The cache in tmp_path; this host's roofs given, not measured."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(host, "measure", lambda device="cpu", budget=0.4: _roofs())


def test_calibrate_with_a_tiny_budget_measures_every_class_and_caches_it(here, monkeypatch):
    spec = devices.calibrate("cpu", budget_s=0.05)
    assert set(spec.efficiency) == set(CLASSES) | set(
        _KINDS
    )  # every class and kind gets a point, however short the budget
    assert all(math.isfinite(e) and e > 0 for curve in spec.efficiency.values() for _, e in curve)
    assert (spec.peak("float32"), spec.memory_bandwidth, spec.launch_overhead) == (1e11, 2e10, 3e-6)
    assert f"kernel efficiencies of {len(CLASSES)} classes (convolutions by kind) measured at" in spec.source
    assert "0.05 s budget" in spec.source
    cached = json.loads(host_cache.cache_file("cpu", kind="calibration").read_text())
    assert cached["format"] == host_cache.FORMAT and cached["roofs"]["memory_bandwidth"] == 2e10
    first = cached["trials"]["conv.depthwise"][0]
    assert first["label"] == "32->32 3x3/1 g32 @112" and first["seconds"]
    monkeypatch.setattr(calibration, "measure", lambda *a: pytest.fail("measured again, the cache fresh"))
    assert devices.get("measured") == spec  # the cached calibration


_KINDS = list(KIND_CURVES)


def _calibration(roofs, fmt=host_cache.FORMAT, efficiency=0.5):
    return {
        "format": fmt,
        "taken_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "budget": 1.0,
        "took": 0.5,
        "roofs": roofs,
        "bare_call": 1e-6,
        "efficiency": {cls: [[1.0, efficiency]] for cls in (*CLASSES, *_KINDS)},
        "trials": {cls: [{"x": 1.0, "roof": 1.0, "calls": 1, "seconds": [2.0]}] for cls in (*CLASSES, *_KINDS)},
    }


@pytest.mark.parametrize(
    ("cached", "again"),
    [
        (_calibration(_roofs()), False),
        (_calibration(_roofs(), fmt=host_cache.FORMAT - 1), True),  # an older layout
        (_calibration(_roofs(), efficiency=math.nan), True),  # implausible
        ({**_calibration(_roofs()), "taken_at": "2020-01-01T00:00:00+00:00"}, True),  # stale
    ],
)
def test_an_old_stale_or_implausible_calibration_is_measured_again(here, monkeypatch, cached, again):
    host_cache.write(host_cache.cache_file("cpu", kind="calibration"), cached)
    measured = []
    monkeypatch.setattr(calibration, "measure", lambda d, b, r: measured.append(d) or _calibration(r, efficiency=0.25))
    spec = devices.calibrate("cpu")
    assert measured == (["cpu"] if again else []) and spec.efficiency["conv"] == ((1.0, 0.25 if again else 0.5),)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"efficiency": {"conv": [[1.0, 0.5]]}}, "gemm was not measured"),
        ({"efficiency": {c: [[2.0, 1e-6]] for c in CLASSES}}, "gemm at 2 reached 1e-06 of its roofs"),
        ({"bare_call": 0.01}, "a bare aten call took 0.01 s"),
        # a point 50 times below both neighbours: its trials all slowed by load
        (
            {
                "efficiency": {
                    **{c: [[1.0, 0.5]] for c in (*CLASSES, *_KINDS)},
                    "conv.dense": [[1.0, 0.5], [2.0, 0.01], [4.0, 0.6]],
                }
            },
            "conv.dense at 2 reached 0.01 of its roofs, its neighbours 0.5 and 0.6",
        ),
        ({"efficiency": {c: [[1.0, 0.5]] for c in CLASSES}}, "conv.depthwise was not measured"),
        ({"roofs": {}}, "the calibration is incomplete"),
    ],
)
def test_problems_name_what_is_implausible(change, said):
    assert any(said in p for p in calibration.problems({**_calibration(_roofs()), **change}))


def test_every_workload_runs_only_ops_of_its_class():
    # each workload counted as a model's ops are (no timing): _point refuses one that runs
    # an op of another class, which would price that class with another's efficiency
    from fxinspect.run.dispatch import CountingMode

    roof = devices.DeviceSpec("roofs", {"float32": 1e11}, 1e10)
    found = kernel_probes.workloads("cpu")
    points = [
        calibration._point(cls, label, fn, roof, CountingMode) for cls, calls in found.items() for label, fn in calls
    ]
    # each convolution measured as its kind (a curve each), never as a bare "conv"
    assert {p["class"] for p in points} == set(CLASSES) - {"conv"} | set(_KINDS)
    assert all(p["roof"] > 0 and p["x"] > 0 for p in points)
    depthwise = next(p for p in points if p["label"] == "32->32 3x3/1 g32 @112")
    # 2·32·112²·9 = 7,225,344 FLOPs over (2·32·112² + 32·9) · 4 = 3,212,416 bytes: 2.249 a byte
    assert depthwise["x"] == pytest.approx(7_225_344 / 3_212_416)


def test_a_kind_has_a_curve_of_its_own_and_its_class_one_of_every_kind_s_points():
    trials = {
        "conv.depthwise": [
            {"x": 2.0, "roof": 1.0, "calls": 1, "seconds": [4.0, 5.0]},  # 1 s of roof in 4 s: 0.25
            {"x": 2.02, "roof": 1.0, "calls": 1, "seconds": [1.0]},  # 1.0; within 2 % of 2.0: one point
        ],
        "conv.dense": [{"x": 100.0, "roof": 1.0, "calls": 1, "seconds": [2.0]}],  # 0.5
    }
    curves = calibration._efficiency(trials, bare=0.0)
    # the two depthwise points as one: x = sqrt(2 · 2.02) = 2.00998, efficiency sqrt(0.25 · 1) = 0.5
    assert curves["conv.depthwise"] == [[pytest.approx(2.00998, rel=1e-5), pytest.approx(0.5)]]
    assert curves["conv.dense"] == [[100.0, 0.5]]
    assert curves["conv"] == [curves["conv.depthwise"][0], [100.0, 0.5]]


def test_each_trial_runs_after_the_caches_are_flushed():
    order = []

    class Flush:
        def add_(self, value):
            order.append("flush")

    calibration._trials(lambda: order.append("call"), "cpu", 0.0, least=3, flush=Flush())
    assert order == ["flush", "call"] * 3


def test_on_cuda_each_trial_is_timed_between_synchronisations(monkeypatch):
    synced = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: synced.append("sync"))
    times = calibration._trials(lambda: synced.append("call"), "cuda", 0.0, least=2)
    assert len(times) == 2 and synced == ["sync", "call", "sync"] * 2


def test_a_second_measurement_is_pooled_workload_by_workload():
    # the second, in less time, measured only the first conv workload: the other keeps its trials
    first = {**_calibration(_roofs()), "trials": {"conv": [
        {"label": "a", "x": 1.0, "roof": 1.0, "calls": 1, "seconds": [4.0]},
        {"label": "b", "x": 2.0, "roof": 1.0, "calls": 1, "seconds": [2.0]},
    ]}}  # fmt: skip
    second = {
        **_calibration(_roofs()),
        "took": 0.25,
        "trials": {"conv": [{"label": "a", "x": 1.0, "roof": 1.0, "calls": 1, "seconds": [2.0]}]},
    }
    pooled = calibration._pooled(first, second)
    assert [p["seconds"] for p in pooled["trials"]["conv"]] == [[4.0, 2.0], [2.0]]
    # a: 1 s of roof over its best 2 s less a 1 µs bare call; b the same
    assert pooled["efficiency"]["conv"] == [[1.0, pytest.approx(1 / (2 - 1e-6))], [2.0, pytest.approx(1 / (2 - 1e-6))]]
    assert (pooled["took"], pooled["budget"]) == (0.75, 2.0)  # 0.5 + 0.25 s of 1 + 1 s budgets
