"""``fxinspect.sweep``: a step's figures over batch sizes and sequence lengths.

>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
>>> s = fxinspect.sweep(model, lambda b: torch.randn(b, 64), [1, 4, 16], backward=True)   # on meta
>>> [p.flops for p in s.points] == [s.points[0].flops * b for b in (1, 4, 16)]   # linear in the batch
True
>>> [b.total_peak - a.total_peak for a, b in zip(s.points, s.points[1:])]  # 4 bytes * (64 + 256 + 10) a sample
[3960, 15840]
>>> print(s.table(columns=["batch", "total peak", "largest part"]))
  batch    total peak  largest part
-------  ------------  --------------
      1    151.38 KiB  parameters
      4    155.24 KiB  parameters
     16    170.71 KiB  parameters
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import InputError
from ..formatting import units
from ..optional import pandas
from ..options import Options, own_parameters, signature_of
from ..progress import reported, tracked
from .ahead import Ahead
from .budget import Budget
from .derived import Analysed, Line
from .points import StepPoint
from .shared import Shared, shared_capture
from .workers import Workers, can_fork, worker_count

__all__ = ["Sweep", "sweep"]


@dataclass(frozen=True)
class Sweep:
    """The points of a sweep, in the order asked, and the budget they were held to (if any)."""

    points: tuple[StepPoint, ...]
    budget: Budget | None = None
    notes: tuple[str, ...] = ()

    def fits(self, point: StepPoint) -> bool | None:
        """Whether ``point``'s total peak is within the usable budget (``None`` without one)."""
        return None if self.budget is None else point.total_peak <= self.budget.usable

    def rows(self) -> list[dict[str, Any]]:
        """One dict a point, base units (bytes, seconds); the columns no point has are left out."""
        rows = []
        for p in self.points:
            rows.append(
                {
                    "batch": p.batch,
                    "seq_len": p.seq_len,
                    "flops": p.flops,
                    "peak": p.peak,
                    "total_peak": p.total_peak,
                    "dominant": p.dominant,
                    "latency": p.latency,
                    "inputs_per_second": p.inputs_per_second,
                    "predicted_latency": p.predicted_latency,
                    "predicted_inputs_per_second": p.predicted_inputs_per_second,
                    "fits": self.fits(p),
                    "method": p.method,
                    "derived": "derived" if p.derived else "analysed",
                }
            )
        kept = [k for k in rows[0] if any(r[k] is not None for r in rows)] if rows else []
        return [{k: r[k] for k in kept} for r in rows]

    def table(self, columns: Sequence[str] | None = None, tablefmt: str = "simple") -> str:
        """The points as a text table (``columns`` by their headers, in that order)."""
        from tabulate import tabulate

        formats: dict[str, tuple[str, Callable[[Any], str]]] = {
            "batch": ("batch", str),
            "seq_len": ("seq len", str),
            "flops": ("FLOPs", units.count),
            "peak": ("run peak", units.nbytes),
            "total_peak": ("total peak", units.nbytes),
            "dominant": ("largest part", str),
            "latency": ("step", units.seconds),
            "inputs_per_second": ("inputs/s", units.count),
            "predicted_latency": ("predicted step", units.seconds),
            "predicted_inputs_per_second": ("predicted inputs/s", units.count),
            "fits": (f"fits {self.budget}" if self.budget else "fits", lambda f: "yes" if f else "no"),
            "method": ("capture", str),
            "derived": ("point", str),
        }
        rows = self.rows()
        keys = list(rows[0]) if rows else []
        if columns is not None:
            by_header = {formats[k][0]: k for k in keys}
            unknown = [c for c in columns if c not in by_header and c not in keys]
            if unknown:
                raise InputError(f"unknown column(s) {unknown}; this sweep has {list(by_header)}")
            keys = [by_header.get(c, c) for c in columns]
        cells = [[formats[k][1](r[k]) if r[k] is not None else units.MISSING for k in keys] for r in rows]
        align = ["left" if k in ("dominant", "method", "derived") else "right" for k in keys]
        headers = [formats[k][0] for k in keys]
        return tabulate(cells, headers=headers, tablefmt=tablefmt, disable_numparse=True, colalign=align)

    def __str__(self) -> str:
        return "\n".join([self.table(), *(f"note: {n}" for n in self.notes)])

    def to_dataframe(self):
        """The rows as a ``pandas.DataFrame`` (pandas is an optional extra)."""
        pd = pandas("to_dataframe")
        return pd.DataFrame(self.rows())

    def plot(self, path: Any = None):
        """Memory and throughput against the batch size (see :func:`.plots.plot_sweep`)."""
        from .plots import plot_sweep

        return plot_sweep(self, path)


@reported("sweep")
def sweep(
    model: torch.nn.Module,
    make_inputs: Callable[..., Any],
    batch_sizes: Iterable[int] = (1, 2, 4, 8),
    *,
    seq_lens: Iterable[int] | None = None,
    budget: int | str | None = None,
    reserve: int | float | str = 0,
    derive: bool = True,
    workers: int | None = None,
    kwargs: dict | None = None,
    device: str | None = "meta",
    timing: bool | None = None,
    **options: Any,
) -> Sweep:
    """Analyse one step per batch size (and per sequence length): a :class:`Sweep`.

    ``make_inputs(batch)`` (or ``make_inputs(batch, seq_len)`` with ``seq_lens``) returns the
    example inputs of one point, as :func:`~fxinspect.analyze` takes them (``kwargs``:
    keywords added to positional ones). The other keywords are ``analyze``'s options
    (``backward``, ``optimizer``, ``loss_fn``, ``device_spec``, ...), checked as ``analyze``
    checks them (:class:`~fxinspect.options.Options`), with two planning defaults:
    ``device="meta"`` (not ``analyze``'s ``None``) sweeps with no memory and no data;
    ``device=None`` runs each step where the model is, and ``timing=None`` (the default)
    then times it (``repeats`` as for ``analyze``), for measured latency and inputs per
    second.
    ``budget`` (bytes or ``"24GiB"``, less ``reserve``) adds a "fits" column and a line
    on the plot.

    With four batch sizes or more, and neither timing nor a device spec, the smallest,
    the largest and a middle one are analysed first: when the middle one's memory
    timeline and figures lie exactly on the line through the other two (every event's
    bytes affine in the batch), the remaining points are derived from that line
    (:mod:`.derived`; ``point.derived``), exact to the byte, and only those it cannot
    derive are analysed. Otherwise, and with ``derive=False``, every point is analysed.
    ``Sweep.notes`` says which were. The model is prepared and captured once per
    sequence length, at the largest batch, for every batch size (:mod:`.shared`: export
    keeps the batch a symbol); a point the capture cannot serve (batch 1, an eager or
    batch-fixed capture) is captured on its own, and the notes say so.

    On the meta device (and Linux), ``workers`` forked copies of this process (``None``:
    one a core, at most 4) analyse the points the sweep will likely ask for beside it
    (:mod:`.ahead`); the figures and notes are those of one process asking in turn.
    ``workers=0`` analyses every point in this process.
    """
    count = worker_count(workers)
    timed = timing if timing is not None else str(device) != "meta"
    opts = Options.of("sweep", {**options, "device": device, "timing": timed}, own=own_parameters(sweep))
    batches = _positive(batch_sizes, "batch_sizes")
    seqs: list[int | None] = [None] if seq_lens is None else list(_positive(seq_lens, "seq_lens"))
    derivable = derive and not opts.timing and opts.device_spec is None
    points: list[StepPoint] = []
    notes: list[str] = []
    for seq in seqs:
        found, said = _swept(model, make_inputs, batches, seq, opts, kwargs, derivable, count)
        points += found
        notes += said
    limit = None if budget is None else Budget.of(budget, reserve)
    methods = sorted({p.method for p in points})
    notes.insert(0, f"captures: {', '.join(methods)}")
    return Sweep(tuple(points), limit, tuple(notes))


def _swept(
    model: torch.nn.Module,
    make_inputs: Callable[..., Any],
    batches: list[int],
    seq: int | None,
    opts: Options,
    kwargs: dict | None,
    derivable: bool,
    workers: int,
) -> tuple[list[StepPoint], list[str]]:
    """The points of one sequence length, in the order asked, and what was derived."""
    ordered = sorted(set(batches))
    derives = derivable and len(ordered) >= 4
    # the smallest batch may be off the line (a size-1 dimension broadcasts and views
    # differently): then the next one is tried, when a point is left to derive
    lows = ordered[:2] if len(ordered) >= 5 else ordered[:1]
    expected = [lows[0], ordered[-1], ordered[len(ordered) // 2], *lows[1:]] if derives else ordered
    with Workers() as pool:
        forking = workers > 0 and can_fork(opts.device)
        ahead = Ahead(pool if forking else None, workers, expected)
        with shared_capture(model, make_inputs, seq, opts, batches, ahead, kwargs) as shared:
            found, notes = _points(shared, ahead, batches, seq, derives, lows)
    return found, notes + shared.notes


def _points(
    shared: Shared, ahead: Ahead, batches: list[int], seq: int | None, derives: bool, lows: list[int]
) -> tuple[list[StepPoint], list[str]]:
    """The points of ``batches``: analysed on ``shared``, or derived on a checked line."""
    analysed: dict[int, Analysed] = {}
    steps = ahead.step if isinstance(shared, Shared) else lambda b: Analysed.of(*shared.analysed(b))

    def analyse(batch: int) -> Analysed:
        if batch not in analysed:
            analysed[batch] = steps(batch)
        return analysed[batch]

    ordered = sorted(set(batches))
    line, why = None, ""
    high, middle = ordered[-1], ordered[len(ordered) // 2]
    if derives:
        for low in lows:
            candidate = Line(analyse(low), analyse(high))
            if candidate.agrees(analyse(middle)):
                line = candidate
                break
            why = f"batch {middle} is not on the line through batches {low} and {high}"
    found = {}
    for batch in tracked(
        "points", ordered, detail=lambda b: f"batch {b}" + (f", sequence length {seq}" if seq else "")
    ):
        derived = line.at(batch, tuple(analysed.values())) if line is not None and batch not in analysed else None
        found[batch] = derived or analyse(batch).point
    where = f" (sequence length {seq})" if seq is not None else ""
    by_line = [b for b in ordered if found[b].derived]
    if line is not None:
        low, high = line.lo.point.batch, line.hi.point.batch
        notes = [
            f"{_batches(sorted(analysed))} analysed{where}; {_batches(by_line) or 'none'} derived from the line "
            f"through batches {low} and {high}: every event of the memory timeline of batch {middle}, "
            "and every figure, on it to the byte"
        ]
    elif why:
        notes = [f"every batch analysed{where}: {why} (the memory is not affine in the batch)"]
    else:
        notes = [f"every batch analysed{where}"]
    return [found[b] for b in batches], notes


def _batches(values: list[int]) -> str:
    return ("batch " if len(values) == 1 else "batches ") + ", ".join(map(str, values)) if values else ""


def _positive(values: Iterable[int], what: str) -> list[int]:
    values = list(values)
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if not values or bad:
        raise InputError(f"{what} expects positive ints, got {values!r}")
    return values


sweep.__signature__ = signature_of(sweep)  # help() lists analyze's options too, with their defaults
