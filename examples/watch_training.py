"""Watching training: histograms over steps, the findings they reveal, and stashed tensors.

Run: ``python examples/watch_training.py [OUT_DIR]`` (writes ``watch_heatmaps.png``).

``watcher = fxinspect.watch(model, every=10)`` around an unchanged training loop logs,
every 10 training steps, histograms of each module's outputs, the per-sample norms of
their gradients, its parameters and their gradients: signed log2 bins that keep every
value, with NaN, ±Inf and zeros counted exactly. ``watcher.summary()`` names dead units,
exploding or vanishing gradients, frozen parameters and the first NaN/Inf;
``watcher.plot(...)`` draws the heat maps. ``fxinspect.track(model, include=...)`` keeps
the outputs and gradients of the modules it selects, in call order. A small CNN learns
random labels here (its first convolution and its classifier drawn), then a copy whose
last convolution is zeroed shows what a dead layer looks like in the summary.
``to="tensorboard:<logdir>"`` (or a ``SummaryWriter``, or a ``wandb`` run) writes each
logged step there too, with the exact bins (``pip install fxinspect[tensorboard]``,
``fxinspect[wandb]``); TensorBoard's own reader gets them back:
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from tensorboard.backend.event_processing.event_accumulator import HISTOGRAMS, TENSORS, EventAccumulator

import fxinspect


def cnn() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.ReLU(inplace=True),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(32, 10),
    )


def train(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, to=None) -> fxinspect.Watch:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    watcher = fxinspect.watch(model, every=10, to=to)
    for _ in range(100):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    watcher.remove()
    return watcher


def main(out_dir: Path = Path(".")) -> str:
    torch.manual_seed(0)
    x, y = torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))
    model = cnn()
    healthy = train(model, x, y)
    healthy.plot("^(0|9)$", out_dir / "watch_heatmaps.png")
    dead = cnn()
    with torch.no_grad():  # a layer that learns nothing: its outputs are all zero
        dead[5].weight.zero_()
        dead[5].bias.zero_()
    with tempfile.TemporaryDirectory() as logdir:
        watcher = train(dead, x, y, to=f"tensorboard:{logdir}")
        events = EventAccumulator(logdir, size_guidance={HISTOGRAMS: 0, TENSORS: 0}).Reload()
    value = events.Histograms("watch_io/9")[-1].histogram_value
    findings = events.Tensors("watch_findings/text_summary")[0].tensor_proto.string_val[0].decode()
    with fxinspect.track(model, include=r"^[03]$", stash_value=lambda t: f"{float(t.std()):.3g}") as tracker:
        torch.nn.functional.cross_entropy(model(x), y).backward()
    parts = [
        ">>> print(healthy.summary())",
        healthy.summary(),
        "",
        ">>> print(watcher.summary())   # the copy with a zeroed layer",
        watcher.summary(),
        "",
        ">>> healthy.histogram('9', 'io', 90).bins()[:4]   # (sign, exponent, count)",
        str(healthy.histogram("9", "io", 90).bins()[:4]),
        "",
        ">>> [(s.name, s.kind, s.value) for s in tracker.stashes]   # stash_value=std",
        str([(s.name, s.kind, s.value) for s in tracker.stashes]),
        "",
        ">>> # the zeroed copy's last step, read back by TensorBoard from to=f'tensorboard:{logdir}'",
        ">>> value = EventAccumulator(logdir).Reload().Histograms('watch_io/9')[-1].histogram_value",
        ">>> value.min, value.bucket_limit[:3], value.bucket[:3]",
        str((value.min, value.bucket_limit[:3], value.bucket[:3])),
        ">>> watcher.histogram('9', 'io', 90).bins()[:2]   # the same bins and counts",
        str(watcher.histogram("9", "io", 90).bins()[:2]),
        ">>> print(events.Tensors('watch_findings/text_summary')[0].tensor_proto.string_val[0].decode())",
        findings,
    ]
    text = "\n".join(parts)
    print(text)
    return text


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))
