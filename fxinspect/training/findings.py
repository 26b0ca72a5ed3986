"""What a watched training run reveals: the checks behind ``Watch.summary()``.

* **First NaN/Inf**: the earliest logged step, and in it the first module in forward
  order (outputs, then parameters, then gradients), whose histogram counts a NaN or Inf.
* **Dead units**: a module whose outputs were at least :data:`DEAD` zeros at the last
  logged step.
* **Exploding / vanishing gradients**: a module whose typical gradient magnitude (the
  median binary exponent of its output-gradient norms, else of its parameter
  gradients) rose or fell by :data:`ORDERS` powers of two or more since its first logged
  step, or sits that far above or below the median of all modules at the last one.
* **Frozen parameters**: a module whose parameters (the sum of their absolute values)
  did not change between its last two logged steps while other modules' did.
"""

from __future__ import annotations

import statistics
from typing import Any

from .quantities import FORWARD_ORDER, GRADIENTS, Quantity

__all__ = ["DEAD", "ORDERS", "findings"]

DEAD = 0.9
ORDERS = 10  # 2**10: a thousandfold


def _first_nonfinite(w: Any) -> str | None:
    steps = sorted({s for (n, q) in w._records for s in w.steps(n, q)})
    for step in steps:
        for quantity in FORWARD_ORDER:
            for name in w.names(quantity):
                if step in w.steps(name, quantity):
                    h = w.histogram(name, quantity, step)
                    if h.nonfinite:
                        return (
                            f"first NaN/Inf: step {step}, module {name or '(model)'!r} ({w.types.get(name, '')}), "
                            f"{quantity}: {h.nan} NaN, {h.pos_inf + h.neg_inf} Inf of {h.total}"
                        )
    return None


def _gradient_scale(w: Any, name: str) -> dict[int, float]:
    for quantity in GRADIENTS:
        scale = {s: w.histogram(name, quantity, s).typical_exponent() for s in w.steps(name, quantity)}
        scale = {s: e for s, e in scale.items() if e is not None}
        if scale:
            return scale
    return {}


def findings(w: Any) -> list[str]:
    """Each finding as one line, the first NaN/Inf first."""
    out = []
    first = _first_nonfinite(w)
    if first:
        out.append(first)
    for name in w.names(Quantity.IO):
        last = w.steps(name, Quantity.IO)[-1]
        h = w.histogram(name, Quantity.IO, last)
        if h.total and h.zeros / h.total >= DEAD:
            out.append(
                f"dead units: {name or '(model)'!r} ({w.types.get(name, '')}): {h.zeros / h.total:.0%} of its "
                f"outputs are exactly 0 at step {last}"
            )
    scales = {name: _gradient_scale(w, name) for name in w.names()}
    scales = {n: s for n, s in scales.items() if s}
    if scales:
        last_step = max(max(s) for s in scales.values())
        at_last = {n: s[last_step] for n, s in scales.items() if last_step in s}
        middle = statistics.median(at_last.values()) if at_last else None
        for name, scale in scales.items():
            steps = sorted(scale)
            change = scale[steps[-1]] - scale[steps[0]]
            label = f"{name or '(model)'!r} ({w.types.get(name, '')})"
            if change >= ORDERS:
                out.append(
                    f"exploding gradients: {label}: 2^{change:.0f} times larger at step {steps[-1]} than at "
                    f"step {steps[0]}"
                )
            elif change <= -ORDERS:
                out.append(
                    f"vanishing gradients: {label}: 2^{-change:.0f} times smaller at step {steps[-1]} than "
                    f"at step {steps[0]}"
                )
            elif middle is not None and name in at_last and abs(at_last[name] - middle) >= ORDERS:
                kind = "exploding" if at_last[name] > middle else "vanishing"
                out.append(
                    f"{kind} gradients: {label}: 2^{abs(at_last[name] - middle):.0f} times "
                    f"{'above' if kind == 'exploding' else 'below'} the other modules' at step {last_step}"
                )
    moved = {n: f[-1][1] != f[-2][1] for n, f in w.fingerprints.items() if len(f) >= 2}
    if any(moved.values()):
        for name, changed in moved.items():
            if not changed:
                a, b = w.fingerprints[name][-2][0], w.fingerprints[name][-1][0]
                out.append(
                    f"frozen parameters: {name!r} ({w.types.get(name, '')}): unchanged from step {a} to "
                    f"step {b} while other modules' changed"
                )
    return out
