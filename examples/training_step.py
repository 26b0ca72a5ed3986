"""Backward and your own training step: per-node gradients, backward FLOPs and time.

Run: ``python examples/training_step.py``.

``analyze(model, x, backward=True, loss_fn=...)`` runs one backward too: per node its
backward FLOPs, MACs and bytes (attributed through autograd's sequence numbers), the
shapes and statistics of the gradients reaching its outputs, its backward latency, and
where NaN/Inf first appeared in the gradients. ``with fxinspect.inspect(model) as ins:``
around your own unchanged step gives the same figures of what actually ran; your
gradients and optimizer step are the real ones. A small CNN on random data:
"""

from __future__ import annotations

from pathlib import Path

import torch

import fxinspect


def net() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(16 * 16 * 16, 10),
    )


def main(out_dir: Path = Path(".")) -> str:
    torch.manual_seed(0)
    model, x, y = net().train(), torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    loss_fn = torch.nn.CrossEntropyLoss()
    report = fxinspect.analyze(model, x, backward=True, loss_fn=lambda out: loss_fn(out, y), repeats=5, memory=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with fxinspect.inspect(model) as ins:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    columns = ["name", "op", "outputs", "gradients", "flops", "backward_flops"]
    parts = [
        '>>> print(report.table(by="node"))',
        report.table(by="node"),
        "",
        f">>> ins.report.totals.backward_flops == report.totals.backward_flops\n"
        f"{ins.report.totals.backward_flops == report.totals.backward_flops}",
        f'>>> print(ins.report.table(by="node", columns={columns}))',
        ins.report.table(by="node", columns=columns),
    ]
    text = "\n".join(parts)
    print(text)
    return text


if __name__ == "__main__":
    main()
