"""``benchmarks/gpu_check.py``, the prepared GPU check, on this CPU: its no-GPU exit, its
tiny run's JSON and table, and its pure parts against hand-computed figures."""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fxinspect

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPT = BENCHMARKS / "gpu_check.py"


@pytest.fixture
def bench(monkeypatch):
    """The script's modules, imported as it imports them (its folder on the path)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("gpu_check"), importlib.import_module("gpu_check_stats")


def _run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_without_cuda_it_says_so_and_exits_0(tmp_path):
    done = _run(cwd=tmp_path, env={"CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr
    assert "no GPU here" in done.stdout
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize(
    "workloads",
    [
        "vit_b_16-train",  # a training step under autocast (about 5 s)
        pytest.param("", marks=pytest.mark.slow),  # all eight, the steps whose inputs hold a cache among them
    ],
)
def test_the_tiny_cpu_run_writes_every_field(tmp_path, bench, workloads):
    gpu_check, _ = bench
    out = tmp_path / "check.json"
    done = _run(
        "--device", "cpu", "--tiny", "--out", str(out), "--repeats", "3", "--workloads", workloads, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    names = workloads.split(",") if workloads else [w.name for w in gpu_check.WORKLOADS]
    assert [row["workload"] for row in result["workloads"]] == names
    assert set(result["goals"]) == {
        "calibrated median error",
        "calibrated p90 error",
        "datasheet worst factor",
        "memory worst error",
    }
    assert "workload / op class" in done.stdout and "calibrated median error" in done.stdout
    for row in result["workloads"]:
        assert row["error"] is None, row["error"]
        assert row["workload"] in done.stdout
        for spec in ("datasheet", "calibrated"):
            assert math.isfinite(row["ratio"][spec]) and row["ratio"][spec] > 0, (row["workload"], spec)
            assert row["predicted_s"][spec] == pytest.approx(sum(c[f"{spec}_s"] or 0 for c in row["classes"].values()))
        assert row["classes"] and all(c["measured_s"] is None or c["measured_s"] > 0 for c in row["classes"].values())
        assert row["measured_min_max_s"][0] <= row["measured_s"] <= row["measured_min_max_s"][1]
        memory = row["memory"]
        assert memory["estimate_blocks"] == memory["estimate"]  # (on a CPU: no caching allocator's blocks)
        # the estimate against the CPU allocator's own events (torch.profiler): exact on these models
        # to within a few bytes, as docs/reference.md states for the memory model
        assert memory["ratio"] == pytest.approx(1, abs=0.01), row["workload"]


@pytest.mark.slow
def test_the_full_size_workloads_are_the_published_models(bench):
    """At full size (built on meta: nothing allocated), each model has its published
    parameter count and the step its inputs' shapes; the decode step's cache holds 1,024 tokens."""
    from gpu_check_workloads import WORKLOADS

    params = {  # torchvision's and the model cards' counts
        "resnet50": 25_557_032,
        "vit_b_16": 86_567_656,
        "bert": 109_482_240,
        "gpt2": 354_823_168,  # GPT-2 medium, its head tied to the embedding
        "llama": 1_235_814_400,  # Llama-3.2-1B
    }
    inputs_of = {
        "resnet50-train": [64, 3, 224, 224],
        "vit_b_16-train": [64, 3, 224, 224],
        "resnet50-infer": [64, 3, 224, 224],
        "bert-infer": [32, 128],
        "gpt2-medium-train": [8, 1024],
        "llama-prefill": [8, 1024],
        "llama-decode": [8, 1],
        "llama-1b-train": [4, 1024],
    }
    for work in WORKLOADS:
        model, inputs, _ = work.build(False, torch.device("meta"))
        kind = next(k for k in params if work.name.startswith(k))
        assert sum(p.numel() for p in model.parameters()) == params[kind], work.name
        first = inputs["input_ids"] if isinstance(inputs, dict) else inputs[0]
        assert list(first.shape) == inputs_of[work.name], work.name
        if work.name == "llama-decode":
            assert inputs["cache"].get_seq_length() == 1024


def test_predicted_classes_price_every_call_as_the_report_does(bench):
    """A Linear(4096, 4096) on 64 rows on the H100 preset, as ``timemodel/pricing.py``'s
    example computes it by hand: addmm (2*64*4096*4096 + 64*4096) FLOPs / 67e12 = 32.06 us
    (over 69.2 MB / 3.35e12 = 20.7 us), + 5 us launch = 37.06 us, all of it a matmul."""
    gpu_check, _ = bench
    report = fxinspect.analyze(torch.nn.Linear(4096, 4096), torch.randn(64, 4096), timing=False, device_spec="h100-sxm")
    found = gpu_check.predicted_classes(report, fxinspect.devices.get("h100-sxm"))
    assert set(found) == {"gemm"} and found["gemm"] * 1e6 == pytest.approx(37.06, abs=0.01)


def test_predicted_classes_sum_to_the_reports_forward_and_backward(bench):
    gpu_check, _ = bench
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Flatten())
    report = fxinspect.analyze(model, torch.randn(2, 3, 8, 8), timing=False, backward=True, device_spec="a100-80gb")
    found = gpu_check.predicted_classes(report, fxinspect.devices.get("a100-80gb"))
    totals = report.totals
    assert {"conv", "batch_norm", "elementwise"} <= set(found)
    assert sum(found.values()) == pytest.approx(totals.predicted_latency + totals.backward_predicted_latency)


@pytest.mark.parametrize(
    "op, kind",
    [
        # (each op as the report names it or as the profiler names its kernel, in the calibration's classes)
        ("aten.addmm.default", "gemm"),
        ("aten::mm", "gemm"),
        ("aten.bmm.default", "bmm"),
        ("aten::cudnn_convolution", "conv"),
        ("aten.convolution_backward.default", "conv"),
        ("aten::cudnn_convolution_backward", "conv"),
        ("aten._scaled_dot_product_flash_attention.default", "attention"),
        ("aten::_efficient_attention_backward", "attention"),
        ("aten::native_layer_norm_backward", "layer_norm"),
        ("aten.native_batch_norm.default", "batch_norm"),
        ("aten::cudnn_batch_norm", "batch_norm"),
        ("aten::_log_softmax", "reduction"),
        ("aten.sum.dim_IntList", "reduction"),
        ("aten::max_pool2d_with_indices", "pool"),
        ("aten::_to_copy", "elementwise"),
        ("aten.embedding.default", "index"),
        ("aten.cat.default", "elementwise"),
        ("aten.mul.Tensor", "elementwise"),
        ("aten::gelu_backward", "activation"),
    ],
)
def test_op_class(bench, op, kind):
    _, stats = bench
    assert stats.op_class(op) == kind


@pytest.mark.parametrize(
    "nbytes, block",
    [
        (0, 0),
        (1, 512),
        (512, 512),
        (513, 1024),
        (4000, 4096),
        (2**20 + 1, 2**20 + 512),
    ],  # 4000: 7 * 512 < 4000 <= 8 * 512
)
def test_allocator_block(bench, nbytes, block):
    _, stats = bench
    assert stats.allocator_block(nbytes) == block


def test_rounded_peak(bench):
    _, stats = bench
    assert stats.rounded_peak([4000, 1, 512, 0]) == 5120  # 4096 + 512 + 512 + 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA caching allocator needs a GPU")
@pytest.mark.parametrize("nbytes", [1, 513, 4000, 3 * 2**20 + 7, 10 * 2**20 + 1, 23 * 2**19])
def test_allocator_block_is_the_caching_allocators(bench, nbytes):
    _, stats = bench
    torch.cuda.empty_cache()  # (a fresh segment: a cached block might be handed out unsplit)
    before = torch.cuda.memory_allocated()
    t = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    assert torch.cuda.memory_allocated() - before == stats.allocator_block(nbytes)
    del t


def test_error_statistics(bench):
    _, stats = bench
    # errors |r - 1| = 0.05, 0.01, 0.30, 0.10, 0.02; sorted 0.01 0.02 0.05 0.10 0.30:
    # median rank 2 -> 0.05; p90 rank 0.9 * 4 = 3.6 -> 0.10 + 0.6 * (0.30 - 0.10) = 0.22 (numpy's default)
    got = stats.error_stats([1.05, 0.99, 1.30, 0.90, 1.02, None])
    assert got == {"median": pytest.approx(0.05), "p90": pytest.approx(0.22), "n": 5}
    assert stats.error_stats([None]) is None
    assert stats.percentile([3.0], 0.9) == 3.0


def test_goals(bench):
    _, stats = bench
    calibrated = [1.05, 0.99, 1.30, 0.90, 1.02]
    datasheet = [1.2, 0.7, 1.4, 1.0, 1.1]  # worst: 1 / 0.7 = 1.43
    memory = [1.01, 0.98, 1.0, 1.02, 0.995]  # worst: 0.02
    rows = [
        {"ratio": {"calibrated": c, "datasheet": d}, "memory": {"ratio": m}}
        for c, d, m in zip(calibrated, datasheet, memory)
    ]
    rows.append({"ratio": {"calibrated": None, "datasheet": None}, "memory": {"ratio": None}})  # (no figures)
    got = stats.goals(rows)
    assert {k: v["met"] for k, v in got.items()} == {
        "calibrated median error": True,  # 0.05 <= 0.10
        "calibrated p90 error": False,  # 0.22 > 0.20
        "datasheet worst factor": True,  # 1.43 <= 1.5
        "memory worst error": True,  # 0.02 <= 0.03
    }
    assert got["datasheet worst factor"]["value"] == pytest.approx(1 / 0.7)
    assert all(v["met"] is None and v["value"] is None for v in stats.goals([]).values())


def test_table_and_goal_lines(bench):
    _, stats = bench
    rows = [
        {
            "workload": "w",
            "measured_s": 0.0125,
            "ratio": {"datasheet": 0.8, "calibrated": None},
            "memory": {"estimate_blocks": 3 * 2**20, "measured": 3 * 2**20, "ratio": 1.0},
            "classes": {"matmul": {"measured_s": 0.01, "ratio": {"datasheet": 0.75, "calibrated": None}}},
        },
        {"workload": "x", "error": "RuntimeError: boom"},
    ]
    head, rule, row, matmul, failed = stats.table(rows).splitlines()
    assert row.split() == ["w", "12.50", "ms", "0.80", "—", "3.0", "MiB", "3.0", "MiB", "1.000"]
    assert len(row) == len(head) == len(rule)  # (a missing ratio keeps its column's width)
    assert matmul.split() == ["matmul", "10.00", "ms", "0.75", "—"]
    assert failed.split() == ["x", "RuntimeError:", "boom"]
    lines = stats.goal_lines(stats.goals(rows[:1]))
    assert [line.split()[0] for line in lines] == ["n/a", "n/a", "PASS", "PASS"]  # no calibrated ratio; 1.25; 0.0
