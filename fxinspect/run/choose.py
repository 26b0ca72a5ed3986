"""Which capture to keep: the first tier's, unless its count leaves ops uncounted.

``method="auto"`` takes the first tier that captures the model; but a capture whose
count is partial is worse than a later tier's complete one (under ``torch.export``
transformers routes mixture-of-experts layers through a custom op that a symbolic trace
reaches as ``aten`` ops). :func:`count_best` captures and counts the next tiers only
when the first count is partial.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..capture import Capture, Method, captures
from ..capture.autocast_cache import fresh_autocast_cache
from ..capture.base import one_line
from ..capture.states import held_tensors, rewound
from ..options import Options
from .passes import PassResult
from .passes.count import CountPass, uncounted
from .passes.counted import counted_run, rides_along
from .program import InstrumentedProgram

__all__ = ["Counted", "count_best", "count_with"]


@dataclass(frozen=True)
class Counted:
    """The capture kept, its counting pass, and what choosing it added to the capture's
    own notes and failures (kept beside it: the capture record is not changed)."""

    program: InstrumentedProgram
    result: PassResult
    notes: tuple[str, ...] = ()
    failures: tuple[tuple[str, str], ...] = ()


def count_best(
    model: torch.nn.Module,
    args: tuple,
    kwargs: dict,
    options: Options,
    batch_dims: Any = None,
    captured: Callable[[Capture], None] | None = None,
) -> Counted:
    """Capture and count ``model``: the first capture, unless its count is partial.

    ``method="auto"`` must not report partial totals when another tier counts every op
    (under ``torch.export`` transformers routes MoE experts through a custom op that a
    symbolic trace reaches as ``aten`` ops). So when the first capture's count leaves ops
    uncounted, the remaining tiers are captured and counted in turn, and the first whose
    count is complete is kept; if none is, the first. Which, and why, goes to the
    notes. A count without uncounted ops (the common case) costs nothing more.
    ``batch_dims``: as for :func:`~fxinspect.capture.captures`. ``captured(capture)`` is
    called with the first capture before it is counted (a sweep forks its workers then).
    """
    attempts = captures(
        model,
        args,
        kwargs,
        method=options.method,
        leaf_modules=options.leaf_modules,
        batch_dims=batch_dims,
        backward=options.backward,  # (no capture that lost a custom Function's backward)
    )
    capture = next(attempts)
    if captured is not None:
        captured(capture)
    first = count_with(capture, model, options)
    missing = uncounted(first.result)
    if not missing or options.method != Method.AUTO:
        return first
    tier = first.program.method
    why = f"its count left {', '.join(missing)} uncounted"
    tried = []
    while True:
        try:
            # the next tier runs only now; one that cannot capture or count ends the search
            other = count_with(next(attempts), model, options)
        except StopIteration:
            break
        except Exception as exc:
            tried.append(f"stopped looking: {one_line(exc)}")
            break
        left = uncounted(other.result)
        if not left:
            method = other.program.method
            return Counted(
                other.program,
                other.result,
                notes=(f"method='auto' chose the {method} tier: the {tier} tier captured first but {why}",),
                failures=((tier, f"{why}; {method} counts every op"),),
            )
        tried.append(f"{other.program.method} leaves {', '.join(left)} uncounted")
    others = "; ".join(tried) or "no other tier captures"
    return Counted(first.program, first.result, notes=(f"method='auto' kept the {tier} tier although {why}: {others}",))


def count_with(cap: Capture, model: torch.nn.Module, options: Options) -> Counted:
    """The instrumented program of ``cap`` and its counting pass (with the memory model,
    and the backward, in the same run when they can ride along: :func:`~.passes.counted.rides_along`)."""
    program = InstrumentedProgram(cap)
    # a state object's tensors the count writes (a static cache) are put back: the later
    # passes, and another tier's count, run the step on the cache it was given
    states = held_tensors(cap.inputs.args, cap.inputs.kwargs)
    with fresh_autocast_cache(), rewound(states):  # (the capture, or another tier's count, may have cast weights)
        if rides_along(options):
            return Counted(program, counted_run(program, options, model))
        return Counted(program, CountPass(options.check_finite, model=model).run(program))
