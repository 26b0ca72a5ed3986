"""Which capture to keep: the first tier's, unless its count leaves ops uncounted.

``method="auto"`` takes the first tier that captures the model; but a capture whose
count is partial is worse than a later tier's complete one (under ``torch.export``
transformers routes mixture-of-experts layers through a custom op that a symbolic trace
reaches as ``aten`` ops). :func:`count_best` captures and counts the next tiers only
when the first count is partial.
"""

from __future__ import annotations

import torch

from ..capture import Capture, Method, captures
from ..capture.base import one_line
from .passes import PassResult
from .passes.count import CountPass, uncounted
from .program import InstrumentedProgram

__all__ = ["count_best", "count_with"]


def count_best(model, args, kwargs, method, leaf_modules, check_finite) -> tuple[InstrumentedProgram, PassResult]:
    """Capture and count ``model``: the first capture, unless its count is partial.

    ``method="auto"`` must not report partial totals when another tier counts every op
    (under ``torch.export`` transformers routes MoE experts through a custom op that a
    symbolic trace reaches as ``aten`` ops). So when the first capture's count leaves ops
    uncounted, the remaining tiers are captured and counted in turn, and the first whose
    count is complete is kept; if none is, the first. Which, and why, goes to the
    capture's notes. A count without uncounted ops (the common case) costs nothing more.
    """
    attempts = captures(model, args, kwargs, method=method, leaf_modules=leaf_modules)
    first = count_with(next(attempts), model, check_finite)
    missing = uncounted(first[1])
    if not missing or method != Method.AUTO:
        return first
    tier = first[0].method
    why = f"its count left {', '.join(missing)} uncounted"
    tried = []
    while True:
        try:
            # the next tier runs only now; one that cannot capture or count ends the search
            other = count_with(next(attempts), model, check_finite)
        except StopIteration:
            break
        except Exception as exc:
            tried.append(f"stopped looking: {one_line(exc)}")
            break
        left = uncounted(other[1])
        if not left:
            cap = other[0].capture
            cap.failures.append((tier, f"{why}; {cap.method} counts every op"))
            cap.notes.append(f"method='auto' chose the {cap.method} tier: the {tier} tier captured first but {why}")
            return other
        tried.append(f"{other[0].method} leaves {', '.join(left)} uncounted")
    others = "; ".join(tried) or "no other tier captures"
    first[0].capture.notes.append(f"method='auto' kept the {tier} tier although {why}: {others}")
    return first


def count_with(cap: Capture, model: torch.nn.Module, check_finite: bool) -> tuple[InstrumentedProgram, PassResult]:
    """The instrumented program of ``cap`` and its counting pass."""
    program = InstrumentedProgram(cap)
    return program, CountPass(check_finite, model=model).run(program)
