"""Device presets, the measured spec, and the time model built on them."""

from __future__ import annotations

import pytest
import torch

import fxinspect
from fxinspect import devices
from fxinspect.errors import InputError


@pytest.mark.parametrize("name", sorted(devices.PRESETS))
def test_presets_are_dense_datasheet_figures(name):
    spec = devices.PRESETS[name]
    bf16 = spec.peak(torch.bfloat16)
    # on every sheet: BF16 dense is twice TF32 dense and FP8 twice BF16 (within the sheets' rounding)
    assert bf16 == pytest.approx(2 * spec.tf32_flops, rel=0.02)
    if torch.float8_e4m3fn in spec.peak_flops:
        assert spec.peak(torch.float8_e4m3fn) == pytest.approx(2 * bf16, rel=0.02)
    else:
        assert name.startswith("a100")  # no FP8 units
    assert spec.peak(torch.float16) == bf16 and spec.peak(torch.float32) < bf16
    assert 0.2e12 < spec.memory_bandwidth < 6e12 and spec.source


def test_the_figures_of_the_sheets():
    h100, a100 = devices.get("h100-sxm"), devices.get("a100-80gb")
    # H100 SXM: 989.4 TFLOPS BF16 dense (1,979 with sparsity, never used), 3.35 TB/s
    assert (h100.peak(torch.bfloat16), h100.memory_bandwidth) == (989.4e12, 3.35e12)
    assert (a100.peak(torch.bfloat16), a100.peak(torch.float32), a100.memory_bandwidth) == (312e12, 19.5e12, 2039e9)
    assert devices.get("mi300x").peak(torch.bfloat16) == 1307.4e12 and devices.get("l4").memory_bandwidth == 300e9


@pytest.mark.parametrize(
    ("reported", "preset"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("AMD Instinct MI300X", "mi300x"),
    ],
)
def test_driver_names_resolve_to_their_preset(reported, preset):
    assert devices.get(reported).name == preset


def test_an_unknown_device_is_one_clear_error():
    with pytest.raises(InputError, match="no device spec named 'TPU v9'; presets: a100-40gb"):
        devices.get("TPU v9")


def test_the_measured_spec_is_measured_once_and_cached(tmp_path, monkeypatch):
    from fxinspect import measured_device as measure_device

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []
    real = measure_device.measure

    def counting(device="cpu", budget=0.4):
        calls.append(device)
        return real(device, budget=0.02)

    monkeypatch.setattr(measure_device, "measure", counting)
    first = devices.get("measured")
    second = devices.get("measured")
    assert calls == ["cpu"] and first == second and list(tmp_path.glob("fxinspect/device-*.json"))
    assert first.peak(torch.float32) > 1e8 and first.memory_bandwidth > 1e8 and 0 < first.launch_overhead < 1e-3


class _Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mm = torch.nn.Linear(1024, 1024, bias=False)

    def forward(self, x):
        return self.mm(x) + 1.0


def test_predicted_latency_is_the_roofline_of_each_aten_op_summed_into_modules():
    spec = devices.DeviceSpec("toy", {torch.float32: 1e12}, 1e11, launch_overhead=1e-6)
    x = torch.randn(256, 1024)
    report = fxinspect.analyze(_Two(), x, timing=False, memory=False, device_spec=spec)
    mm, add = (n for n in report.nodes if n.is_op)
    # mm: 2*256*1024*1024 FLOPs / 1e12 = 536.9 us; bytes (1 MiB + 4 MiB read, 1 MiB written) / 1e11 = 62.9 us
    assert mm.predicted_latency == pytest.approx(2 * 256 * 1024 * 1024 / 1e12 + 1e-6)
    # add: 256*1024 FLOPs / 1e12 = 0.26 us; 2 MiB moved / 1e11 = 21.0 us: memory-bound
    assert add.predicted_latency == pytest.approx(2 * 256 * 1024 * 4 / 1e11 + 1e-6)
    assert report.totals.predicted_latency == pytest.approx(mm.predicted_latency + add.predicted_latency)
    assert report.modules["mm"].predicted_latency == mm.predicted_latency
    rows = {r["node"]: r for r in report.roofline()}
    assert (rows[mm.name]["bound"], rows[add.name]["bound"]) == ("compute", "memory")
    assert "predicted" in report.table() and "predicted" in str(report)
    meta = fxinspect.analyze(_Two(), x, timing=False, memory=False, device_spec=spec, device="meta")
    assert meta.totals.predicted_latency == report.totals.predicted_latency  # no run needed
    assert report.totals.backward_predicted_latency is None  # no backward ran


def test_a_backward_is_priced_from_its_own_aten_calls():
    spec = devices.DeviceSpec("toy", {torch.float32: 1e12}, 1e11, launch_overhead=1e-6)
    report = fxinspect.analyze(_Two(), torch.randn(256, 1024), timing=False, backward=True, device_spec=spec)
    mm, add = (n for n in report.nodes if n.is_op)
    # x needs no gradient: the weight's is one mm, grad^T @ x, 2*256*1024*1024 FLOPs / 1e12, compute-bound
    # (2 MiB read, 4 MiB written: 62.9 us at 1e11 B/s), and one launch; the add's backward passes grad on
    assert mm.backward_predicted_latency == pytest.approx(2 * 256 * 1024 * 1024 / 1e12 + 1e-6)
    assert add.backward_predicted_latency == 0.0
    assert report.totals.backward_predicted_latency == pytest.approx(mm.backward_predicted_latency)
    assert "537.87 µs backward" in report.summary(width=None)


def test_an_op_measured_above_its_roof_is_flagged_never_over_100_percent():
    slow = devices.DeviceSpec("slow", {torch.float32: 1e6}, 1e6, launch_overhead=0.0)  # 1 MFLOP/s: every op beats it
    report = fxinspect.analyze(_Two(), torch.randn(8, 1024), memory=False, repeats=3, device_spec=slow)
    rows = [r for r in report.roofline() if r["latency"]]
    assert rows and all(r["above_roof"] and r["fraction"] is None for r in rows)
    fig = report.plot_roofline()
    assert fig.axes[0].get_xlabel().startswith("arithmetic intensity")


def test_without_a_time_model_the_roofline_says_how_to_get_one():
    report = fxinspect.analyze(_Two(), torch.randn(8, 1024), timing=False, memory=False)
    assert report.totals.predicted_latency is None and "predicted" not in report.table()
    with pytest.raises(ValueError, match="device_spec="):
        report.roofline()


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA device: the measured spec times CUDA kernels with synchronisation",
)
def test_the_measured_spec_on_cuda_times_with_synchronisation():
    from fxinspect.measured_device import measure

    found = measure("cuda", budget=0.05)
    assert found["device"] == "cuda" and found["peak_flops"]["float32"] > 1e11 and found["memory_bandwidth"] > 1e10
