"""Exact linear algebra over ``Fraction``: independent rows and a square solve.

>>> independent_rows([[1, 2], [2, 4], [0, 1]], limit=2)
[0, 2]
>>> solve_square([[1, 1], [1, -1]], [3, 1])
(Fraction(2, 1), Fraction(1, 1))
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

__all__ = ["independent_rows", "solve_square", "undominated"]


def independent_rows(rows: Sequence[Sequence[Fraction | int]], limit: int) -> list[int]:
    """The indices of the first rows, in order, that are linearly independent (at most ``limit``)."""
    reduced: list[tuple[int, list[Fraction]]] = []  # (pivot column, row) in echelon form
    chosen = []
    for index, row in enumerate(rows):
        r = [Fraction(x) for x in row]
        for pivot, basis_row in reduced:
            if r[pivot]:
                factor = r[pivot] / basis_row[pivot]
                r = [x - factor * y for x, y in zip(r, basis_row)]
        pivot = next((j for j, x in enumerate(r) if x), None)
        if pivot is not None:
            reduced.append((pivot, r))
            chosen.append(index)
            if len(chosen) == limit:
                break
    return chosen


def solve_square(
    rows: Sequence[Sequence[Fraction | int]], values: Sequence[Fraction | int]
) -> tuple[Fraction, ...] | None:
    """``x`` with ``rows · x = values`` (Gauss-Jordan, exact), or ``None`` if ``rows`` is singular."""
    n = len(rows)
    a = [[Fraction(x) for x in row] + [Fraction(v)] for row, v in zip(rows, values)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if a[r][col]), None)
        if pivot is None:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col and a[r][col]:
                factor = a[r][col] / a[col][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col])]
    return tuple(a[i][n] / a[i][i] for i in range(n))


DOMINATORS = 16
"""How many of the highest candidates kept each one is compared with (bounds the work)."""


def undominated(candidates: tuple[Any, ...]) -> tuple[Any, ...]:
    """The candidates no verified one is at least as high as everywhere: with every term
    >= 0 (sizes are), a curve whose every coefficient is at most another's is never above
    it (a timeline of thousands of events keeps the few that can hold its peak)."""
    kept: list[tuple[Any, dict[Any, Fraction]]] = []
    for c in sorted(candidates, key=lambda c: -c(64, 4096)):  # (the likely highest first: they prune the most)
        mine = dict(zip(c.terms, c.coefficients))
        if c.verified and any(
            other.verified
            and all(k <= theirs.get(t, 0) for t, k in mine.items())
            and all(0 <= theirs[t] for t in theirs.keys() - mine.keys())
            for other, theirs in kept[:DOMINATORS]  # (the highest few: the many low events fall to them)
        ):
            continue
        kept.append((c, mine))
    return tuple(c for c, _ in kept)
