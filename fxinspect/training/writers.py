"""Where ``watch`` writes besides its own pages: TensorBoard and Weights & Biases.

``fxinspect.watch(model, every=10, to=["tensorboard:runs/exp1", wandb.run])`` writes each
logged step as it ends (when the next step begins, at :meth:`Watch.flush` or at
``remove()``); ``Watch.load(path).write(to)`` writes a saved run after the fact. A
destination is a ``"tensorboard:<logdir>"`` string, ``"wandb"`` (the active run), a
TensorBoard ``SummaryWriter`` (PyTorch's or tensorboardX's: anything with
``add_histogram_raw``), a ``wandb`` run, or a writer of this module
(:class:`TensorBoardWriter`, :class:`WandbWriter`, or any object with their
``histograms``/``findings``/``flush``/``close`` methods).

Per module and quantity (``prefix`` ``"watch_"``, the model's root named ``(model)``):

* ``watch_<quantity>/<module>``: the histogram of its finite values with the exact bins
  ``watch`` counted (:func:`buckets`: the signed log2 bins, the zeros in the bucket
  between the negative and the positive ones), not values binned again; its sum and sum
  of squares, which the bins do not keep, are written as 0;
* ``watch_<quantity>_nan/<module>`` and ``watch_<quantity>_inf/<module>``: NaN and
  ±Inf counts, which TensorBoard's and W&B's own histograms drop;
* the findings (:mod:`.findings`: first NaN/Inf, dead units, exploding or vanishing
  gradients, frozen parameters): as ``watch_findings`` text in TensorBoard, the whole
  list at each step where one is new; in W&B an alert per new finding and the list in
  the run's summary.

W&B's rows are the watch's own: a ``watch_step`` key is their x axis (as the HF Trainer's
and Lightning's loggers keep theirs), so they never move the run's own step. A loop that
logs with an explicit ``run.log(..., step=n)`` passes ``WandbWriter(run, commit=False)``:
then each logged step joins the loop's next row.

Example
-------
>>> from fxinspect.training.binning import log2_histogram
>>> import torch
>>> buckets(log2_histogram(torch.tensor([-3.0, 0.0, 0.3, 5.0, 7.0, float("nan")])))
([-4.0, -2.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0], [1, 1, 1, 0, 0, 0, 2])
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..optional import summary_writer, wandb
from .histograms import Histogram
from .quantities import Quantity

__all__ = ["TensorBoardWriter", "WandbWriter", "Written", "buckets", "destinations", "write"]

Items = list[tuple[str, str, Histogram]]  # (quantity, module, histogram) of one step


def _power(e: int) -> float:
    """``2**e`` as a float; the largest double for ``2**1024``, the top of float64's last bin
    (TensorBoard's own last bucket ends there)."""
    return math.ldexp(1.0, e) if e < 1024 else sys.float_info.max


def buckets(h: Histogram) -> tuple[list[float], list[int]]:
    """``h``'s finite values as contiguous buckets: ``(edges, counts)``, one more edge than
    counts, ascending. Negative values of exponent ``e`` lie in ``(-2**(e+1), -2**e]``,
    positive ones in ``[2**e, 2**(e+1))`` (empty bins inside a sign's range kept); between
    the two signs one bucket holds the zeros (from ``-2**a``, or 0 without negative values,
    to ``2**c``, or 0): no finite nonzero value lies there. Only zeros: ``(-0.5, 0.5)``, as
    TensorBoard makes a bucket of equal values. No finite value: no bucket."""
    neg = [i for i, c in enumerate(h.negative) if c]
    pos = [i for i, c in enumerate(h.positive) if c]
    if not neg and not pos:
        return ([-0.5, 0.5], [h.zeros]) if h.zeros else ([], [])
    edges: list[float] = []
    counts: list[int] = []
    if neg:
        a, b = neg[0], neg[-1]
        edges = [-_power(h.low + i + 1) for i in range(b, a - 1, -1)] + [-_power(h.low + a)]
        counts = [h.negative[i] for i in range(b, a - 1, -1)]
    if h.zeros or (neg and pos):  # the zeros' bucket (the gap between the signs)
        edges = edges or [0.0]
        edges.append(_power(h.low + pos[0]) if pos else 0.0)
        counts.append(h.zeros)
    if pos:
        c, d = pos[0], pos[-1]
        edges = edges or [_power(h.low + c)]
        edges += [_power(h.low + i + 1) for i in range(c, d + 1)]
        counts += [h.positive[i] for i in range(c, d + 1)]
    return edges, counts


def _name(module: str) -> str:
    return module or "(model)"


class TensorBoardWriter:
    """Writes to TensorBoard event files: ``where`` is a log directory (a
    ``SummaryWriter`` of its own, closed with the watch) or a ``SummaryWriter`` (the
    caller's, flushed but left open)."""

    def __init__(self, where: str | Path | Any, prefix: str = "watch_") -> None:
        self.prefix = prefix
        self.owned = isinstance(where, str | Path)
        self.writer = summary_writer("watch(to='tensorboard:...')")(str(where)) if self.owned else where

    def histograms(self, step: int, items: Items) -> None:
        for quantity, module, h in items:
            edges, counts = buckets(h)
            tag = f"{self.prefix}{quantity}/{_name(module)}"
            if counts:  # (TensorBoard's min is the first bucket's left edge, its max the last's right)
                self.writer.add_histogram_raw(
                    tag,
                    min=edges[0],
                    max=edges[-1],
                    num=sum(counts),
                    sum=0.0,
                    sum_squares=0.0,
                    bucket_limits=edges[1:],
                    bucket_counts=counts,
                    global_step=step,
                )
            self.writer.add_scalar(f"{self.prefix}{quantity}_nan/{_name(module)}", h.nan, step)
            self.writer.add_scalar(f"{self.prefix}{quantity}_inf/{_name(module)}", h.pos_inf + h.neg_inf, step)

    def findings(self, step: int, new: list[str], found: list[str]) -> None:
        if new:
            self.writer.add_text(f"{self.prefix}findings", "\n".join(f"- {text}" for text in found), step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        if self.owned:
            self.writer.close()
        else:
            self.writer.flush()


class WandbWriter:
    """Writes to a Weights & Biases run (``None``: the active one, ``wandb.run``).

    ``commit=False`` adds each logged step to the run's next row (for a loop that logs
    with an explicit ``step=``), in place of rows of its own. ``alerts=False``: findings
    in the run's summary only.
    """

    MAX_BUCKETS = 512  # wandb.Histogram's limit

    def __init__(self, run: Any = None, prefix: str = "watch_", commit: bool = True, alerts: bool = True) -> None:
        self.wandb = wandb("watch(to=wandb run)")
        self.run = run if run is not None else self.wandb.run
        if self.run is None:
            raise InputError("WandbWriter: no active wandb run: call wandb.init() first, or pass the run")
        self.prefix, self.commit, self.alerts = prefix, commit, alerts
        self.run.define_metric(f"{prefix}*", step_metric=f"{prefix}step")

    def histograms(self, step: int, items: Items) -> None:
        row: dict[str, Any] = {f"{self.prefix}step": step}
        for quantity, module, h in items:
            edges, counts = buckets(h)
            if counts:
                edges, counts = coarsened(edges, counts, self.MAX_BUCKETS)
                row[f"{self.prefix}{quantity}/{_name(module)}"] = self.wandb.Histogram(np_histogram=(counts, edges))
            row[f"{self.prefix}{quantity}_nan/{_name(module)}"] = h.nan
            row[f"{self.prefix}{quantity}_inf/{_name(module)}"] = h.pos_inf + h.neg_inf
        self.run.log(row, commit=self.commit)

    def findings(self, step: int, new: list[str], found: list[str]) -> None:
        if not new:
            return
        self.run.summary[f"{self.prefix}findings"] = "\n".join(found)
        if self.alerts:
            for text in new:
                kind = text.split(":", 1)[0]
                self.run.alert(title=f"fxinspect watch: {kind}", text=text, level=self.wandb.AlertLevel.WARN)

    def flush(self) -> None:
        pass  # (wandb sends as it goes)

    def close(self) -> None:
        pass  # the run is the caller's


def coarsened(edges: list[float], counts: list[int], most: int) -> tuple[list[float], list[int]]:
    """At most ``most`` buckets: neighbours merged in pairs, as often as needed (each
    count still the exact count of its wider bucket). Only float64 or subnormal values
    span more than W&B's 512.

    >>> coarsened([0.0, 1.0, 2.0, 4.0], [1, 2, 3], 2)
    ([0.0, 2.0, 4.0], [3, 3])
    """
    while len(counts) > most:
        counts = [sum(counts[i : i + 2]) for i in range(0, len(counts), 2)]
        edges = edges[::2] + ([edges[-1]] if len(edges) % 2 == 0 else [])
    return edges, counts


def destinations(to: Any) -> list[Any]:
    """The writers ``to`` names (one destination or a list of them; see the module)."""
    if to is None:
        return []
    if isinstance(to, str | Path) or not isinstance(to, Sequence):
        to = [to]
    return [_writer(d) for d in to]


def _writer(d: Any) -> Any:
    if isinstance(d, Path):
        d = str(d)
    if isinstance(d, str):
        kind, _, where = d.partition(":")
        if kind == "tensorboard" and where:
            return TensorBoardWriter(where)
        if kind == "wandb" and not where:
            return WandbWriter()
        raise InputError(f"watch(to=...): a string destination is 'tensorboard:<logdir>' or 'wandb', got {d!r}")
    if all(hasattr(d, m) for m in ("histograms", "findings", "flush", "close")):
        return d
    if hasattr(d, "add_histogram_raw"):
        return TensorBoardWriter(d)
    if hasattr(d, "log") and hasattr(d, "alert"):
        return WandbWriter(d)
    raise InputError(
        "watch(to=...) takes 'tensorboard:<logdir>', 'wandb', a SummaryWriter, a wandb run or a writer "
        f"(TensorBoardWriter, WandbWriter), got {type(d).__name__}"
    )


class Written:
    """What a watch has written to its destinations: the last step, the findings (as
    ``(kind, module)``: a finding whose text changes as steps pass, as a dead layer's last
    step does, is not new), and when findings were last looked for."""

    def __init__(self) -> None:
        self.step = -1
        self.known: set[tuple[str, str | None]] = set()
        self.steps = 0  # logged steps written
        self.looked = 0  # ... when the findings were last looked for
        self.flagged: set[tuple[str, str]] = set()  # (module, quantity) with NaN/Inf or mostly zeros, last step


def _flags(items: Items) -> set[tuple[str, str]]:
    """The (module, quantity) pairs of a step that may make a finding: NaN/Inf, or outputs
    at least DEAD zeros."""
    from .findings import DEAD

    return {(n, q) for q, n, h in items if h.nonfinite or (q == Quantity.IO and h.total and h.zeros >= DEAD * h.total)}


def write(w: Any, writers: list[Any], done: Written, final: bool = True) -> None:
    """Write ``w``'s logged steps after ``done.step``, and the findings not written yet.

    Looking for findings reads every logged step: at every step it would cost a long run
    time growing with its length. Unless ``final``, they are looked for when a step shows
    NaN/Inf or mostly-zero outputs where the one before did not (what a first NaN or a
    dead layer starts with), or the steps written have doubled since the last look (the
    slow drifts: exploding, vanishing, frozen): in all, time linear in the run.
    """
    from .findings import linked_findings

    steps = sorted({s for per_step in w._records.values() for s in per_step if s > done.step})
    if not writers or (not steps and not final):
        return
    flagged = done.flagged
    for step in steps:
        items = [
            (q, n, w.histogram(n, q, step)) for n in w.names() for q in w.log if step in w._records.get((n, q), ())
        ]
        for writer in writers:
            writer.histograms(step, items)
        flagged = _flags(items)
    new_flags = bool(flagged - done.flagged)
    done.flagged, done.step, done.steps = flagged, (steps[-1] if steps else done.step), done.steps + len(steps)
    if final or new_flags or done.steps >= 2 * done.looked:
        done.looked = done.steps
        found = linked_findings(w)
        new = [text for text, module in found if (text.split(":", 1)[0], module) not in done.known]
        done.known.update((text.split(":", 1)[0], module) for text, module in found)
        for writer in writers:
            writer.findings(done.step, new, [text for text, _ in found])
    for writer in writers:
        writer.flush()
