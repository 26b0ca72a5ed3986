"""Device presets, the measured spec, and the time model built on them."""

from __future__ import annotations

import copy
import functools
import json
import math
from datetime import datetime, timedelta, timezone

import pytest
import torch

import fxinspect
from fxinspect.errors import InputError
from fxinspect.timemodel import calibration, devices, host, probes
from fxinspect.timemodel.kernel_classes import CLASSES, KIND_CURVES


@pytest.mark.parametrize("name", sorted(devices.PRESETS))
def test_presets_are_dense_datasheet_figures(name):
    spec = devices.PRESETS[name]
    bf16 = spec.peak(torch.bfloat16)
    # on every sheet: BF16 dense is twice TF32 dense and FP8 twice BF16 (within the sheets' rounding)
    assert bf16 == pytest.approx(2 * spec.tf32_flops, rel=0.02)
    if "float8_e4m3fn" in spec.peak_flops:
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


def _figures(f32=2e11, f64=9e10, bf16=4e11, copy=6e10, launch=1e-6, age=timedelta(0), **extra):
    """A set of figures as ``measure`` gives, taken ``age`` ago, each kind one trial of unit work."""
    peaks = {"float32": f32, "float64": f64, "bfloat16": bf16}
    trials = {
        kind: [{"work": 1.0, "seconds": [1 / rate if rate else math.inf]}]
        for kind, rate in {**peaks, "copy": copy}.items()
    }
    trials["launch"] = [{"work": 1.0, "seconds": [launch]}]
    taken = (datetime.now(timezone.utc) - age).isoformat(timespec="seconds")
    data = {
        "format": host.FORMAT,
        "device": "cpu",
        "host": "here",
        "torch": torch.__version__,
        "threads": 2,
        "taken_at": taken,
    }
    data.update(peak_flops=peaks, memory_bandwidth=copy, launch_overhead=launch, trials=trials)
    return {**data, **extra}


def _fake_calibration(device, budget_s, roofs):
    """A calibration as ``calibration.measure`` gives, never run: every class at its roofs."""
    measured = (*CLASSES, *KIND_CURVES)
    curve = {cls: [[1.0, 1.0]] for cls in measured}
    trials = {cls: [{"x": 1.0, "roof": 1.0, "calls": 1, "seconds": [1.0]}] for cls in measured}
    taken = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return {"format": host.FORMAT, "taken_at": taken, "budget": budget_s, "took": 0.0, "roofs": roofs,
            "bare_call": 1e-6, "efficiency": curve, "trials": trials}  # fmt: skip


@pytest.fixture
def fake_measure(tmp_path, monkeypatch):
    """``measure`` replaced by one that hands out the given sets in turn; the cache in tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    handed: list[dict] = []

    def hand_out(*sets):
        queue = list(sets)

        def measure(device="cpu", budget=0.4):
            handed.append(device)
            return copy.deepcopy(queue.pop(0) if len(queue) > 1 else queue[0])

        monkeypatch.setattr(host, "measure", measure)
        monkeypatch.setattr(calibration, "measure", _fake_calibration)
        return handed

    return hand_out


def test_the_measured_spec_is_measured_once_and_cached(fake_measure):
    calls = fake_measure(_figures())
    first, second = devices.get("measured"), devices.get("measured")
    assert calls == ["cpu"] and first == second and host.cache_file("cpu").exists()
    assert (first.peak(torch.float32), first.memory_bandwidth, first.launch_overhead) == (2e11, 6e10, 1e-6)
    assert "2 threads, each figure the best of at least 1 trials" in first.source


_BLOCK_CALLS = probes.priced_calls(probes.eager_block("cpu"))


def _fake_timed(fn, device):
    """Seconds of one call, never run: matmuls at 20, 50, 100, 80 GFLOP/s for n = 128, 256,
    512, 1024 on their fastest call, the copy at 50 GB/s, a launch 2 us, a streamed matmul of
    m rows m * 5 GFLOP/s; the calls in turn
    1, 3, 2, 5, 4 times that (their median is 3 times the fastest)."""
    _fake_timed.calls += 1
    slower = (1, 3, 2, 5, 4)[_fake_timed.calls % 5]
    if getattr(fn, "func", None) is torch.mm:
        n = fn.args[0].shape[0]
        return slower * 2 * n**3 / {128: 20e9, 256: 50e9, 512: 100e9, 1024: 80e9}[n]
    if getattr(fn, "func", None) is probes.linear_over:  # a streamed matmul: m rows at m * 5 GFLOP/s
        m, weights = fn.args[0].shape[0], fn.args[1]
        return slower * 2 * m * weights[0].numel() / (m * 5e9)
    if isinstance(fn, functools.partial):  # dst.copy_(src), 64 MiB read and written
        return slower * 2 * 64 * 2**20 / 50e9
    return slower * _BLOCK_CALLS * 2e-6  # the eager block: its priced calls, 2 us each


def test_each_figure_is_the_fastest_of_its_trials(monkeypatch):
    _fake_timed.calls = 0
    monkeypatch.setattr(host, "_timed", _fake_timed)
    found = host.measure("cpu", budget=0.4)
    # the fastest call of the fastest size, 512: 2 * 512**3 FLOPs in 2 * 512**3 / 1e11 s; medians would give a third
    assert found["peak_flops"] == {
        "float32": pytest.approx(1e11),
        "float64": pytest.approx(1e11),
        "bfloat16": pytest.approx(1e11),
    }
    assert found["memory_bandwidth"] == pytest.approx(50e9) and found["launch_overhead"] == pytest.approx(2e-6)
    # how they were taken: when, with what, and every trial, each size's
    taken = datetime.fromisoformat(found["taken_at"])
    assert abs(datetime.now(timezone.utc) - taken) < timedelta(minutes=1) and found["torch"] == torch.__version__
    assert (found["threads"], found["budget"], found["format"]) == (
        torch.get_num_threads(),
        0.4,
        5,
    )  # (5: the convolutions calibrated by kind beside the roofs, each trial after a flush)
    # the streamed matmuls, 1 to 128 rows over a 1024 × 16384 weight: 2·1024·16384 = 33,554,432 FLOPs
    # a row over (1024 + 16384·1024 + 16384) · 4 = 67,178,496 bytes; then the largest square,
    # n = 1024: 1024 / 6 FLOPs a byte at its fastest, 80 GFLOP/s
    rates = found["matmul_rates"]
    assert len(rates) == 9 and rates[0] == pytest.approx([33_554_432 / 67_178_496, 5e9])
    assert rates[-2][1] == pytest.approx(128 * 5e9) and rates[-1] == pytest.approx([1024 / 6, 80e9])
    sizes = found["trials"]["float32"]
    assert [t["work"] for t in sizes] == [2 * n**3 for n in (128, 256, 512, 1024)]
    assert all(len(t["seconds"]) >= 5 for t in sizes) and min(sizes[2]["seconds"]) == pytest.approx(2 * 512**3 / 1e11)


@pytest.mark.parametrize(
    ("seconds", "sizes"),
    [
        # calls stalled by another process at 128 and 256 (a time slice, 25 ms, whatever the size): not a slow dtype
        ({128: 0.025, 256: 0.026, 512: 2 * 512**3 / 1e11, 1024: 2 * 1024**3 / 1e11}, [128, 256, 512, 1024]),
        # a slow dtype, 1 GFLOP/s: 256 takes 2 * 256**3 / 1e9 = 33.6 ms, over 0.4 / 20 s and 8 times 128's
        ({n: 2 * n**3 / 1e9 for n in (128, 256, 512, 1024)}, [128, 256]),
        # 20 MFLOP/s: 128 takes 2 * 128**3 / 2e7 = 0.21 s, over 0.4 / 4 s at once
        ({n: 2 * n**3 / 2e7 for n in (128, 256, 512, 1024)}, [128]),
    ],
)
def test_a_slow_dtype_stops_the_sizes_and_a_stalled_call_does_not(monkeypatch, seconds, sizes):
    monkeypatch.setattr(host, "_timed", lambda fn, device: seconds[fn.args[0].shape[0]])
    tried = host._matmuls(torch.float32, "cpu", budget=0.4)
    assert [round((t["work"] / 2) ** (1 / 3)) for t in tried] == sizes


# the set: float32 at 23 MFLOP/s, 2,000 times below float64, taken on a busy machine
_BUSY_FLOAT32 = dict(f32=23e6, f64=46e9)


@pytest.mark.parametrize(
    ("implausible", "said"),
    [
        (_BUSY_FLOAT32, "float32 matmul 0.023 GFLOP/s is below a quarter of float64's 46 GFLOP/s"),
        (dict(f64=1e9), "float64 matmul 1 GFLOP/s is below an eighth of float32's 200 GFLOP/s"),
        (dict(f32=1e8, f64=1e8), "matmul 0.1 GFLOP/s is below 0.2 GFLOP/s"),
        (dict(copy=1e8), "copy 0.1 GB/s is outside 0.5 GB/s to 50 TB/s"),
        (dict(copy=1e14), "copy 1e+05 GB/s is outside 0.5 GB/s to 50 TB/s"),
        (dict(f32=1e10, f64=5e9), "float32 matmul 10 GFLOP/s is below a quarter of the copy's 60 GB/s"),
        (dict(copy=0.0), "copy is 0.0"),
        (dict(f32=float("nan")), "float32 matmul is nan"),
        (dict(launch=5e-3), "launch overhead 5000 µs is over 1 ms"),
    ],
)
def test_problems_name_what_is_implausible(implausible, said):
    assert host.problems(_figures()) == []
    assert said in host.problems(_figures(**implausible))


@pytest.mark.parametrize("implausible", [_BUSY_FLOAT32, dict(f64=1e9), dict(copy=1e8), dict(launch=5e-3)])
def test_an_implausible_set_is_measured_again(fake_measure, implausible):
    calls = fake_measure(_figures(**implausible), _figures())
    found = host.measured()
    # measured again, the trials pooled: each figure the faster of the two attempts'
    assert calls == ["cpu", "cpu"] and host.problems(found) == []
    assert (found["peak_flops"]["float32"], found["memory_bandwidth"], found["launch_overhead"]) == (2e11, 6e10, 1e-6)
    assert json.loads(host.cache_file().read_text()) == found


def test_a_set_that_stays_implausible_is_used_with_a_warning_and_measured_next_time(fake_measure):
    calls = fake_measure(_figures(**_BUSY_FLOAT32))
    with pytest.warns(UserWarning, match="implausible .float32 matmul 0.023 GFLOP/s.*using them for now"):
        found = host.measured()
    assert len(calls) == 3 and found["peak_flops"]["float32"] == 23e6  # three attempts
    assert json.loads(host.cache_file().read_text())["problems"]
    with pytest.warns(UserWarning):
        host.measured()
    assert len(calls) == 6  # not taken from the cache


@pytest.mark.parametrize(
    ("cached", "measured_again"),
    [
        (_figures(age=timedelta(days=6)), False),
        (_figures(age=timedelta(days=8)), True),  # older than MAX_AGE, 7 days
        (_figures(age=-timedelta(days=2)), True),  # taken "in the future": the clock says nothing
        ({k: v for k, v in _figures().items() if k not in ("format", "taken_at")}, True),  # an older format
        (_figures(**_BUSY_FLOAT32), True),
        # taken with the load average at 8.4 on 2 CPUs: kept an hour (BUSY_MAX_AGE), not 7 days
        (_figures(age=timedelta(hours=2), load_before=[8.4, 7.4, 4.4], cpus=2), True),
        (_figures(age=timedelta(hours=2), load_before=[0.3, 0.4, 0.4], cpus=2), False),
    ],
)
def test_a_stale_or_implausible_cache_is_measured_again(fake_measure, cached, measured_again):
    calls = fake_measure(_figures(f32=3e11))
    host.cache_file().parent.mkdir(parents=True)
    host.cache_file().write_text(json.dumps(cached))
    found = host.measured()
    assert (calls == ["cpu"]) == measured_again
    assert found["peak_flops"]["float32"] == (3e11 if measured_again else 2e11)
    assert host.measured(refresh=True)["peak_flops"]["float32"] == 3e11


def test_a_measurement_far_below_the_last_keeps_the_last(fake_measure):
    # the last plausible set is 8 days old; now the machine is busy: every figure a fifth of it, each plausible alone
    busy = _figures(f32=4e10, f64=1.8e10, bf16=8e10, copy=1.2e10)
    assert host.problems(busy) == []
    host.cache_file().parent.mkdir(parents=True)
    host.cache_file().write_text(json.dumps(_figures(age=timedelta(days=8))))
    calls = fake_measure(busy)
    with pytest.warns(UserWarning, match="float32 matmul 40 GFLOP/s is below half of .*using those of"):
        found = host.measured()
    assert len(calls) == 3 and found["peak_flops"]["float32"] == 2e11
    kept = json.loads(host.cache_file().read_text())
    assert kept["peak_flops"]["float32"] == 2e11 and kept["rejected"]["peak_flops"]["float32"] == 4e10
    assert host.measured()["peak_flops"]["float32"] == 2e11 and len(calls) == 3  # no new try for an hour


def test_measure_runs_for_real():
    # the real clock, briefly: only the shape of the answer, never this machine's speed
    found = host.measure("cpu", budget=0.02)
    assert set(found["peak_flops"]) == {"float32", "float64", "bfloat16"}
    figures = [*found["peak_flops"].values(), found["memory_bandwidth"], found["launch_overhead"]]
    assert all(math.isfinite(v) and v > 0 for v in figures) and found["trials"]["copy"][0]["seconds"]


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
    found = host.measure("cuda", budget=0.05)
    # the shape of the answer, not the card's speed; matmuls beyond the CPU's 1024 are tried
    assert found["device"] == "cuda" and all(v > 0 for v in found["peak_flops"].values())
    assert found["trials"]["float32"][-1]["work"] > 2 * 1024**3 and found["memory_bandwidth"] > 0


def test_one_spec_prices_the_ops_draws_the_roofs_and_times_the_links():
    # 1 GFLOP/s in float32 (the tiny matmuls compute-bound), 100 GB/s memory, no launch cost,
    # NVLink 2 GB/s both directions together: 1 GB/s a direction
    spec = devices.DeviceSpec("toy", {"float32": 1e9}, 1e11, launch_overhead=0.0, interconnect={"nvlink": 2e9})
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    fsdp = fxinspect.Parallel.fsdp(2, blocks=torch.nn.Linear)
    report = fxinspect.analyze(model, torch.randn(4, 16), backward=True, timing=False, parallel=fsdp, device_spec=spec)
    assert report.time_model is spec  # the report refers to the spec given, no copy of its figures
    first = next(n for n in report.nodes if n.label == "addmm")
    # 4×16 @ 16×32 + bias: 2*4*16*32 + 4*32 = 4224 FLOPs / 1e9 = 4.224 µs, above its
    # (4*16 + 16*32 + 32 + 4*32) * 4 = 2944 bytes / 1e11 = 29.4 ns
    assert (first.flops, first.bytes_moved) == (4224, 2944)
    assert first.predicted_latency == pytest.approx(4224 / 1e9)
    row = next(r for r in report.roofline() if r["node"] == first.name)
    assert (row["peak"], row["bound"], row["roof_time"]) == (1e9, "compute", pytest.approx(4224 / 1e9))
    # each Linear all-gathered for the forward and again for the backward, its gradient
    # reduce-scattered; of 2 ranks each sends half: (32*16 + 32) * 4 / 2 = 1088 and
    # (8*32 + 8) * 4 / 2 = 528 bytes, at 1 GB/s
    comm = report.communication
    assert sorted(c.wire_bytes for c in comm.collectives) == [528] * 3 + [1088] * 3
    assert all(c.predicted_time == c.wire_bytes / 1e9 for c in comm.collectives)
    assert comm.predicted_time == pytest.approx(3 * (1088 + 528) / 1e9)  # 4.848 µs
    back = fxinspect.Report.from_json(report.to_json())
    assert back.time_model == spec and back == report


@pytest.mark.parametrize(
    ("peaks", "said"),
    [({"bfloat16": 1e12}, r"needs a float32 figure .* got \['bfloat16'\]"), ({}, r"float32 figure .* got \[\]")],
)
def test_a_spec_without_float32_is_refused_when_made(peaks, said):
    with pytest.raises(ValueError, match=said):
        devices.DeviceSpec("toy", peaks, 1e11)


def test_measured_matmul_rates_price_float32_2d_matmuls():
    # points (0.5 FLOP/B, 5 GFLOP/s), (8, 20), (170, 80): between the first two the rate
    # grows as the square root of the intensity (×4 over ×16, in log-log)
    spec = devices.DeviceSpec(
        "toy", {"float32": 1e11}, 2e10, launch_overhead=2e-6, matmul_rates=[(8.0, 2e10), (0.5, 5e9), (170.0, 8e10)]
    )
    assert spec.matmul_rate(0.25) == pytest.approx(2.5e9)  # below the first point: its 10 GB/s
    assert spec.matmul_rate(2.0) == pytest.approx(1e10)  # 5e9 · sqrt(2 / 0.5)
    assert (spec.matmul_rate(8.0), spec.matmul_rate(1000.0)) == (2e10, 8e10)
    # 2 GFLOP over 1 GB: 0.2 s at 10 GFLOP/s; the roofline's max(2e9 / 1e11, 1e9 / 2e10) = 0.05 s elsewhere
    assert spec.work_seconds("aten.mm.default", 2e9, 1e9, "float32") == pytest.approx(0.2)
    assert spec.work_seconds("aten.addmm.default", 2e9, 1e9, None) == pytest.approx(0.2)
    assert spec.work_seconds("aten.mm.default", 2e9, 1e9, "bfloat16") == pytest.approx(0.05)
    assert spec.work_seconds("aten.bmm.default", 2e9, 1e9, "float32") == pytest.approx(0.05)
    assert spec.work_seconds("aten.add.Tensor", 2e9, 1e9, "float32") == pytest.approx(0.05)
    # a Linear(64, 32) on 4 rows: addmm of 2·4·64·32 + 4·32 = 16,512 FLOPs over
    # (4·64 + 64·32 + 32 + 4·32) · 4 = 9,856 bytes, 1.6753 FLOPs a byte: 5e9 · sqrt(1.6753 / 0.5)
    # = 9.152 GFLOP/s, 1.804 µs, and a launch of 2 µs
    report = fxinspect.analyze(torch.nn.Linear(64, 32), torch.randn(4, 64), timing=False, device_spec=spec)
    assert report.totals.predicted_latency == pytest.approx(16_512 / (5e9 * (16_512 / 9_856 / 0.5) ** 0.5) + 2e-6)
