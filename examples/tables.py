"""Tables: every module, op type and op node, with a totals row.

Run: ``python examples/tables.py``.

``report.table(by="module"|"op"|"node", depth=, columns=, sort=, top=, fold=, zeros=,
width=)``: modules in model order (runs of identical blocks folded into one row by
structure, ``fold=False`` unfolds them), op types (those that cost nothing counted in a
footnote, ``zeros=True`` lists them) or op nodes in graph order. Columns and ``sort``
keys are the names in ``fxinspect.views.columns.Column``; tables fit 100 characters
unless ``width=None``. ``print(report)`` is the summary. torchvision's ResNet-18,
random weights, eval mode, batch 1:
"""

from __future__ import annotations

from pathlib import Path

import torch
import torchvision

import fxinspect


def main(out_dir: Path = Path(".")) -> str:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    with torch.no_grad():
        report = fxinspect.analyze(model, torch.randn(1, 3, 224, 224), timing=False)
    parts = [
        ">>> print(report)",
        str(report),
        "",
        ">>> print(report.table(depth=2))",
        report.table(depth=2),
        "",
        '>>> print(report.table(by="op", sort="flops"))',
        report.table(by="op", sort="flops"),
        "",
        '>>> print(report.table(by="node", sort="macs", top=5, columns=["name", "op", "inputs", "outputs", "macs"]))',
        report.table(by="node", sort="macs", top=5, columns=["name", "op", "inputs", "outputs", "macs"]),
    ]
    text = "\n".join(parts)
    print(text)
    return text


if __name__ == "__main__":
    main()
