"""A time model: receptive fields, the roofline and each op's predicted runtime.

Run: ``python examples/time_model.py [OUT_DIR]`` (writes the PNGs named below).

``analyze(model, inputs, device_spec=...)`` prices every aten op a node runs under the
roofline of a device: ``max(FLOPs / peak, bytes moved / bandwidth)`` plus a launch
overhead per call. ``device_spec`` is a preset of ``fxinspect.devices`` (datasheet dense
peaks: ``"a100-80gb"``, ``"h100-sxm"``, ``"mi300x"``, ... or a driver's device name) or
``"measured"``: this host's matmul FLOP/s, copy bandwidth and launch overhead, measured
in about two seconds, checked and cached for 7 days (below). Each node gets
``predicted_latency``, summed into modules and totals as ``latency`` is;
``report.roofline()`` gives each op's intensity, bound, roof time and, when timing ran,
the fraction of its roof it reached (an op faster than its roof is flagged, never shown
over 100 %); ``report.plot_roofline(path)`` draws it.
No run is needed for the prediction: on the meta device, a model too large for this
machine gets its H100 time. The image models also get their receptive fields.

**The measured spec** (``fxinspect.timemodel.host``) is taken on first use: matmul
FLOP/s for float32, float64 and bfloat16 (square matmuls of n = 128, 256, 512 and 1024, up
to 8192 on CUDA, fewer where a dtype is slow; one call per trial), memory bandwidth (a
64 MiB copy, its bytes read and written) and launch overhead (a batch of 100 ops on
one-element tensors, per op). Each figure is the *best* of its trials (at least 5 per
size, about 0.1 s each), not their median: another process can only slow a trial down,
so the fastest is the one closest to what the machine can do, where a median follows
the load (one busy host read 4.5 to 102 GFLOP/s between repeats, once float32 at 23
MFLOP/s, which made this page's example predict 353 s for a 4 s forward).

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
