"""Exact cost curves: integer figures as closed forms in batch ``b`` and context ``c``.

A step's FLOPs, MACs and bytes are sums over its ops of products of tensor sizes, so at
a fixed graph they are polynomials in ``b`` and ``c`` with rational coefficients (and in
``min(c, w)`` where a sliding window ``w`` caps what attention reads). :func:`fit` asks an
evaluator for every figure at a few sizes (each call is an analysis: at most ``calls``,
6 by default, for all figures together) and solves for the coefficients over the whole
basis exactly (``fractions.Fraction``). A figure keeps the terms whose coefficients are
not zero; their coefficients are then solved again from as few of the analysed sizes
(``solved_at``) and the others must match exactly (``checked_at``): a spare analysed
point, and with breakpoints one on each side of each. Only then is the curve
*verified*. A figure that needs every term, or that no polynomial of the basis fits (a
ceiling division, a padding to multiples, kernel scratch learnt per shape), says so:
:attr:`Curve.verified` is ``False``, :attr:`Curve.why` says why and
:attr:`Curve.mismatch` holds the evaluated and predicted numbers. Sizes where the model
builds another graph (a sliding mask only past the window) are another curve: fit the
contexts on one side, or give the breakpoint.

A figure given as several candidates (a memory timeline: one value per event) is the
highest of them: each candidate is fitted, and the figure is their maximum, exact at any
size when every candidate is verified (:class:`PeakCurve`). Where the candidates do not
line up across sizes the maximum's own values are fitted, and never called verified: one
curve through the maxima can be exact at every analysed size and wrong past them, where
another candidate overtakes.

>>> fitted = fit(lambda b, c: {"flops": 2 * b * c * c + 64 * b * c + 7}, basis(1, 2))
>>> str(fitted["flops"]), fitted["flops"](5, 1000), fitted["flops"].verified
('b·(2·c² + 64·c) + 7', 10320007, True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from ..errors import FxInspectError, InputError
from .design import describe, design, segment, solving_rows
from .solve import independent_rows, solve_square, undominated
from .terms import Term, basis, formula, number

__all__ = ["Curve", "PeakCurve", "UnverifiedCurveError", "basis", "design", "fit"]

Point = tuple[int, int]  # (batch, context)
Figures = Mapping[str, "int | Sequence[int] | Mapping[str, int]"]


class UnverifiedCurveError(FxInspectError):
    """A curve was asked to be exact but no analysed point it was not solved from checks it."""


@dataclass(frozen=True)
class Curve:
    """A figure as ``sum(coefficient · term)``: exact where ``verified``.

    ``solved_at`` are the analysed sizes the coefficients were solved from, ``checked_at``
    those that then matched exactly. ``mismatch`` holds ``(b, c, evaluated, predicted)``
    where the curve missed, and ``why`` says in words why it is not verified.
    """

    name: str
    terms: tuple[Term, ...]
    coefficients: tuple[Fraction, ...]
    solved_at: tuple[Point, ...]
    checked_at: tuple[Point, ...] = ()
    mismatch: tuple[tuple[int, int, int, Fraction], ...] = ()
    why: str = ""

    @property
    def verified(self) -> bool:
        """Whether an analysed point not used to solve was predicted exactly (and none missed)."""
        return bool(self.checked_at) and not self.mismatch and not self.why

    def __call__(self, b: int, c: int) -> int | Fraction:
        value = sum((k * t(b, c) for t, k in zip(self.terms, self.coefficients)), Fraction(0))
        return int(value) if value.denominator == 1 else value

    def total(self, b: int, first: int, last: int) -> int | Fraction:
        """The sum over the contexts ``first..last`` (inclusive) at batch ``b``, in closed form."""
        value = sum((k * t.total(b, first, last) for t, k in zip(self.terms, self.coefficients)), Fraction(0))
        return int(value) if value.denominator == 1 else value

    def mean(self, b: int, first: int, last: int) -> Fraction:
        """The mean over the contexts ``first..last``: a decode of ``n`` tokens after a prompt of
        ``p`` runs its steps at the contexts ``p..p+n-1``."""
        if last < first:
            raise InputError(f"mean over contexts {first}..{last}: the range is empty")
        return Fraction(self.total(b, first, last)) / (last - first + 1)

    def require(self) -> Curve:
        """This curve, or :class:`UnverifiedCurveError` naming what was evaluated and predicted."""
        if not self.verified:
            raise UnverifiedCurveError(f"{self.name}: {self.why}")
        return self

    def __str__(self) -> str:
        groups: dict[int, list[tuple[Term, Fraction]]] = {}
        pairs = [(t, k) for t, k in zip(self.terms, self.coefficients) if k]
        for t, k in sorted(pairs, key=lambda tk: tk[0].order, reverse=True):
            groups.setdefault(t.b, []).append((Term(c=t.c, m=t.m, w=t.w), k))
        parts = []
        for power, members in groups.items():
            outer = str(Term(b=power)) if power else ""
            inner = formula(members)
            parts.append(inner if not outer else f"{outer}·({inner})" if len(members) > 1 else formula(members, outer))
        text = " + ".join(parts).replace("+ -", "- ") or "0"
        return text if self.verified else f"{text}  [unverified: {self.why}]"


@dataclass(frozen=True)
class PeakCurve:
    """The highest of several candidate curves (one per event of a memory timeline)."""

    name: str
    candidates: tuple[Curve, ...]
    why: str = ""
    fallback: Curve | None = field(default=None, repr=False)  # the peak's own values, fitted

    @property
    def verified(self) -> bool:
        """Whether every candidate is verified (then the maximum is exact at any size)."""
        return self.fallback is None and all(c.verified for c in self.candidates)

    @property
    def mismatch(self) -> tuple[tuple[int, int, int, Fraction], ...]:
        """The candidates' misses (or the fallback's)."""
        own = self.fallback.mismatch if self.fallback is not None else ()
        return own + tuple(m for c in self.candidates for m in c.mismatch)

    def __call__(self, b: int, c: int) -> int | Fraction:
        if self.fallback is not None:
            return self.fallback(b, c)
        return max(k(b, c) for k in self.candidates)

    def at(self, b: int, c: int) -> Curve:
        """The candidate that holds the peak at ``(b, c)`` (the first, on a tie)."""
        if self.fallback is not None:
            return self.fallback
        return max(self.candidates, key=lambda k: k(b, c))

    def total(self, b: int, first: int, last: int) -> int | Fraction:
        """The sum of the peaks over ``first..last``: evaluated context by context (the
        highest candidate can change inside the range)."""
        return sum((Fraction(self(b, c)) for c in range(first, last + 1)), Fraction(0))

    mean = Curve.mean
    require = Curve.require

    def __str__(self) -> str:
        if self.fallback is not None:
            return f"{self.fallback}  [unverified: {self.why}]"
        state = "" if self.verified else f"  [unverified: {self.why}]"
        return f"max of {len(self.candidates)} candidates{state}"

    @property
    def unverified(self) -> tuple[str, ...]:
        """The candidates (or the fallback) that are not verified, by name."""
        if self.fallback is not None:
            return (self.fallback.name,)
        return tuple(c.name for c in self.candidates if not c.verified)


def fit(
    evaluate: Callable[[int, int], Figures],
    terms: Sequence[Term] | None = None,
    points: Sequence[Point] | None = None,
    *,
    batches: Iterable[int] = (1, 2, 3),
    contexts: Iterable[int] = (11, 24, 37, 53, 64),
    calls: int = 6,
) -> dict[str, Curve | PeakCurve]:
    """Every figure ``evaluate(b, c)`` returns, as a curve over ``terms``, from ``points``.

    ``evaluate`` is called once per point (``points``, or :func:`design`'s choice from
    ``batches`` × ``contexts``). A figure is an integer, or a sequence (or mapping) of
    integers whose maximum it is: a memory timeline, event by event. Each figure keeps the
    terms whose coefficients are not zero; it is verified when that leaves at least one
    analysed point its coefficients were not solved from (one on each side of every
    breakpoint), and those points match exactly. A figure missing at some size is left out.
    """
    terms = tuple(terms if terms is not None else basis())
    points = tuple(points if points is not None else design(terms, batches, contexts, calls))
    if len(points) > calls:
        raise InputError(f"{len(points)} points given; calls={calls} allows {calls} analyses")
    system = _System(terms, points)  # (refuses points that cannot tell the terms apart, before any call)
    values = [evaluate(b, c) for b, c in points]
    names = [name for name in values[0] if all(name in v for v in values)]
    out: dict[str, Curve | PeakCurve] = {}
    for name in names:
        column = [v[name] for v in values]
        for (b, c), x in zip(points, column):
            inner = x.values() if isinstance(x, Mapping) else x if isinstance(x, Sequence) else (x,)
            if not inner or not all(isinstance(y, int) for y in inner):
                raise InputError(
                    f"figure {name!r} at b={b}, c={c} is {x!r}: a curve is exact for integers (or a non-empty "
                    "sequence or mapping of them, whose maximum the figure is); fit counts, then price them"
                )
        if all(isinstance(x, int) for x in column):
            out[name] = _fit_one(name, system, column)
        else:
            out[name] = _fit_peak(name, system, column)
    return out


class _System:
    """The sample matrix of ``terms`` at ``points``, solved once for every figure fitted on it."""

    def __init__(self, terms: tuple[Term, ...], points: tuple[Point, ...]) -> None:
        self.terms, self.points = terms, points
        self.rows = [[Fraction(t(b, c)) for t in terms] for b, c in points]
        self.basis_rows = independent_rows(self.rows, limit=len(terms))
        square = [self.rows[i] for i in self.basis_rows]
        unit = [[int(i == j) for j in range(len(square))] for i in range(len(square))]
        columns = [solve_square(square, e) for e in unit] if len(square) == len(terms) else [None]
        if any(col is None for col in columns):
            raise InputError(f"the points {list(points)} cannot tell the terms {[str(t) for t in terms]} apart")
        self.inverse = [list(row) for row in zip(*columns)]  # (columns of the inverse, transposed)
        self.breakpoints = sorted({t.w for t in terms if t.w is not None})
        self.segments = [segment(c, self.breakpoints) for _, c in points]
        self._solving: dict[tuple[int, ...], list[int]] = {}

    def coefficients(self, values: Sequence[int]) -> tuple[Fraction, ...]:
        picked = [values[i] for i in self.basis_rows]
        return tuple(sum((k * v for k, v in zip(row, picked)), Fraction(0)) for row in self.inverse)

    def solving(self, kept: tuple[int, ...]) -> list[int]:
        """The rows that solve for the terms ``kept`` (the rest check them), once per set."""
        if kept not in self._solving:
            sub = [[row[i] for i in kept] for row in self.rows]
            self._solving[kept] = solving_rows(sub, self.segments, len(self.breakpoints) + 1)
        return self._solving[kept]


def _fit_one(name: str, system: _System, values: Sequence[int]) -> Curve:
    """The curve through ``values``, verified on what the terms it needs leave over."""
    terms, points, rows, basis_rows = system.terms, system.points, system.rows, system.basis_rows
    full = system.coefficients(values)
    misses = []
    for i, (b, c) in enumerate(points):
        predicted = sum((k * r for k, r in zip(full, rows[i])), Fraction(0))
        if predicted != values[i]:
            misses.append((b, c, values[i], predicted))
    if misses:  # (a spare off the curve: the figure is not a polynomial over these terms)
        used = tuple(points[i] for i in basis_rows)
        b, c, was, predicted = misses[0]
        why = f"at b={b}, c={c} analysed {was:,}, the curve through {list(used)} predicts {number(predicted)}"
        return Curve(name, terms, full, used, mismatch=tuple(misses), why=why)
    kept = tuple(i for i, k in enumerate(full) if k != 0)
    breakpoints = system.breakpoints
    solving = system.solving(kept)
    checked = tuple(p for i, p in enumerate(points) if i not in solving)
    bare = [
        describe(s, breakpoints)
        for s in range(len(breakpoints) + 1)
        if all(segment(c, breakpoints) != s for _, c in checked)
    ]
    if not checked:
        why = f"its {len(kept)} terms take all {len(points)} analysed points to solve: exact only at those"
    elif bare:
        why = f"no analysed point it was not solved from has {' or '.join(bare)}: not checked there"
    else:
        why = ""
    return Curve(
        name,
        tuple(terms[i] for i in kept),
        tuple(full[i] for i in kept),
        tuple(points[i] for i in solving),
        checked,
        why=why,
    )


def _fit_peak(name: str, system: _System, column: list) -> PeakCurve:
    """The maximum of candidates fitted one by one, or the maximum's own curve when the
    candidates do not line up across sizes (events added or missing at some size).

    Candidates line up by key, or else (keys named after graph nodes can be renamed from
    one size to another) by position when every size has as many: a misaligned
    candidate then fails its own check.
    """
    keyed = [dict(x) if isinstance(x, Mapping) else dict(enumerate(x)) for x in column]
    if not all(k.keys() == keyed[0].keys() for k in keyed) and all(len(k) == len(keyed[0]) for k in keyed):
        keyed = [dict(zip(keyed[0], k.values())) for k in keyed]  # (by position, named as at the first size)
    if all(k.keys() == keyed[0].keys() for k in keyed):
        candidates = undominated(tuple(_fit_one(f"{name}[{key}]", system, [k[key] for k in keyed]) for key in keyed[0]))
        off = [c for c in candidates if not c.verified]
        why = (
            f"{len(off)} of {len(candidates)} candidates not verified (first: {off[0].name}: {off[0].why})"
            if off
            else ""
        )
        return PeakCurve(name, candidates, why)
    sizes = ", ".join(f"{len(k)} at b={b}, c={c}" for k, (b, c) in zip(keyed, system.points))
    # (a maximum fitted as one curve can be exact at every analysed size and wrong past them,
    # where another candidate overtakes: never verified)
    why = f"its candidates do not line up across sizes ({sizes}): the maximum's own values, exact only at those"
    return PeakCurve(name, (), why, fallback=_fit_one(name, system, [max(k.values()) for k in keyed]))
