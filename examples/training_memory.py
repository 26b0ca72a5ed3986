"""Memory of a training step: what is held, when, and what makes the peak.

Run: ``python examples/training_memory.py [OUT_DIR]`` (writes ``resnet50_training_memory.png``).

torchvision's ResNet-50 (random weights, train mode, batch 2) is analysed with
``backward=True`` and ``optimizer=torch.optim.AdamW``: one forward and backward under
the memory model, beside the CPU allocator's measurement of the same run. The summary
gives the peak, the node where it falls, what is alive then, the bytes autograd saves
for the backward (each storage once), the gradients and the optimizer's state; the
figure is the timeline.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torchvision

import fxinspect


def main(out_dir: Path = Path(".")) -> str:
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).train()
    report = fxinspect.analyze(
        model,
        torch.randn(2, 3, 224, 224),
        timing=False,
        backward=True,
        optimizer=torch.optim.AdamW,
        measure_memory=True,  # the allocator's measurement beside the estimate (one more run)
    )
    report.plot_memory(out_dir / "resnet50_training_memory.png")
    text = "\n".join(
        [
            str(report),
            "",
            report.table(depth=1, columns=["name", "type", "flops", "backward_flops", "output_bytes", "saved_bytes"]),
        ]
    )
    print(text)
    return text


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))
