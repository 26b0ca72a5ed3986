"""``fxinspect.checkpoint_plan``: which modules to recompute to fit a budget, at the least cost.

The step is analysed once without checkpoints; :mod:`.recompute` reads from it what
checkpointing each module frees and costs, and orders the modules (most peak lowered per
unit of recompute first). Plans along that order are then *analysed* with the
checkpoints applied (by default on the meta device), and the cheapest whose analysed peak
fits is the plan. ``plan.apply(model)`` checkpoints its modules in the user's model with
``torch.utils.checkpoint`` (non-reentrant) without changing its classes, parameter names
or state dict; the handle it returns takes them off again.

>>> import torch, fxinspect
>>> blocks = [torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.GELU(), torch.nn.Linear(512, 64)) for _ in range(4)]
>>> model = torch.nn.Sequential(*blocks)
>>> unplanned = fxinspect.analyze(model, torch.randn(256, 64), backward=True, device="meta").memory.total_peak
>>> plan = fxinspect.checkpoint_plan(model, torch.randn(256, 64), budget=int(0.8 * unplanned))
>>> plan.modules, plan.peak <= 0.8 * unplanned
(('0', '1'), True)
>>> handle = plan.apply(model)      # model's blocks 0 and 1 now recompute in the backward
>>> handle.remove()
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils.checkpoint

from ..errors import InputError
from ..formatting import units
from ..run.prepare import unwrapped
from .budget import Budget
from .points import analysed_point
from .points import composition as composition_of
from .recompute import Candidate, candidates, estimated_peak, orders

__all__ = ["Applied", "CheckpointPlan", "CurvePoint", "checkpoint_plan"]


def _checkpointed_forward(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """The module's own forward, run under a non-reentrant checkpoint."""
    forward = type(module).forward.__get__(module)
    return torch.utils.checkpoint.checkpoint(forward, *args, use_reentrant=False, **kwargs)


class Applied:
    """Checkpoints put on a model's modules; ``remove()`` (or leaving a ``with`` block)
    takes them off. Each module's ``forward`` attribute is set on the instance, so a
    ``copy.deepcopy`` of the model checkpoints the same modules of the copy."""

    def __init__(self, model: torch.nn.Module, paths: Sequence[str]):
        model = unwrapped(model, "plan.apply")[0]  # (paths are the unwrapped model's, as reports give them)
        self.modules = [model.get_submodule(p) for p in paths]
        taken = [p for p, m in zip(paths, self.modules) if "forward" in vars(m)]
        if taken:
            raise InputError(f"cannot checkpoint {taken}: their forward is already replaced on the instance")
        for m in self.modules:
            m.forward = functools.partial(_checkpointed_forward, m)

    def remove(self) -> None:
        for m in self.modules:
            vars(m).pop("forward", None)
        self.modules = []

    def __enter__(self) -> Applied:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


@dataclass(frozen=True)
class CurvePoint:
    """One plan along the order: its modules, estimated peak, recompute cost, and its
    analysed peak when it was analysed (``None`` otherwise)."""

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
    without); ``recompute_flops``/``recompute_macs`` the forward work the backward
    redoes, ``recompute_seconds`` its time on the ``cost_basis`` (``None`` when that is
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
        return self.peak <= self.budget.usable

    def apply(self, model: torch.nn.Module) -> Applied:
        """Checkpoint the plan's modules in ``model`` (``torch.utils.checkpoint``,
        non-reentrant); the returned handle's ``remove()`` undoes it."""
        return Applied(model, self.modules)

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
            f"recomputing {units.count(self.recompute_flops)}FLOPs"
            + (f" ({units.seconds(self.recompute_seconds)})" if self.recompute_seconds is not None else "")
            + "".join(f"\nnote: {n}" for n in self.notes)
        )

    def plot(self, path: Any = None):
        """The trade-off curve, the plan and the budget (see :func:`.plots.plot_checkpoint_plan`)."""
        from .plots import plot_checkpoint_plan

        return plot_checkpoint_plan(self, path)


def checkpoint_plan(
    model: torch.nn.Module,
    example_inputs: Any,
    budget: int | str,
    *,
    reserve: int | float | str = 0,
    device: str | None = "meta",
    kwargs: dict | None = None,
    **options: Any,
) -> CheckpointPlan:
    """The cheapest set of modules to checkpoint for the training step to fit ``budget``.

    ``budget`` is total bytes as ``report.memory.total_peak`` counts them (an int or
    ``"24GiB"``; ``reserve`` kept back); the other keywords are
    :func:`~fxinspect.analyze`'s (``optimizer``, ``loss_fn``, ``device_spec``, ``timing``
    ...), and ``backward=True`` always. The recompute cost is measured latency when the
    step was timed, the time model's with ``device_spec``, FLOPs otherwise. When no plan
    along the order fits, the lowest analysed one is returned (``plan.fits`` is False)
    with a note saying what holds the peak.
    """
    limit = Budget.of(budget, reserve)
    options = {"timing": False, **options, "backward": True, "device": device}
    if kwargs is not None:
        options["kwargs"] = kwargs

    def analysed(paths: Sequence[str]):
        with Applied(model, paths):
            return analysed_point(model, lambda _: example_inputs, 0, None, options)

    base, point = analysed(())
    found, basis = candidates(base)
    total_saved = sum(n.saved_bytes or 0 for n in base.nodes if n.is_op)
    peaks: dict[frozenset, int] = {frozenset(): point.total_peak}
    reports = {frozenset(): base}

    def peak_of(plan: Sequence[Candidate]) -> int:
        key = frozenset(c.path for c in plan)
        if key not in peaks:
            reports[key], p = analysed([c.path for c in plan])
            peaks[key] = p.total_peak
        return peaks[key]

    curves = []
    for order in orders(found, point.total_peak, total_saved, basis):
        curve = [_curve_point(order[:k], point.total_peak, total_saved, basis) for k in range(len(order) + 1)]
        reach = next((c.recompute_flops for c in curve if c.estimated_peak <= limit.usable), None)
        curves.append((reach is None, reach or 0, curve[-1].estimated_peak, order, curve))
    curves.sort(key=lambda t: t[:3])  # the cheapest estimated fit first, then the lowest
    chosen = None
    for *_, order, curve in curves:
        k = _smallest_fitting(lambda k, order=order: peak_of(order[:k]), curve, limit.usable)
        if k is not None:
            chosen = (order, curve, k)
            break
    notes = []
    if chosen is None:  # the lowest plan analysed, along the order it came from
        best = min(
            (
                (peaks[key], k, order, curve)
                for *_, order, curve in curves
                for k in range(len(curve))
                if (key := frozenset(c.path for c in order[:k])) in peaks
            ),
            key=lambda t: (t[0], t[1]),
            default=(point.total_peak, 0, [], [_curve_point([], point.total_peak, total_saved, basis)]),
        )
        lowest, k, order, curve = best
        where = reports[frozenset(c.path for c in order[:k])].memory
        parts = composition_of(where)
        notes.append(
            f"no plan fits: the lowest analysed peak, {units.nbytes(lowest)}, is at "
            f"{where.peak_node or 'the optimizer step'} ({where.peak_phase}); largest part: "
            f"{max(parts, key=parts.get)}"
        )
        chosen = (order, curve, k)
    order, curve, k = chosen
    curve = [dataclasses.replace(c, analysed_peak=peaks.get(frozenset(c.modules))) for c in curve]
    if not found:
        notes.append("no module frees anything by being checkpointed (each saves no more than its output)")
    plan = curve[k]
    return CheckpointPlan(
        modules=plan.modules,
        peak=peaks[frozenset(plan.modules)],
        unplanned_peak=point.total_peak,
        budget=limit,
        recompute_flops=plan.recompute_flops,
        recompute_macs=plan.recompute_macs,
        recompute_seconds=plan.recompute_seconds,
        cost_basis=basis,
        curve=tuple(curve),
        notes=(*notes, f"{len(peaks)} plans analysed"),
    )


def _curve_point(plan: Sequence[Candidate], base_peak: int, total_saved: int, basis: str) -> CurvePoint:
    seconds = None if basis == "FLOPs" else sum(c.seconds for c in plan)
    return CurvePoint(
        modules=tuple(c.path for c in plan),
        estimated_peak=estimated_peak(base_peak, total_saved, plan),
        recompute_flops=sum(c.flops for c in plan),
        recompute_macs=sum(c.macs for c in plan),
        recompute_seconds=seconds,
    )


def _smallest_fitting(peak: Callable[[int], int], curve: Sequence[CurvePoint], usable: int) -> int | None:
    """The fewest modules along an order whose analysed peak fits (peaks assumed to fall
    along it): first where the estimate says, then moving on by the estimate's error, or
    back one module and then by halving."""
    if peak(0) <= usable:
        return 0
    last = len(curve) - 1
    guess = next((k for k, c in enumerate(curve) if c.estimated_peak <= usable), last)
    fails, fits = 0, None
    while fits is None:  # find a plan that fits
        if peak(guess) <= usable:
            fits = guess
            break
        fails = guess
        if fails == last:
            return None
        error = peak(fails) - curve[fails].estimated_peak
        guess = next((k for k in range(fails + 1, last + 1) if curve[k].estimated_peak + error <= usable), last)
    guess = fits - 1  # the estimate is usually close: one module fewer, then halving
    while fits - fails > 1:
        if peak(guess) <= usable:
            fits = guess
        else:
            fails = guess
        guess = (fails + fits) // 2
    return fits
