"""Analyse torchvision's ResNet-18 (random weights) and print what fxinspect sees.

Run: ``python examples/demo.py``  (the README's first command ends with this)
"""

import torch
import torchvision

import fxinspect


def main() -> None:
    model = torchvision.models.resnet18(weights=None).eval()
    image = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        report = fxinspect.analyze(model, image, repeats=5)
    print(report.table(by="module", depth=2))
    print()
    print(report.table(by="op", sort="flops"))
    print()
    print(report)


if __name__ == "__main__":
    main()
