"""Capture tiers: how a model becomes a graph, and what the report says about it.

Run: ``python examples/capture_tiers.py``.

``method="auto"`` tries ``symbolic`` (torch.fx tracing: torch-level nodes), then
``export`` (``torch.export``, non-strict: aten-level nodes, most Hugging Face models),
then ``eager`` (the aten ops one real run executed: always works, one path).
``report.capture`` says which tier ran and why the earlier ones did not; any tier can be
asked for by name. Three small models, one per tier:
"""

from __future__ import annotations

from pathlib import Path

import torch

import fxinspect


class Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.fc(x)) + x


class Branchy(Plain):
    def forward(self, x):  # a branch on a size: symbolic tracing cannot decide it, export can
        return self.fc(x) if x.size(0) > 1 else -x


class Dynamic(Plain):
    def forward(self, x):  # a loop whose length depends on the data: only a real run knows it
        for _ in range(int(x.abs().sum().item()) % 3 + 1):
            x = torch.relu(self.fc(x))
        return x


def main(out_dir: Path = Path(".")) -> str:
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    parts = []
    for model in (Plain(), Branchy(), Dynamic()):
        report = fxinspect.analyze(model, x, timing=False, memory=False)
        c = report.capture
        parts.append(f">>> r = fxinspect.analyze({type(model).__name__}(), x); r.capture.method, r.capture.failures")
        parts.append(repr((str(c.method), [(str(tier), reason[:90]) for tier, reason in c.failures])))
        parts.append(f">>> [n.name for n in r.nodes if n.is_op]\n{[n.name for n in report.nodes if n.is_op]}\n")
    text = "\n".join(parts)
    print(text)
    return text


if __name__ == "__main__":
    main()
