"""A time model: receptive fields, the roofline and each op's predicted runtime.

Run: ``python examples/time_model.py [OUT_DIR]`` (writes the PNGs named below).

``analyze(model, inputs, device_spec=...)`` prices every aten op a node runs under the
roofline of a device: ``max(FLOPs / peak, bytes moved / bandwidth)`` plus a launch
overhead per call. ``device_spec`` is a preset of ``fxinspect.devices`` (datasheet dense
peaks: ``"a100-80gb"``, ``"h100-sxm"``, ``"mi300x"``, ... or a driver's device name) or
``"measured"``: this host's matmul FLOP/s, copy bandwidth and launch overhead, measured
in a few seconds and cached. Each node gets ``predicted_latency``, summed into modules
and totals as ``latency`` is; ``report.roofline()`` gives each op's intensity, bound,
roof time and, when timing ran, the fraction of its roof it reached (an op faster than
its roof is flagged, never shown over 100 %); ``report.plot_roofline(path)`` draws it.
No run is needed for the prediction: on the meta device, a model too large for this
machine gets its H100 time. The image models also get their receptive fields.
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
    h100.plot_roofline(out_dir / "gpt2_h100_roofline.png", colour_by="op")
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
