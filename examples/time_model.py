"""A time model: receptive fields, the roofline and each op's predicted runtime.

Run: ``python examples/time_model.py [OUT_DIR]`` (writes the PNGs named below).

``analyze(model, inputs, device_spec=...)`` prices every aten op a node runs under the
roofline of a device: ``max(FLOPs / peak, bytes moved / bandwidth)`` plus a launch
overhead per call. ``device_spec`` is a preset of ``fxinspect.devices`` (datasheet dense
peaks: ``"a100-80gb"``, ``"h100-sxm"``, ``"mi300x"``, ... or a driver's device name) or
``"measured"``: this host's matmul FLOP/s, copy bandwidth and launch overhead, measured
in about two seconds, and the share of them each kernel class reaches, calibrated in 10
to 30 s, checked and cached for 7 days (below). Each node gets
``predicted_latency``, summed into modules and totals as ``latency`` is;
``report.roofline()`` gives each op's intensity, bound, roof time and, when timing ran,
the fraction of its roof it reached (an op faster than its roof is flagged, never shown
over 100 %); ``report.plot_roofline(path)`` draws it.
No run is needed for the prediction: on the meta device, a model too large for this
machine gets its H100 time. The image models also get their receptive fields.

**The measured spec** (``fxinspect.timemodel.host``) is taken on first use: matmul
FLOP/s for float32, float64 and bfloat16 (square matmuls of n = 128, 256, 512 and 1024, up
to 8192 on CUDA, fewer where a dtype is slow; one call per trial), memory bandwidth (a
64 MiB copy, its bytes read and written, its source's pages written first: untouched
pages all map to one zero page, read from the cache, which made the copy read 34 GB/s
on a host that streams 14) and launch overhead (a decoder block's module code on one
token, per aten call the model prices in it: on a CPU an eager model's op costs its
Python, module call and views beside its launch, 4.7 µs here where a bare op in a tight
loop takes 1.1 µs). On a CPU it also times float32 matmuls as a Linear runs them
(``x @ w.T``) over a 64 MiB weight, for 1 to 128 rows of ``x``: their FLOP/s against
their FLOPs per byte, with the largest square matmul's, are the spec's ``matmul_rates``,
which price each float32 ``mm``/``addmm`` at the rate interpolated for its intensity
(log-log; below the first point, at its bytes/s) instead of the roofline. A decode step's
matmuls have one row per sequence and run far from both roofs: one row reads the
weight at 8–11 GB/s, 2 to 8 rows take a large matmul's path and read it at 2–4 GB/s
on this host, where the roofline said 34 GB/s (``benchmarks/generation_time.py``; the
forwards of ``benchmarks/time_model.py``, one thread, moved from predicted ÷ measured
0.50 / 0.53 / 0.32 / 0.42 / 0.53 to 0.52 / 0.81 / 0.33 / 0.89 / 1.27 for ResNet-50,
ViT-B/16, MobileNetV3, GPT-2 and BERT-base, their Linears now priced at the rate a Linear
reaches). Generation (``benchmarks/generation_time.py``, one thread, three decoders of
hidden 768–1024 and vocabulary 32,000, prompt 128): TTFT 0.80–1.07 and TPOT at batch 8
0.81–0.90 of a real ``generate()``, but TPOT at batch 1 only 0.44–0.56: what the model
leaves out there is Python, not work (a Hugging Face layer's module code costs about
twice the probe's 4.7 µs per call, and ``generate()``'s own loop, outside the model's
graph, about 1.5 ms and 19 ns per logit a step), and a busy host moves every figure by
up to a factor of two. Each figure is the *best* of its trials (at least 5 per
size, about 0.1 s each), not their median: another process can only slow a trial down,
so the fastest is the one closest to what the machine can do, where a median follows
the load (one busy host read 4.5 to 102 GFLOP/s between repeats, once float32 at 23
MFLOP/s, which made this page's example predict 353 s for a 4 s forward).

**Calibrated kernel classes** (``fxinspect.devices.calibrate(device=None, budget_s=60,
refresh=False)``, which ``"measured"`` is): the roofs say what a device can do at best;
a depthwise convolution, a small elementwise op or a batch norm reaches a fraction of
them (or, its data in a cache, more than the copy bandwidth), which the roofline alone
cannot know: MobileNetV3 was predicted at 0.33 of its measured forward. So the
calibration times a few representative calls of each kernel class
(``fxinspect.timemodel.kernel_classes.kernel_class(op)``, the one place that maps an
aten op to its class: GEMMs, batched GEMMs, convolutions, attention, elementwise ops,
transcendental activations, reductions and softmax, layer norm, batch norm, pooling,
lookups and random numbers (dropout's mask); a backward in its forward's class): GEMMs from one row to 1024 over weights
that outgrow the caches, convolutions depthwise (3×3 to 7×7), grouped (4 to 32
channels a group) and dense (1×1, 3×3, the stems), and the backwards of some of each,
attention over 16 to 256 positions, the streaming classes from 4 KiB to 40 MiB a call,
batch norm in eval and in training (``fxinspect.timemodel.kernel_probes``). Before each
trial 64 MiB (256 MiB on a GPU) are written, so that the call reads its inputs and
weights from memory as a model's layer does, not from a cache that kept them since the
last trial (measured warm, the probes put MobileNetV3's convolutions at 0.6 of their
time). Each call's FLOPs and bytes are counted by the
same rules as a model's, so its roofline time is the pricing's; its *efficiency* is that
time over the call's best trial, less a bare aten call (the pricing adds the launch
overhead). Per class the efficiencies form a curve over FLOPs per byte (GEMMs,
convolutions, attention: a depthwise 3×3 convolution does about 2.25, a dense one on
64 channels about 130) or over bytes per call (the others). What an op's name does not
tell, its arguments do, and the counting keeps it on each call as its ``kind``
(``AtenCall.kind``, ``fxinspect.rules.kinds``): a convolution's ``"depthwise"``,
``"grouped"`` or ``"dense"``, each a curve of its own, forward and backward (a 7×7
depthwise convolution does about 12 FLOPs per byte, as a 1×1 on 16 channels does, and
runs at half its share here), and a batch norm's ``"train"`` (its batch's statistics:
a pass more). The curves price each op: its
roofline time over the efficiency interpolated in log-log at its own measure, plus the
launch overhead; beyond the measured points, the nearest one's (the GEMM curve prices a
model's matmuls in place of ``matmul_rates``, which still price the serving step times
of ``fxinspect.serving``). The trials run in passes
over all the workloads, a few each, until a pass improves no best by a tenth or half the
budget is spent (about 30 to 60 s here), so that a burst of load slows some trials
of each workload, not all of one. The set is checked (every class and kind measured, every
efficiency between 1/10,000 and 100, a bare call under 1 ms), measured again up to three
times with the trials pooled, and cached beside the roofs in
``calibration-<key>.json`` with when and how it was taken, the roofs it is relative to
and every trial; an older format, a stale or an implausible file is measured again. The
spec's ``source`` says when and how both were taken. A calibration taken on one GPU
prices another of the same architecture family by the ratios of their datasheet roofs,
its efficiencies kept: ``fxinspect.devices.scaled_to(spec, "h200")`` (the reference,
the card it was measured on, found from the spec's name; ``DeviceSpec.scaled_to(target,
reference)`` with specs). Across families the kernels differ and so do their
efficiencies: measure there. The workloads run in float32; an op of another dtype is
priced at the same share of that dtype's peak. Specs without curves, the presets, are priced as before.

**Checked** (``host.problems``): every figure finite and positive; float32 at
least a quarter of float64 (never far below it on a CPU or a GPU), float64 at least an
eighth of float32 on a CPU (1/128 on a GPU); float32 and float64 at least 0.2 GFLOP/s;
the copy between 0.5 GB/s and 50 TB/s, and float32's FLOP/s at least a quarter of its
bytes/s; launch overhead under 1 ms; and no figure below half of the previous plausible
measurement of this host (launch overhead: not above twice). A set that fails is
measured again, up to three times, the trials pooled. One that still fails is not kept
as the figures: the previous plausible set is used, with a warning naming what failed,
and no new attempt is made for an hour; with no previous set the implausible one is
used for that run, with the warning, and measured again next time.

**Cached** in one JSON file per host, processor, torch version, thread count and device:
``$XDG_CACHE_HOME/fxinspect/device-<key>.json`` (``~/.cache/fxinspect/`` when
``XDG_CACHE_HOME`` is unset; ``host.cache_file("cpu")`` gives the path). It
records when and how the figures were taken: ``taken_at`` (UTC), ``torch``, ``threads``,
``cpus``, the load average before (``load_before``), the ``budget``, and under ``trials``
every trial's seconds with the work of one (FLOPs, bytes or ops), per size; ``rejected``
holds the last implausible set and its ``problems``. The figures are measured again
when the file is **older than 7 days** (``host.MAX_AGE``), of an older format,
or implausible, and **after an hour** (``BUSY_MAX_AGE``) when the load average was above
the CPUs the process may use as they were taken: a machine busy alike through all the
trials slows every figure alike, which no check sees. ``fxinspect.timemodel.host.measured(refresh=True)`` measures now (on a
quiet machine); ``device_spec="measured"`` then uses those figures. Deleting the file
starts afresh, with no previous set to compare with. The spec's ``source`` says when and
how its figures were taken.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torchvision

import fxinspect


def main(out_dir: Path = Path(".")) -> str:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    lines = []
    resnet = torchvision.models.resnet50(weights=None).eval()
    with torch.no_grad():
        measured = fxinspect.analyze(resnet, torch.randn(1, 3, 224, 224), device_spec="measured", memory=False)
    measured.plot_roofline(out_dir / "resnet50_roofline.png")
    lines.append(measured.table(depth=1, columns=["name", "flops", "latency", "predicted", "receptive_field"]))
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=12)).eval()
    ids = {"input_ids": torch.randint(0, 50257, (8, 1024))}
    with torch.no_grad():  # on meta: no weights allocated, no run; the H100's roofs
        h100 = fxinspect.analyze(gpt2, ids, device="meta", device_spec="NVIDIA H100 80GB HBM3", memory=False)
    h100.plot_roofline(out_dir / "gpt2_h100_roofline.png", color_by="op")
    bound = {}
    for row in h100.roofline():
        if row["bound"]:
            bound[row["bound"]] = bound.get(row["bound"], 0.0) + row["roof_time"]
    lines.append(
        f"GPT-2 (12 layers), batch 8 x 1024 tokens on an H100 SXM: predicted forward "
        f"{h100.totals.predicted_latency * 1e3:.2f} ms; roof time compute-bound {bound['compute'] * 1e3:.2f} ms, "
        f"memory-bound {bound['memory'] * 1e3:.2f} ms"
    )
    text = "\n\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))
