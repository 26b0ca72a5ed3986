"""A checkpoint plan: the modules, the analysed peak, the recompute cost and the curve.

:func:`~.checkpointing.checkpoint_plan` finds it; ``plan.apply(model)`` applies it
(:mod:`.applied`); ``plan.table()`` and ``plan.plot(path)`` show the trade-off curve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..formatting import units
from .applied import AppliedPlan
from .budget import Budget

__all__ = ["CheckpointPlan", "CurvePoint", "flops_text"]


@dataclass(frozen=True)
class CurvePoint:
    """One plan along an order: its modules, estimated peak and recompute cost.

    ``analysed_peak`` is the analysed peak when the search analysed it, else ``None``.
    """

    modules: tuple[str, ...]
    estimated_peak: int
    recompute_flops: int
    recompute_macs: int
    recompute_seconds: float | None
    analysed_peak: int | None = None

    @property
    def peak(self) -> int:
        return self.analysed_peak if self.analysed_peak is not None else self.estimated_peak


@dataclass(frozen=True)
class CheckpointPlan:
    """The modules to checkpoint, the analysed peak with them, and what recomputing costs.

    ``peak`` is the analysed ``total_peak`` with the plan applied (``unplanned_peak``
    without); ``recompute_flops``/``recompute_macs`` the forward work the analysed
    step's backward redid (the curve's figures are predicted from the unplanned step;
    a note says when the two differ), ``recompute_seconds`` its time on the ``cost_basis`` (``None`` when that is
    FLOPs). ``curve`` holds every plan along the order (fewest modules first), its peaks
    falling and its costs rising; those analysed carry their analysed peak.
    """

    modules: tuple[str, ...]
    peak: int
    unplanned_peak: int
    budget: Budget
    recompute_flops: int
    recompute_macs: int
    recompute_seconds: float | None
    cost_basis: str
    curve: tuple[CurvePoint, ...]
    notes: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        """Whether the plan's analysed peak is within the usable budget."""
        return self.peak <= self.budget.usable

    def apply(self, model: torch.nn.Module) -> AppliedPlan:
        """Checkpoint the plan's modules in ``model``; the handle's ``remove()`` undoes it.

        Non-reentrant ``torch.utils.checkpoint``, set on each module instance: see
        :mod:`.applied`.
        """
        return AppliedPlan(model, self.modules)

    def table(self, tablefmt: str = "simple") -> str:
        """The trade-off curve as a text table."""
        from tabulate import tabulate

        rows = []
        for c in self.curve:
            chosen = "◀ plan" if c.modules == self.modules else ""
            rows.append(
                [
                    len(c.modules),
                    units.nbytes(c.estimated_peak),
                    units.nbytes(c.analysed_peak),
                    units.count(c.recompute_flops),
                    units.seconds(c.recompute_seconds),
                    chosen,
                ]
            )
        headers = ["modules", "estimated peak", "analysed peak", "recompute FLOPs", "recompute time", ""]
        align = ["right"] * 5 + ["left"]
        return tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True, colalign=align)

    def __str__(self) -> str:
        head = "fits" if self.fits else "does not fit"
        names = ", ".join(self.modules[:6]) + (", ..." if len(self.modules) > 6 else "")
        return (
            f"checkpoint {len(self.modules)} module(s): {names or 'none'}\n"
            f"peak {units.nbytes(self.peak)} ({head} {self.budget}; {units.nbytes(self.unplanned_peak)} unplanned), "
            f"recomputing {flops_text(self.recompute_flops)}"
            + (f" ({units.seconds(self.recompute_seconds)})" if self.recompute_seconds is not None else "")
            + "".join(f"\nnote: {n}" for n in self.notes)
        )

    def plot(self, path: Any = None):
        """The trade-off curve, the plan and the budget (see :func:`.plots.plot_checkpoint_plan`)."""
        from .plots import plot_checkpoint_plan

        return plot_checkpoint_plan(self, path)


def flops_text(n: int) -> str:
    """``1.50 GFLOPs``, ``0 FLOPs``."""
    text = units.count(n)
    return f"{text}FLOPs" if text[-1].isalpha() else f"{text} FLOPs"
