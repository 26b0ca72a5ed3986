"""``fxinspect.checkpoint_plan``: which modules to recompute for a step to fit a budget, cheaply.

The step is analysed once without checkpoints; :mod:`.recompute` reads from it what
checkpointing each module frees and costs, and builds greedy orders of modules (most
estimated peak lowered per unit of recompute cost first). Along the order whose estimate
reaches the budget most cheaply, plans are *analysed* with the checkpoints applied (by
default on the meta device), and the one with the fewest modules whose analysed peak fits
is the plan: the cheapest the greedy search finds, not a proven optimum.
``plan.apply(model)`` checkpoints its modules in the user's model (:mod:`.applied`).

>>> import torch, fxinspect
>>> block = lambda: torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.GELU(), torch.nn.Linear(512, 64))
>>> model = torch.nn.Sequential(*(block() for _ in range(4)))
>>> unplanned = fxinspect.analyze(model, torch.randn(256, 64), backward=True, device="meta").memory.total_peak
>>> plan = fxinspect.checkpoint_plan(model, torch.randn(256, 64), budget=int(0.8 * unplanned))
>>> plan.modules, plan.peak <= 0.8 * unplanned
(('0', '1'), True)
>>> handle = plan.apply(model)      # model's blocks 0 and 1 now recompute in the backward
>>> handle.remove()
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.utils.checkpoint

from ..capture.base import Method
from ..errors import InputError
from ..formatting import units
from ..options import Options, own_parameters, signature_of
from ..progress import note, reported
from ..run.prepare import unwrapped
from .applied import AppliedPlan, checkpointable
from .budget import Budget
from .plan import CheckpointPlan, CurvePoint, flops_text
from .points import analysed_point
from .points import composition as composition_of
from .recompute import Candidate, candidates, estimated_peak, orders

__all__ = ["checkpoint_plan"]


@reported("checkpoint_plan")
def checkpoint_plan(
    model: torch.nn.Module,
    example_inputs: Any,
    budget: int | str,
    *,
    reserve: int | float | str = 0,
    kwargs: dict | None = None,
    device: str | None = "meta",
    timing: bool = False,
    **options: Any,
) -> CheckpointPlan:
    """Modules to checkpoint for the training step to fit ``budget``, at a low recompute cost.

    ``budget`` is total bytes as ``report.memory.total_peak`` counts them (an int or
    ``"24GiB"``; ``reserve`` kept back); the other keywords are :func:`~fxinspect.analyze`'s
    options (``optimizer``, ``loss_fn``, ``device_spec``, ...), checked as ``analyze``
    checks them (:class:`~fxinspect.options.Options`), with the planning defaults
    ``device="meta"`` (not ``analyze``'s ``None``) and ``timing=False``, and
    ``backward=True`` always. The recompute cost is measured latency when the
    step was timed, the time model's with ``device_spec``, FLOPs otherwise. When no plan
    along the orders fits, the lowest analysed one is returned (``plan.fits`` is False)
    with a note saying what holds the peak. A model only ``eager`` can capture (its
    program traces through ``torch.utils.checkpoint``; ``export`` keeps the checkpoints)
    has its plans analysed as one leaf of a symbolic capture, which runs the checkpoints
    as the model does (a note says so).
    """
    limit = Budget.of(budget, reserve)
    given = {**options, "backward": True, "device": device, "timing": timing}
    opts = Options.of("checkpoint_plan", given, own=own_parameters(checkpoint_plan))
    target = unwrapped(model, "checkpoint_plan")[0]

    whole_notes: list[str] = []

    def analysed(paths: Sequence[str]):
        with AppliedPlan(model, paths):
            report, point = analysed_point(model, lambda _: example_inputs, 0, None, opts, kwargs)
            if report.capture.lost_checkpoints:  # (export and eager trace through checkpoints)
                method = report.capture.method
                report, point = _as_one_leaf(target, example_inputs, opts, kwargs)
                if not whole_notes:
                    whole_notes.append(
                        f"plans analysed with the model as one leaf: its {method} capture traced through the "
                        "checkpoints; their memory is followed storage by storage as it runs"
                    )
        if report.capture.lost_checkpoints:
            raise InputError(
                f"checkpoint_plan cannot analyse its plans for {type(target).__name__}: the {report.capture.method} "
                f"capture traced through the checkpoints of {', '.join(report.capture.lost_checkpoints)}, so their "
                "recomputation would not be seen (only the symbolic and export tiers keep checkpoints)"
            )
        return report, point

    base, point = analysed(())
    if opts.method == Method.AUTO:
        # every plan on the base's tier: figures comparable to the base's (auto would take
        # export over symbolic's one node per checkpoint, where both give the same memory)
        opts = dataclasses.replace(opts, method=base.capture.method)
    found, basis = candidates(base)
    notes = []
    taken = [c.path for c in found if not checkpointable(target.get_submodule(c.path))]
    if taken:
        notes.append(f"left out {taken}: their forward is already replaced on the instance")
        found = [c for c in found if c.path not in taken]
    total_saved = sum(n.saved_bytes or 0 for n in base.nodes if n.is_op)
    peaks: dict[frozenset, int] = {frozenset(): point.total_peak}
    reports = {frozenset(): base}

    def peak_of(plan: Sequence[Candidate]) -> int:
        key = frozenset(c.path for c in plan)
        if key not in peaks:
            failing[:] = plan
            note(f"a plan of {len(plan)} modules ({len(peaks)} analysed)")
            reports[key], p = analysed([c.path for c in plan])
            peaks[key] = p.total_peak
        return peaks[key]

    failing: list[Candidate] = []
    while True:
        try:
            chosen, curves = _search(found, point.total_peak, total_saved, basis, limit.usable, peak_of)
            break
        except torch.utils.checkpoint.CheckpointError as exc:
            # a module whose recomputation takes another path than its forward, which torch
            # refuses. MultiheadAttention does under saved-tensor hooks (the memory model's):
            # its recomputation gets fresh tensor objects, so its "query is key" test fails.
            # Find the kind by checkpointing one module of each kind alone, and leave it out
            kinds = {c.type: c for c in failing}
            bad = [kind for kind, c in kinds.items() if not _recomputes(peak_of, c)]
            if not bad:
                raise InputError(f"checkpoint_plan: a plan of {[c.path for c in failing]} failed: {exc}") from exc
            notes.append(
                f"left out every {', '.join(bad)}: checkpointed under the memory model's saved-tensor hooks, "
                "torch recomputes it along another path than its forward (and refuses)"
            )
            found = [c for c in found if c.type not in bad]
    if chosen is None:  # the lowest plan analysed, along the order it came from
        lowest, k, order, curve = min(
            (
                (peaks[key], k, order, curve)
                for *_, order, curve in curves
                for k in range(len(curve))
                if (key := frozenset(c.path for c in order[:k])) in peaks
            ),
            key=lambda t: (t[0], t[1]),
        )
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
    applied = reports[frozenset(plan.modules)].totals  # what the analysed step recomputed
    flops = applied.backward_flops - base.totals.backward_flops
    macs = applied.backward_macs - base.totals.backward_macs
    if (flops, macs) != (plan.recompute_flops, plan.recompute_macs):
        notes.append(
            f"the analysed step recomputed {flops_text(flops)} and {units.count(macs)}MACs where the unplanned "
            f"report predicted {flops_text(plan.recompute_flops)} and {units.count(plan.recompute_macs)}MACs"
        )
    return CheckpointPlan(
        modules=plan.modules,
        peak=peaks[frozenset(plan.modules)],
        unplanned_peak=point.total_peak,
        budget=limit,
        recompute_flops=flops,
        recompute_macs=macs,
        recompute_seconds=plan.recompute_seconds,
        cost_basis=basis,
        curve=tuple(curve),
        notes=(*notes, *whole_notes, f"{len(peaks)} {'plan' if len(peaks) == 1 else 'plans'} analysed"),
    )


checkpoint_plan.__signature__ = signature_of(  # help() lists analyze's options too (backward is always on)
    checkpoint_plan, [f.name for f in dataclasses.fields(Options) if f.name != "backward"]
)


def _search(found, base_peak: int, total_saved: int, basis: str, usable: int, peak_of) -> tuple:
    """The greedy orders, the likeliest first, walked until one has a plan that fits.

    Returns ``((order, curve, k) or None, [(rank..., order, curve), ...])``.
    """
    curves = []  # (no estimated fit, its cost, lowest estimate, order, curve)
    for order in orders(found, base_peak, total_saved, basis) or [[]]:
        curve = [_curve_point(order[:k], base_peak, total_saved, basis) for k in range(len(order) + 1)]
        reach = next((c for c in curve if c.estimated_peak <= usable), None)
        cost = 0.0 if reach is None else reach.recompute_seconds if basis != "FLOPs" else reach.recompute_flops
        curves.append((reach is None, cost, curve[-1].estimated_peak, order, curve))
    curves.sort(key=lambda t: t[:3])
    for *_, order, curve in curves:
        k = _smallest_fitting(lambda k, order=order: peak_of(order[:k]), curve, usable)
        if k is not None:
            return (order, curve, k), curves
    return None, curves


def _recomputes(peak_of, candidate: Candidate) -> bool:
    """Whether a plan of ``candidate`` alone analyses (torch accepts its recomputation)."""
    try:
        peak_of([candidate])
    except torch.utils.checkpoint.CheckpointError:
        return False
    return True


class _Whole(torch.nn.Module):
    """A parent that only calls the model: symbolic tracing keeps the model as one leaf
    below it, and the leaf runs (and checkpoints) as the model does."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)


def _as_one_leaf(model: torch.nn.Module, example_inputs: Any, opts: Options, kwargs: dict | None):
    """The step analysed through :class:`_Whole`, the model a leaf of a symbolic capture."""
    whole = dataclasses.replace(opts, method=Method.SYMBOLIC, leaf_modules=(*opts.leaf_modules, model))
    return analysed_point(_Whole(model), lambda _: example_inputs, 0, None, whole, kwargs)


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
    """The fewest modules along an order whose analysed peak fits, or ``None``.

    Peaks are assumed to fall along the order. The first guess is where the estimate
    fits; then on by the estimate's error, or back one module and then by halving.
    """
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
