"""Exports and comparisons: JSON both ways, CSV, pandas, networkx, and a diff of two reports.

Run: ``python examples/exports.py``.

``report.to_json(path)`` writes the whole report; ``fxinspect.Report.from_json(path)``
reads back an equal one. ``to_json(path, layout="nested")`` writes the module tree
(model -> fields and children). ``to_csv(path, by="node"|"module")`` needs nothing
else; ``to_dataframe(by=...)`` needs pandas. ``to_networkx(by="node"|"module",
depth=)`` is the dataflow graph. ``report.diff(other)`` matches modules by path:
ResNet-18 against ResNet-34 here.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch
import torchvision

import fxinspect


def main(out_dir: Path = Path(".")) -> str:
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        small = fxinspect.analyze(torchvision.models.resnet18(weights=None).eval(), x, timing=False, memory=False)
        large = fxinspect.analyze(torchvision.models.resnet34(weights=None).eval(), x, timing=False, memory=False)
    folder = Path(tempfile.mkdtemp())
    small.to_json(folder / "r18.json")
    back = fxinspect.Report.from_json(folder / "r18.json")
    tree = json.loads(small.to_json(layout="nested"))["model"]
    csv_head = small.to_csv(by="module").splitlines()[0]
    graph = small.to_networkx(by="module", depth=1)
    parts = [
        f">>> fxinspect.Report.from_json(path) == report\n{back == small}",
        f'>>> tree = json.loads(report.to_json(layout="nested"))["model"]; tree["type"], len(tree["children"])\n'
        f"{(tree['type'], len(tree['children']))}",
        f'>>> report.to_csv(by="module").splitlines()[0][:90]\n{csv_head[:90]!r}',
        f'>>> g = report.to_networkx(by="module", depth=1); list(g.successors("input")), g.nodes["layer1"]["flops"]\n'
        f"{(list(graph.successors('input')), graph.nodes['layer1']['flops'])}",
        ">>> print(small.diff(large).table(depth=1))",
        small.diff(large).table(depth=1),
    ]
    text = "\n".join(parts)
    print(text)
    return text


if __name__ == "__main__":
    main()
