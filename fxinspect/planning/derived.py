"""Sweep points derived from analysed ones: a step's memory is affine in the batch.

At a fixed sequence length most models' steps allocate the same tensors in the same
order at every batch size, each of a size affine in the batch (weights fixed,
activations proportional to it). Then every point of the memory timeline is an affine
function of the batch, and so are the FLOPs: the timeline at any batch follows from two
analysed ones, and its peak is the highest of those lines, exact. :class:`Line` takes
two analysed steps; :meth:`Line.agrees` checks a third analysed one event by event and
figure by figure; :meth:`Line.at` derives a point, or returns ``None`` where it cannot
do so exactly (a size that would not be a whole number of bytes, or a peak at an event
whose make-up neither analysed step knows), and that point is then analysed.

>>> import dataclasses, torch
>>> from fxinspect.options import Options
>>> from fxinspect.planning.points import analysed_point
>>> model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
>>> step = lambda b: Analysed.of(*analysed_point(model, lambda b: torch.randn(b, 8), b, None, Options(timing=False, backward=True)))
>>> line, third = Line(step(2), step(16)), step(9)
>>> line.agrees(third), line.at(5, (third,)) == dataclasses.replace(step(5).point, derived=True)
(True, True)
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from ..records import MemoryRecord
from ..report import Report
from .points import StepPoint

__all__ = ["Analysed", "Line"]


@dataclass(frozen=True)
class Analysed:
    """An analysed step: its point and the memory record it came from."""

    point: StepPoint
    memory: MemoryRecord

    @classmethod
    def of(cls, report: Report, point: StepPoint) -> Analysed:
        return cls(point, report.memory)

    @property
    def run_peaks(self) -> bool:
        """Whether the run's peak is the step's (not the optimizer's ``step()``)."""
        return self.point.total_peak == self.point.resident + self.point.peak

    @functools.cached_property  # (a scan of the timeline: asked for every point derived)
    def peak_event(self) -> int:
        """The timeline's index where the run's peak is first reached."""
        return next(i for i, (_, live) in enumerate(self.memory.timeline) if live == self.memory.peak)


class Line:
    """A step's figures as affine functions of the batch, through two analysed steps."""

    def __init__(self, lo: Analysed, hi: Analysed) -> None:
        self.lo, self.hi = (lo, hi) if lo.point.batch < hi.point.batch else (hi, lo)
        self._checked: dict[int, bool] = {}  # batch -> whether that analysed step is on the line
        a, b = self.lo.memory.timeline, self.hi.memory.timeline
        # the same events in the same order: each op index alike (sizes may differ)
        self.aligned = (
            self.lo.point.batch < self.hi.point.batch
            and len(a) == len(b)
            and all(x[0] == y[0] for x, y in zip(a, b))
            and self.lo.point.method == self.hi.point.method
            and self.lo.point.seq_len == self.hi.point.seq_len
            and all(p.latency is None and p.predicted_latency is None for p in (self.lo.point, self.hi.point))
        )

    def timeline(self, batch: int) -> list[int] | None:
        """The bytes alive after each event at ``batch`` (``None`` if not whole numbers)."""
        if not self.aligned:
            return None
        lo, hi = self.lo.point.batch, self.hi.point.batch
        out = []
        for (_, low), (_, high) in zip(self.lo.memory.timeline, self.hi.memory.timeline):
            value = _affine(lo, low, hi, high, batch)
            if value is None:
                return None
            out.append(value)
        return out

    def at(self, batch: int, known: tuple[Analysed, ...] = ()) -> StepPoint | None:
        """The step at ``batch``, derived, or ``None`` when it cannot be derived exactly.

        The peak is the highest point of the derived timeline. What holds it is known
        where an analysed step peaked at the same event (or, when the optimizer's step is
        the higher point, where an analysed step's was too): each part is affine in the
        batch, so two such steps (the line's ends or ``known`` ones) give it.
        """
        found = self._figures(batch)
        if found is None:
            return None
        point, event = found
        on_line = tuple(s for s in known if self._on_line(s))  # (a step off it may be made otherwise)
        parts = self._parts(point, event, (self.lo, self.hi, *on_line))
        return None if parts is None else dataclasses.replace(point, composition=parts, derived=True)

    def _on_line(self, step: Analysed) -> bool:
        """Whether ``step``'s timeline is the line's at its batch, event for event."""
        batch = step.point.batch
        if batch not in self._checked:
            lives = self.timeline(batch) if len(step.memory.timeline) == len(self.lo.memory.timeline) else None
            self._checked[batch] = lives == [live for _, live in step.memory.timeline]
        return self._checked[batch]

    def _figures(self, batch: int) -> tuple[StepPoint, int] | None:
        """The point at ``batch`` without the make-up of its peak, and the timeline's event
        where the run peaks (``None`` where a figure would not be a whole number)."""
        lives = self.timeline(batch)
        if lives is None:
            return None
        peak = max(lives)
        lo, hi = self.lo, self.hi
        at = lambda low, high: _affine(lo.point.batch, low, hi.point.batch, high, batch)  # noqa: E731
        m_lo, m_hi = lo.memory, hi.memory
        resident = at(m_lo.resident, m_hi.resident)
        flops, macs = at(lo.point.flops, hi.point.flops), at(lo.point.macs, hi.point.macs)
        if None in (resident, flops, macs):
            return None
        total = resident + peak
        if m_lo.optimizer_step is not None:  # the optimizer's step beside what the backward left
            held, step = at(_held(m_lo), _held(m_hi)), at(m_lo.optimizer_step, m_hi.optimizer_step)
            if held is None or step is None:
                return None
            total = max(total, resident + held + step)
        point = dataclasses.replace(
            lo.point,
            batch=batch,
            flops=flops,
            macs=macs,
            peak=peak,
            total_peak=total,
            resident=resident,
            composition={},
        )
        return point, lives.index(peak)

    @staticmethod
    def _parts(point: StepPoint, event: int, steps: tuple[Analysed, ...]) -> dict[str, int] | None:
        """What holds ``point``'s total peak, from two of ``steps`` whose peak is made the
        same way (``None`` when fewer than two are)."""
        run_peaks = point.total_peak == point.resident + point.peak
        # the run's peak is made of what is alive at its event; the optimizer step's, of
        # what the backward left and the step itself, whatever event the run peaked at
        alike = {
            s.point.batch: s
            for s in steps
            if s.point.batch != point.batch and s.run_peaks == run_peaks and (s.peak_event == event or not run_peaks)
        }
        if len(alike) < 2:
            return None
        a, b = list(alike.values())[:2]
        parts = {}
        for name in dict.fromkeys([*a.point.composition, *b.point.composition]):
            got = (a.point.composition.get(name, 0), b.point.composition.get(name, 0))
            size = _affine(a.point.batch, got[0], b.point.batch, got[1], point.batch)
            if size is None:
                return None
            if size:
                parts[name] = size
        return parts if sum(parts.values()) == point.total_peak else None

    def agrees(self, third: Analysed) -> bool:
        """Whether an analysed step lies on the line: every event of its timeline, every
        figure of its point, and the make-up of its peak where two other analysed steps
        peaked the same way (where none did, it is what later points derive theirs from)."""
        batch = third.point.batch
        found = self._figures(batch)
        if found is None or [live for _, live in third.memory.timeline] != self.timeline(batch):
            return False
        point, event = found
        if dataclasses.replace(point, composition=third.point.composition) != third.point:
            return False
        parts = self._parts(point, event, (self.lo, self.hi))
        return parts is None or parts == third.point.composition


def _held(memory: MemoryRecord) -> int:
    """What the loop holds beside the optimizer's step (as ``MemoryRecord.total_peak``)."""
    return memory.held_after_backward if memory.held_after_backward is not None else (memory.gradients or 0)


def _affine(x0: int, y0: int | None, x1: int, y1: int | None, x: int) -> int | None:
    """The value at ``x`` of the line through ``(x0, y0)`` and ``(x1, y1)``, when it is a
    whole number (``None`` otherwise, or when either value is unknown)."""
    if y0 is None or y1 is None:
        return None
    rise, left = divmod((y1 - y0) * (x - x0), x1 - x0)
    return None if left else y0 + rise
