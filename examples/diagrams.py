"""Diagrams and charts: the dataflow of a model, collapsed to modules, repeated blocks folded.

Run: ``python examples/diagrams.py [OUT_DIR]`` (writes the PNGs named below).

``report.plot(path, depth=..., color_by=...)`` draws a report with no Graphviz (PNG and
SVG are painted with Pillow, which matplotlib brings; ``report.plot()`` with no path
returns a matplotlib Figure to adjust): boxes are modules cut to ``depth`` (every op at
``depth=None``), runs of identical blocks are folded into one box whose figures are
their sum, boxes are laid out in layers along the dataflow and coloured by a figure
(``flops``, ``macs``, ``bytes``, ``latency``, ``memory``, ``backward_flops``,
``nonfinite``). A module's own ops (a reshape, a residual add) sit in boxes of their own
where they run. Each edge names the shape and dtype of what it carries (``1×64×56×56
float32``), as the explorer's edges do, in the gap below the box it leaves, once for a
box's edges that carry the same (``edge_labels=False`` draws the edges bare). The same
report gives the same file, byte for byte.
``report.plot_breakdown(metric, by="module"|"op")`` shows where a figure goes as sorted
bars: the largest parts, then the rest as one bar.
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
    image = torch.randn(1, 3, 224, 224)
    mlp = torch.nn.Sequential(
        torch.nn.Linear(16, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.GELU(),
        torch.nn.Linear(64, 10),
        torch.nn.Softmax(dim=-1),
    )
    drawings = [  # (file, model, inputs, options)
        ("mlp_ops.png", mlp, torch.randn(8, 16), {"depth": None}),
        ("resnet50_depth1.png", torchvision.models.resnet50(weights=None), image, {"depth": 1, "direction": "LR"}),
        ("resnet50_depth2.png", torchvision.models.resnet50(weights=None), image, {"depth": 2}),
        ("vit_b_16_depth2.png", torchvision.models.vit_b_16(weights=None), image, {"depth": 2}),
        (
            "gpt2_depth2.png",
            GPT2LMHeadModel(GPT2Config()),
            {"input_ids": torch.randint(0, 50257, (1, 128))},
            {"depth": 2},
        ),
    ]
    lines = [f"{'file':22} {'boxes':>5}  {'FLOPs':>9}"]
    for name, model, inputs, options in drawings:
        with torch.no_grad():
            report = fxinspect.analyze(model.eval(), inputs, timing=False, memory=False)
        report.plot(out_dir / name, **options)
        boxes = report.to_networkx(by="diagram", depth=options["depth"]).number_of_nodes()
        lines.append(f"{name:22} {boxes:5d}  {report.totals.flops / 1e9:8.2f} G")
        if name.startswith("gpt2"):
            report.plot_breakdown("bytes", out_dir / "gpt2_bytes_by_op.png", by="op", top=8)
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))
