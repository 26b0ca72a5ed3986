"""Which sizes to analyse for a curve, and which of them solve for it and which check it.

A curve over ``terms`` needs as many analysed sizes as it has terms to solve for its
coefficients, and one more to be checked; with breakpoints, a check on each side of each
of them (a curve solved only from contexts below a window is not checked above it).

>>> from fxinspect.serving.terms import basis
>>> design(basis(1, 1), batches=(1, 2, 3), contexts=(5, 11, 24, 40))  # 4 terms, 2 spares
((1, 5), (2, 11), (3, 24), (1, 40), (2, 5), (3, 11))
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

from ..errors import InputError
from .solve import independent_rows
from .terms import Term

__all__ = ["design", "segment", "solving_rows", "describe"]

Point = tuple[int, int]  # (batch, context)


def design(terms: Sequence[Term], batches: Iterable[int], contexts: Iterable[int], calls: int = 6) -> tuple[Point, ...]:
    """Up to ``calls`` sizes from ``batches`` × ``contexts`` that tell ``terms`` apart, then spares.

    Sizes are taken in an order that varies both batch and context at each step, keeping
    one that adds a new direction to the sample matrix; spares (points that add none) fill
    what ``calls`` leaves. Raises :class:`InputError` when the grid cannot tell the terms
    apart (a breakpoint with no context above it, a single batch with terms in ``b``).
    """
    grid = _interleaved(sorted(set(batches)), sorted(set(contexts)))
    rows = [[Fraction(t(b, c)) for t in terms] for b, c in grid]
    chosen = independent_rows(rows, limit=len(terms))
    if len(chosen) < len(terms):
        raise InputError(
            f"the sizes b in {sorted(set(batches))} × c in {sorted(set(contexts))} tell only {len(chosen)} of the "
            f"{len(terms)} terms {[str(t) for t in terms]} apart: give contexts on both sides of each breakpoint "
            "and at least as many batches as the degree in b plus one"
        )
    if len(chosen) > calls:
        raise InputError(f"{len(terms)} terms need {len(terms)} analyses; calls={calls} allows fewer")
    # spares: each in the side of the breakpoints with the fewest points so far
    breakpoints = sorted({t.w for t in terms if t.w is not None})
    taken = [segment(grid[i][1], breakpoints) for i in chosen]
    rest = [i for i in range(len(grid)) if i not in chosen]
    spares = []
    while rest and len(chosen) + len(spares) < calls:
        pick = min(rest, key=lambda i: taken.count(segment(grid[i][1], breakpoints)))
        spares.append(pick)
        rest.remove(pick)
        taken.append(segment(grid[pick][1], breakpoints))
    return tuple(grid[i] for i in (*chosen, *spares))


def solving_rows(rows: list[list[Fraction]], segments: list[int], count: int) -> list[int]:
    """Rows that solve for the coefficients, leaving the others to check: where it can, a
    checked point in each of the ``count`` context segments (the breakpoints' sides)."""
    k, n = len(rows[0]), len(rows)
    best, covered = independent_rows(rows, limit=k), -1
    if count == 1 or math.comb(n, k) > 4096:  # (one segment: any independent rows do)
        return best
    for solving in itertools.combinations(range(n), k):
        if len(independent_rows([rows[i] for i in solving], limit=k)) < k:
            continue
        cover = len({segments[i] for i in range(n) if i not in solving})
        if cover > covered:
            best, covered = list(solving), cover
            if cover == count:
                break
    return best


def segment(c: int, breakpoints: list[int]) -> int:
    """Which side of the breakpoints ``c`` is: 0 for ``c <= w1``, 1 for ``w1 < c <= w2``..."""
    return sum(c > w for w in breakpoints)


def describe(segment: int, breakpoints: list[int]) -> str:
    low = f"{breakpoints[segment - 1]} < " if segment else ""
    return f"{low}c" + (f" <= {breakpoints[segment]}" if segment < len(breakpoints) else "")


def _interleaved(batches: list[int], contexts: list[int]) -> list[Point]:
    """The grid in an order whose neighbours differ in both batch and context."""
    n = len(batches) * len(contexts)
    order = []
    for step in range(n):
        b = batches[step % len(batches)]
        c = contexts[(step + step // len(contexts)) % len(contexts)] if len(contexts) else 0
        order.append((b, c))
    return list(dict.fromkeys(order)) + [(b, c) for b in batches for c in contexts if (b, c) not in order]
