"""``fxinspect.max_batch``: the largest batch whose step fits a memory budget.

Found on the memory model, by default on the meta device: no trial step runs on the
target and nothing is allocated. The search brackets the answer between a batch that
fits and one that does not, then narrows the bracket with guesses that alternate between
where the line through its ends crosses the budget (right at once where the peak is
affine in the batch, as it mostly is) and its middle (which bounds the steps where not).

>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
>>> fit = fxinspect.max_batch(model, lambda b: torch.randn(b, 64), budget=200_000, backward=True)
>>> fit.batch, fit.peak, fit.next_peak        # total bytes of the steps at batch 33 and 34
(33, 198272, 201640)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import InputError
from ..formatting import units
from ..options import Options, own_parameters, signature_of
from ..progress import note, reported
from .budget import Budget
from .points import StepPoint
from .shared import shared_capture

__all__ = ["BatchFit", "max_batch"]


@dataclass(frozen=True)
class BatchFit:
    """The largest batch that fits, its peak, and the next batch's.

    ``batch`` is 0 when not even ``lowest`` fits (``peak`` is then ``None``, and
    ``next_peak`` the lowest batch's). ``point`` is the batch's analysed step (its
    ``composition`` says what the peak is made of); ``tried`` every batch analysed, in
    order, with its total peak. Peaks are total bytes, resident memory included.
    """

    batch: int
    peak: int | None
    next_peak: int | None
    budget: Budget
    point: StepPoint | None
    next_point: StepPoint | None
    tried: tuple[tuple[int, int], ...]
    notes: tuple[str, ...] = ()

    @property
    def dominant(self) -> str:
        """What most of the peak at ``batch`` is."""
        return self.point.dominant if self.point is not None else ""

    def __str__(self) -> str:
        notes = [f"note: {n}" for n in self.notes]
        if self.batch == 0:
            return "\n".join(
                [
                    f"no batch fits {self.budget}: batch {self.next_point.batch} needs "
                    f"{units.nbytes(self.next_peak)}, most of it {self.next_point.dominant}",
                    *notes,
                ]
            )
        parts = ", ".join(
            f"{name} {units.nbytes(size)}"
            for name, size in sorted(self.point.composition.items(), key=lambda kv: -kv[1])[:4]
        )
        after = ""
        if self.next_peak is not None:
            over = self.next_peak - self.budget.usable
            after = f"; batch {self.batch + 1}: {units.nbytes(self.next_peak)} ({units.nbytes(over)} over)"
        return "\n".join(
            [
                f"batch {self.batch} fits {self.budget}: peak {units.nbytes(self.peak)}{after}",
                f"largest parts at batch {self.batch}: {parts}",
                f"{units.plural(len(self.tried), 'step')} analysed",
                *notes,
            ]
        )


@reported("max_batch")
def max_batch(
    model: torch.nn.Module,
    make_inputs: Callable[[int], Any],
    budget: int | str,
    *,
    reserve: int | float | str = 0,
    lowest: int = 1,
    highest: int = 2**20,
    kwargs: dict | None = None,
    device: str | None = "meta",
    timing: bool = False,
    **options: Any,
) -> BatchFit:
    """The largest batch in ``[lowest, highest]`` whose step's ``total_peak`` fits ``budget``.

    ``make_inputs(batch)`` returns one point's example inputs (``kwargs``: keywords added
    to positional ones); the other keywords are :func:`~fxinspect.analyze`'s options
    (``backward``, ``optimizer``, ``loss_fn``, ...), checked as ``analyze`` checks them
    (:class:`~fxinspect.options.Options`), with the planning defaults ``device="meta"``
    (not ``analyze``'s ``None``) and ``timing=False`` (memory alone decides). ``budget``
    is total bytes (an int or ``"80GiB"``); ``reserve`` (bytes, or a fraction below 1) is
    kept back for what the model cannot see, and the search holds peaks to the rest.
    ``device="meta"`` (the default) analyses without allocating; ``None`` runs where the
    model is, and then really runs steps over the budget (the search needs one that does
    not fit, found by doubling up to ``highest``): keep ``highest`` low there. The peak
    is assumed not to fall as the batch grows; a note says when the analysed peaks
    contradict that.
    """
    limit = Budget.of(budget, reserve)
    if not (isinstance(lowest, int) and isinstance(highest, int) and 1 <= lowest <= highest):
        raise InputError(f"max_batch expects 1 <= lowest <= highest, got lowest={lowest!r}, highest={highest!r}")
    opts = Options.of("max_batch", {**options, "device": device, "timing": timing}, own=own_parameters(max_batch))
    points: dict[int, StepPoint] = {}
    # one capture for every batch: taken at the second batch the search tries (see .shared)
    with shared_capture(model, make_inputs, None, opts, [lowest, min(highest, lowest + 1)], kwargs=kwargs) as shared:

        def peak(batch: int) -> int:
            if batch not in points:
                note(f"batch {batch} ({len(points)} tried)")
                points[batch] = shared.analysed(batch)[1]
            return points[batch].total_peak

        fits, fails = _bracket(peak, lowest, highest, limit.usable)
        if fits is not None and fails is not None:
            fits = _narrow(peak, fits, fails, limit.usable)
            fails = fits + 1
            peak(fails)
    tried = tuple((b, points[b].total_peak) for b in points)
    ordered = sorted(tried)
    notes = []
    falls = [(a, b) for (a, pa), (b, pb) in zip(ordered, ordered[1:]) if pb < pa]
    if falls:
        notes.append(
            f"the peak fell as the batch grew ({falls[0][0]} -> {falls[0][1]}): the answer may not be the largest"
        )
    if fits is None:
        notes.append(f"batch {lowest} (the lowest asked) does not fit")
    if fails is None:
        notes.append(f"batch {highest} (the highest asked) fits: larger ones were not tried")
    notes += shared.notes
    point = points[fits] if fits is not None else None
    after = points[fails] if fails is not None else None
    return BatchFit(
        batch=fits or 0,
        peak=point.total_peak if point else None,
        next_peak=after.total_peak if after else None,
        budget=limit,
        point=point,
        next_point=after,
        tried=tried,
        notes=tuple(notes),
    )


max_batch.__signature__ = signature_of(max_batch)  # help() lists analyze's options too, with their defaults


def _bracket(peak: Callable[[int], int], lowest: int, highest: int, usable: int) -> tuple[int | None, int | None]:
    """A batch that fits and a larger one that does not (``None`` where there is none).

    From ``lowest``: a step to where the first two peaks' line crosses the budget, then
    doubling.
    """
    if peak(lowest) > usable:
        return None, lowest
    if lowest == highest:
        return lowest, None
    fits, probe = lowest, lowest + 1
    while True:
        if peak(probe) > usable:
            return fits, probe
        if probe == highest:
            return probe, None
        guess = _crossing(fits, peak(fits), probe, peak(probe), usable)
        fits, probe = probe, min(highest, max(2 * probe, guess + 1 if guess else 0))


def _narrow(peak: Callable[[int], int], fits: int, fails: int, usable: int) -> int:
    """The largest batch that fits between ``fits`` (fits) and ``fails`` (does not).

    Guesses alternate between the crossing of the line through the bracket's ends and
    the bracket's middle: the line is right at once where the peak is affine in the
    batch, and the middle bounds the steps where it is not (a peak flat while the
    optimizer step holds it, then rising with the activations). When the line predicted
    the peak at its guess closely, the batch after the guess is tried too: an affine
    peak is settled by the pair.
    """
    secant = True
    while fails - fits > 1:
        guess = _crossing(fits, peak(fits), fails, peak(fails), usable) if secant else None
        if guess is None or not fits < guess < fails:
            guess, secant = (fits + fails) // 2, False
        if peak(guess) <= usable:
            predicted = peak(fits) + (peak(fails) - peak(fits)) * (guess - fits) / (fails - fits)
            affine = secant and abs(peak(guess) - predicted) <= 0.005 * peak(guess)
            fits = guess
            if affine and guess + 1 < fails:  # (the pair settles an affine peak)
                if peak(guess + 1) > usable:
                    fails = guess + 1
                else:
                    fits = guess + 1
        else:
            fails = guess
        secant = not secant
    return fits


def _crossing(a: int, peak_a: int, b: int, peak_b: int, usable: int) -> int | None:
    """The largest batch at or below which the line through two points stays within budget."""
    if peak_b <= peak_a:
        return None
    return a + int((usable - peak_a) * (b - a) // (peak_b - peak_a))
