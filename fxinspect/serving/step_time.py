"""A step's predicted time at any size: the time model over one cost curve per aten call.

The time model prices each aten call of a node on its own
(:mod:`fxinspect.timemodel.pricing`): ``max(FLOPs / peak, bytes / bandwidth)`` (or a
measured matmul rate) plus a launch per call. A sum of maxima is no polynomial, so a curve of the step's total time
would not be exact; but each call's FLOPs, bytes and calls are (exact curves in batch and
context, :mod:`.curves`), so pricing the calls' curves one by one gives the time model's
own answer at a size never analysed, exactly as an analysis there would.

>>> import torch, fxinspect
>>> r = fxinspect.analyze(torch.nn.Linear(8, 4), torch.zeros(2, 8), device="meta")
>>> sorted(call_figures(r))
['linear/aten.addmm.default/bytes', 'linear/aten.addmm.default/calls', 'linear/aten.addmm.default/flops']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records import DeviceSpec, OpStatus
from ..records.device_spec import priced_dtype
from ..timemodel.pricing import call_seconds

__all__ = ["StepTime", "call_figures", "node_dtypes", "range_time", "step_seconds"]

_PARTS = ("flops", "bytes", "calls")


def call_figures(report: Any) -> dict[str, int]:
    """Per priced aten call of every op node (``node/op/part``, ``op`` with ``:kind`` where
    the call has one, :attr:`~fxinspect.records.nodes.AtenCall.kind`): its FLOPs, bytes
    moved and number of calls, the integers the time model prices (free ops cost nothing)."""
    out: dict[str, int] = {}
    for node in report.nodes:
        if not node.is_op:
            continue
        for call in node.aten:
            if call.status is OpStatus.FREE:
                continue
            key = f"{node.name}/{call.op}{':' + call.kind if call.kind else ''}/"  # (a kind prices it)
            out[key + "flops"] = call.flops
            out[key + "bytes"] = call.bytes_read + call.bytes_written
            out[key + "calls"] = call.calls
    return out


def node_dtypes(report: Any) -> dict[str, str | None]:
    """The dtype each op node of ``report`` is priced at, by node."""
    return {n.name: priced_dtype(n.outputs) for n in report.nodes if n.is_op}


class StepTime:
    """The predicted seconds of a step at ``(batch, context)``, from per-call curves.

    ``curves`` maps :func:`call_figures`' names to fitted curves (:class:`~.curves.Curve`);
    ``dtypes`` each node's priced dtype (:func:`node_dtypes` of one analysed step). Calls
    whose curves do not depend on the context (a projection's GEMM) are priced once per batch.
    """

    def __init__(self, curves: Mapping[str, Any], dtypes: Mapping[str, str | None], spec: DeviceSpec) -> None:
        self.spec = spec
        calls = []  # ((node's dtype, aten op, kind), (flops, bytes, calls) as float evaluators, whether any reads the context)
        for key in dict.fromkeys(name.rsplit("/", 1)[0] for name in curves):
            parts = [curves[f"{key}/{part}"] for part in _PARTS]
            node, op = key.split("/", 1)
            op, _, kind = op.partition(":")
            calls.append(((dtypes[node], op, kind), [_floats(c) for c in parts], any(_reads_context(c) for c in parts)))
        self._fixed = [(d, f) for d, f, varies in calls if not varies]
        self._varying = [(d, f) for d, f, varies in calls if varies]
        self._fixed_at: dict[int, float] = {}

    def __call__(self, batch: int, context: int) -> float:
        fixed = self._fixed_at.get(batch)
        if fixed is None:
            fixed = self._fixed_at[batch] = self._priced(self._fixed, batch, 0)
        return fixed + self._priced(self._varying, batch, context)

    def mean(self, batch: int, first: int, last: int) -> float:
        """The mean over the contexts ``first..last`` (each step priced: the bound can change)."""
        return sum(self(batch, c) for c in range(first, last + 1)) / (last - first + 1)

    def _priced(self, calls: list, b: int, c: int) -> float:
        return sum(
            call_seconds(self.spec, op, flops(b, c), moved(b, c), count(b, c), dtype, kind)
            for (dtype, op, kind), (flops, moved, count) in calls
        )


def _reads_context(curve: Any) -> bool:
    return any((t.c or t.m) and k for t, k in zip(curve.terms, curve.coefficients))


def _floats(curve: Any):
    """``curve`` evaluated in floats (the time model's arithmetic), its zero terms dropped."""
    pairs = [(float(k), t) for t, k in zip(curve.terms, curve.coefficients) if k]
    return lambda b, c: sum(k * t(b, c) for k, t in pairs)


def step_seconds(gen: Any, context: int, batch: int) -> float | None:
    """A decode step's predicted seconds at ``context`` for ``batch`` sequences: priced from
    its range's per-call curves (:func:`range_time`), or the analysed step's where they are not verified."""
    timed = range_time(gen, context) if batch >= gen._batches[0] else None
    return timed(batch, context) if timed is not None else gen._summary(batch, context)["totals"]["seconds"]


def range_time(gen: Any, context: int) -> StepTime | None:
    """The :class:`StepTime` of ``context``'s range of ``gen``'s curves (``None`` unless every call's is verified)."""
    where = gen.segments.range_of(context)
    if where is not None and where not in gen._timed:
        curves = gen.segments.curves(context) or {}
        calls = {k: v for k, v in curves.items() if k.count("/") == 2}
        lo, hi = where  # (a step of this range analysed here, for each node's dtype)
        b, c = next((p for p in gen._summaries if lo <= p[1] and (hi is None or p[1] <= hi)), (1, lo))
        exact = calls and all(v.verified for v in calls.values())
        dtypes = gen._summary(b, c)["dtypes"] if exact else {}
        gen._timed[where] = StepTime(calls, dtypes, gen.prefill.time_model) if exact else None
    return gen._timed.get(where)
