"""What a watched training run reveals: the checks behind ``Watch.summary()``.

* **First NaN/Inf**: the exact step, from the check of the model's output and its
  gradient on every step (:mod:`.checks`), and the module where it arose, from the
  first logged step whose histograms hold it: the first module in forward order for
  outputs and parameters, the last for gradients (the backward runs the other way).
  The module is named only when that logged step is where it arose: when the exact step
  was not logged, or the logged step's parameters already held it (an earlier backward
  or update wrote them), the first module holding it is only where it had spread, so the
  finding says the module is unknown and names none (nor does the page link one). When
  no logged step holds it (a loop skipped the step, as ``GradScaler`` does), it says so.
  Finding an unlogged step's module would take hooks on every module every step: the
  steps between logged ones run none (see :mod:`.watch_hooks`), and ``every=1`` names it.
* **Dead units**: a module whose outputs were at least :data:`DEAD` zeros at every
  logged step since some step, steps whose outputs hold NaN/Inf passed over.
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

__all__ = ["DEAD", "ORDERS", "findings", "linked_findings"]

DEAD = 0.9
ORDERS = 10  # 2**10: a thousandfold


def _logged_nonfinite(w: Any) -> tuple[int, str, str, Any, bool] | None:
    """The first logged step whose histograms hold NaN/Inf, and the module where it arose:
    in the forward, the first module (in forward order) whose outputs or parameters hold
    it; in the backward, which runs the other way, the last module whose output gradient
    does (the ones before it only received it). Last, whether that step's parameters
    already held it: then an earlier step wrote them, and the module only shows where it
    had spread."""
    steps = sorted({s for (n, q) in w._records for s in w.steps(n, q)})
    for step in steps:
        for quantity in FORWARD_ORDER:
            names = [n for n in w.names(quantity) if step in w._records[(n, quantity)]]  # (not steps(): a sort each)
            if quantity in GRADIENTS:
                names.reverse()
            for name in names:
                h = w.histogram(name, quantity, step)
                if h.nonfinite:
                    params = [n for n in w.names(Quantity.PARAMS) if step in w.steps(n, Quantity.PARAMS)]
                    earlier = any(w.histogram(n, Quantity.PARAMS, step).nonfinite for n in params)
                    return step, name, quantity, h, earlier
    return None


def _first_nonfinite(w: Any) -> tuple[str, str | None] | None:
    """The first NaN/Inf, and the module it names: its exact step from the per-step
    checks; its module from the histograms of that step, when it is logged and its
    parameters were finite. Otherwise the module is unknown, and said to be: a later
    logged step shows only where it had spread (the first module then is not where it
    arose)."""
    exact = w.checks.nonfinite() if getattr(w, "checks", None) is not None else []
    logged = _logged_nonfinite(w)
    hint = "every=1 names the module that made it"
    where = unknown = ""
    if logged is not None:
        step, name, quantity, h, earlier = logged
        counts = f"{h.nan} NaN, {h.pos_inf + h.neg_inf} Inf of {h.total}"
        where = f"module {name or '(model)'!r} ({w.types.get(name, '')}), {quantity}: {counts}"
        if earlier:
            unknown = f"the module is unknown: the parameters already held NaN/Inf at step {step} (an earlier step wrote them)"
    if exact:
        first, what = exact[0]
        line = f"first NaN/Inf: step {first}, in the model's {what} (checked every step)"
        if logged is None:
            return f"{line}; no logged step holds it (a loop may skip such steps); {hint}", None
        if logged[0] > first:  # step `first` was not logged: by then it had spread
            return (
                f"{line}; the module is unknown: step {first} was not logged (every={w.every}), and step "
                f"{logged[0]}, the first logged one that holds it, shows only where it had spread; {hint}",
                None,
            )
        if unknown:
            return f"{line}; {unknown}; {hint}", None
        if logged[0] < first:  # inside the model before it reached the output
            return f"first NaN/Inf: step {logged[0]}, {where}; in the model's {what} from step {first}", logged[1]
        return f"{line}; {where}", logged[1]
    if logged is None:
        return None
    before = [s for s in sorted({s for (n, q) in w._records for s in w.steps(n, q)}) if s < logged[0]]
    since = f"between steps {before[-1]} and {logged[0]}" if before else f"by step {logged[0]}"
    if unknown:
        return f"first NaN/Inf: {since}; {unknown}; {hint}", None
    return f"first NaN/Inf: {since}; {where}", logged[1]


def _dead_since(w: Any, name: str) -> tuple[int, int, float] | None:
    """``(since, last, share)`` when the module's outputs have been at least :data:`DEAD`
    zeros at every logged step since ``since`` (steps whose outputs hold NaN/Inf tell
    nothing and are passed over); ``None`` when they are not dead at the last one."""
    since = last = None
    share = 0.0
    for step in w.steps(name, Quantity.IO):
        h = w.histogram(name, Quantity.IO, step)
        if not h.total or h.nonfinite:
            continue
        if h.zeros / h.total >= DEAD:
            since = step if since is None else since
            last, share = step, h.zeros / h.total
        else:
            since = last = None
    return (since, last, share) if since is not None else None


def _gradient_scale(w: Any, name: str) -> dict[int, float]:
    for quantity in GRADIENTS:
        scale = {s: w.histogram(name, quantity, s).typical_exponent() for s in w.steps(name, quantity)}
        scale = {s: e for s, e in scale.items() if e is not None}
        if scale:
            return scale
    return {}


def findings(w: Any) -> list[str]:
    """Each finding as one line, the first NaN/Inf first."""
    return [text for text, _ in linked_findings(w)]


def linked_findings(w: Any) -> list[tuple[str, str | None]]:
    """Each finding as one line, with the module it is about (``None``: no module, or an
    unknown one), the first NaN/Inf first."""
    out: list[tuple[str, str | None]] = []
    first = _first_nonfinite(w)
    if first:
        out.append(first)
    for name in w.names(Quantity.IO):
        dead = _dead_since(w, name)
        if dead is not None:
            since, last, share = dead
            out.append(
                (
                    f"dead units: {name or '(model)'!r} ({w.types.get(name, '')}): at least {DEAD:.0%} of its "
                    f"outputs exactly 0 at every logged step since step {since} ({share:.0%} at step {last})",
                    name,
                )
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
                    (
                        f"exploding gradients: {label}: 2^{change:.0f} times larger at step {steps[-1]} than at "
                        f"step {steps[0]}",
                        name,
                    )
                )
            elif change <= -ORDERS:
                out.append(
                    (
                        f"vanishing gradients: {label}: 2^{-change:.0f} times smaller at step {steps[-1]} than "
                        f"at step {steps[0]}",
                        name,
                    )
                )
            elif middle is not None and name in at_last and abs(at_last[name] - middle) >= ORDERS:
                kind = "exploding" if at_last[name] > middle else "vanishing"
                out.append(
                    (
                        f"{kind} gradients: {label}: 2^{abs(at_last[name] - middle):.0f} times "
                        f"{'above' if kind == 'exploding' else 'below'} the other modules' at step {last_step}",
                        name,
                    )
                )
    moved = {n: f[-1][1] != f[-2][1] for n, f in w.fingerprints.items() if len(f) >= 2}
    if any(moved.values()):
        for name, changed in moved.items():
            if not changed:
                a, b = w.fingerprints[name][-2][0], w.fingerprints[name][-1][0]
                out.append(
                    (
                        f"frozen parameters: {name!r} ({w.types.get(name, '')}): unchanged from step {a} to "
                        f"step {b} while other modules' changed",
                        name,
                    )
                )
    return out
