"""Will it fit: batch sweeps, the largest batch and checkpointing advice, on the meta device.

Run: ``python examples/will_it_fit.py [OUT_DIR]`` (writes the PNGs named below).

fxinspect's memory model of a whole training step (forward, loss, backward, optimizer
step; every storage followed) is the same on the meta device as on real tensors, so a
step can be planned for a device this machine does not have, without running a trial
step or allocating anything:

* ``fxinspect.sweep(model, make_inputs, batch_sizes, ...)``: per batch size (and per
  sequence length with ``seq_lens=``) the FLOPs, the peak with and without resident
  memory and what holds it, and, timed or priced on a device (``device_spec=``), the
  step's time and inputs per second; a table, ``to_dataframe()`` and ``plot(path)``.
  On the meta device (Linux), forked workers analyse its points side by side
  (``workers=``, one a core up to 4), if nothing in the process ran a backward on the meta
  device before: the first sweep of a script forks; a later one analyses in turn.
* ``fxinspect.max_batch(model, make_inputs, budget, reserve=...)``: the largest batch
  whose step fits, its peak and the next batch's, and what dominates there.
* ``fxinspect.checkpoint_plan(model, inputs, budget)``: which modules to recompute for
  the step to fit, the cheapest plan a greedy search over the modules finds; its peak
  is that of the step analysed with the checkpoints applied, and ``plan.apply(model)``
  applies them with ``torch.utils.checkpoint``.

Budgets and peaks are total bytes, resident memory included (``report.memory.total_peak``);
a budget is an int or a string such as ``"24GiB"``. Each takes :func:`fxinspect.analyze`'s
options (``backward``, ``optimizer``, ``loss_fn``, ``device_spec``, ...), checked as
``analyze`` checks them, with the planning defaults in its signature: ``device="meta"``
(``analyze``'s is ``None``) and no timing (``sweep`` times its steps when given
``device=None``).
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
    images = lambda batch: torch.randn(batch, 3, 224, 224)  # noqa: E731 (sweep and max_batch build it on meta)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)  # its settings are kept; its state modelled
    step = dict(backward=True, optimizer=sgd, loss_fn=lambda out: out.logsumexp(1).mean())
    lines = []

    sweep = fxinspect.sweep(model, images, [32, 64, 128, 256], device_spec="a100-80gb", budget="24GiB", **step)
    sweep.plot(out_dir / "resnet50_sweep.png")
    lines.append("ResNet-50 training steps on an A100 80GB (time model), against a 24 GiB budget:")
    lines.append(sweep.table())

    fit = fxinspect.max_batch(model, images, "24GiB", reserve="2GiB", **step)
    lines.append(f"The largest batch within 24 GiB, 2 GiB kept back:\n{fit}")

    # recompute cost priced on the A100 (without a device_spec: FLOPs; timed on a real device: latency)
    with torch.device("meta"):  # 154 MB of images, never allocated
        batch = images(256)
    plan = fxinspect.checkpoint_plan(model, batch, "16GiB", device_spec="a100-80gb", **step)
    plan.plot(out_dir / "resnet50_checkpoint_plan.png")
    lines.append(f"Batch 256 in 16 GiB: the checkpoint plan\n{plan}\n\n{plan.table()}")
    with plan.apply(model):  # the plan's modules now recompute in the backward; analysed again:
        applied = fxinspect.analyze(model, batch, timing=False, **step)  # (meta inputs: on meta)
    lines.append(
        f"Applied and analysed again: peak {applied.memory.total_peak:,} bytes (the plan's: {plan.peak:,}); "
        f"forward MACs redone in the backward {plan.recompute_macs:,}"
    )
    text = "\n\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))
