"""What checkpointing each module would save and cost, and a plan's peak, from one report.

Read from the analysed step without checkpoints (``backward=True``):

* a module's *saving*: the bytes its nodes allocate that autograd keeps for the backward,
  less its output (what follows it usually saves its input, so that stays): what
  checkpointing the module frees between its forward and its backward;
* its *recomputation*: the checkpoint reruns the module's forward in the backward as far
  as the last tensor autograd saved in it (``torch.utils.checkpoint`` stops there; each
  node's ``saves`` says what it saved), so its FLOPs, MACs and time are those of that
  prefix, and while its backward runs its saved tensors exist again.

:func:`estimated_peak` follows the classic account (Chen et al., 2016, "Training deep
nets with sublinear memory cost"): at the backward's start every saved tensor not
checkpointed is alive; while a checkpointed module's backward runs, the saved tensors of
the modules before it (less their checkpointed ones) and the module's own recomputed
ones are. The estimate is the unplanned peak moved by that difference; plans are then
analysed for the peak itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..records import NodeRecord, Saves
from ..report import Report

__all__ = ["Candidate", "candidates", "estimated_peak", "greedy_order", "orders"]


@dataclass(frozen=True)
class Candidate:
    """A module that could be checkpointed, with the figures a plan adds up."""

    path: str
    type: str
    first: int  # position of its first op node in the graph
    saved_before: int  # saved bytes of the nodes before it
    saving: int  # saved bytes checkpointing it frees until its backward
    recomputed: int  # saved bytes its recomputation makes again, while its backward runs
    flops: int  # of the recomputed forward
    macs: int
    seconds: float | None  # of the recomputed forward (measured, or the time model's)

    @property
    def depth(self) -> int:
        return self.path.count(".") + 1

    def cost(self, basis: str) -> float:
        return self.seconds if basis != "FLOPs" and self.seconds is not None else float(self.flops)

    def contains(self, other: Candidate) -> bool:
        return not self.path or other.path.startswith(self.path + ".")


def candidates(report: Report) -> tuple[list[Candidate], str]:
    """Modules of ``report`` worth checkpointing, and the cost basis.

    A candidate is called once and frees something. The basis is ``"measured latency"``,
    ``"predicted latency"`` or ``"FLOPs"``, whichever every op node has.
    """
    ops = [n for n in report.nodes if n.is_op]
    position = {n.name: i for i, n in enumerate(ops)}
    by_name = {n.name: n for n in ops}
    before = [0]
    for n in ops:
        before.append(before[-1] + (n.saved_bytes or 0))
    basis = _basis(ops)
    found = []
    for m in report.modules.values():
        if not m.path or m.calls != 1 or m.counted_in is not None:
            continue
        nodes = sorted((by_name[x] for x in m.nodes if x in by_name), key=lambda n: position[n.name])
        if not nodes:
            continue
        saved = sum(n.saved_bytes or 0 for n in nodes)
        saving = saved - sum(t.nbytes for t in nodes[-1].outputs)
        if saving <= 0:
            continue
        rerun = _recomputed(nodes)
        found.append(
            Candidate(
                path=m.path,
                type=m.type,
                first=position[nodes[0].name],
                saved_before=before[position[nodes[0].name]],
                saving=saving,
                recomputed=saved,
                flops=sum(n.flops for n in rerun),
                macs=sum(n.macs for n in rerun),
                seconds=_seconds(rerun, basis),
            )
        )
    return found, basis


def _recomputed(nodes: Sequence[NodeRecord]) -> Sequence[NodeRecord]:
    """The nodes a checkpoint's recomputation runs.

    Up to the last node that autograd saved something for, that one included only when
    it saved a tensor of its own: torch packs an op's inputs before the op runs and its
    outputs after it, and stops at the last pack.
    """
    savers = [i for i, n in enumerate(nodes) if n.saves in (Saves.INPUTS, Saves.OWN)]
    if not savers:
        return ()
    last = savers[-1]
    return nodes[: last + 1] if nodes[last].saves == Saves.OWN else nodes[:last]


def _basis(ops: Sequence[NodeRecord]) -> str:
    if ops and all(n.latency is not None for n in ops):
        return "measured latency"
    if ops and all(n.predicted_latency is not None for n in ops):
        return "predicted latency"
    return "FLOPs"


def _seconds(nodes: Sequence[NodeRecord], basis: str) -> float | None:
    if basis == "measured latency":
        return sum(n.latency for n in nodes)
    if basis == "predicted latency":
        return sum(n.predicted_latency for n in nodes)
    return None


def estimated_peak(base_peak: int, total_saved: int, plan: Sequence[Candidate]) -> int:
    """The estimated peak of ``plan``: the unplanned ``base_peak`` moved by what it changes.

    What changes: the saved tensors alive at the backward's start, or while a
    checkpointed module recomputes, whichever is higher.
    """
    ordered = sorted(plan, key=lambda c: c.first)
    start = total_saved - sum(c.saving for c in ordered)
    during, freed = 0, 0
    for c in ordered:
        during = max(during, c.saved_before - freed + c.recomputed)
        freed += c.saving
    return base_peak - total_saved + max(start, during)


def greedy_order(found: Sequence[Candidate], base_peak: int, total_saved: int, basis: str) -> list[Candidate]:
    """Candidates in the order a plan takes them; each prefix is a plan.

    Each time the one that lowers the estimated peak most per unit of recompute cost,
    never one inside or around a module already taken, until none lowers it: the
    estimated peaks of the prefixes fall.
    """
    plan: list[Candidate] = []
    left = list(found)
    current = estimated_peak(base_peak, total_saved, plan)
    while left:
        best, best_rate, best_peak = None, 0.0, current
        for c in left:
            peak = estimated_peak(base_peak, total_saved, [*plan, c])
            rate = (current - peak) / max(c.cost(basis), 1e-30)
            if peak < current and rate > best_rate:
                best, best_rate, best_peak = c, rate, peak
        if best is None:
            break
        plan.append(best)
        current = best_peak
        left = [c for c in left if not (c.contains(best) or best.contains(c) or c is best)]
    return plan


def orders(found: Sequence[Candidate], base_peak: int, total_saved: int, basis: str) -> list[list[Candidate]]:
    """Greedy orders over every candidate and over the candidates of each depth alone.

    One greedy order can stall: once it takes a large module (ResNet's ``layer1``), that
    module's own recomputation holds the peak and nothing else lowers it, where its
    blocks taken one by one would. Orders over one depth each (the blocks of a network
    are usually one depth) give the search other ways down; they cost estimates only.
    """
    depths = sorted({c.depth for c in found})
    groups = [list(found)] + [[c for c in found if c.depth == d] for d in depths]
    seen, out = set(), []
    for group in groups:
        order = greedy_order(group, base_peak, total_saved, basis)
        key = tuple(c.path for c in order)
        if order and key not in seen:
            seen.add(key)
            out.append(order)
    return out
