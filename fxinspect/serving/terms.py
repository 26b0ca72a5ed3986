"""Monomials in batch ``b`` and context ``c`` (and ``min(c, w)``), and their exact sums.

A cost curve is a sum of rational multiples of :class:`Term`\\ s. A term is
``b**i · c**j · min(c, w)**k``: the ``min`` factor is what a sliding window of ``w``
tokens (or an attention chunk) makes of the context. Sums over a range of contexts are
closed forms (Faulhaber's formula), never a loop.

>>> t = Term(b=1, c=1, w=16, m=1)
>>> str(t), t(3, 10), t(3, 40)          # 3·10·10, 3·40·16
('b·c·min(c,16)', 300, 1920)
>>> t.total(3, 1, 40) == sum(t(3, c) for c in range(1, 41))
True
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["Term", "basis", "formula", "number", "power_sum"]

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


@dataclass(frozen=True, order=True)
class Term:
    """``b**b · c**c · min(c, w)**m``; ``w`` is ``None`` when ``m`` is 0."""

    b: int = 0
    c: int = 0
    m: int = 0
    w: int | None = None

    def __post_init__(self) -> None:
        if min(self.b, self.c, self.m) < 0 or (self.m > 0) != (self.w is not None) or (self.w or 1) < 1:
            raise ValueError(f"a term is b^i·c^j·min(c,w)^k with i, j, k >= 0 and w >= 1 when k > 0; given {self!r}")

    def __call__(self, b: int, c: int) -> int:
        return b**self.b * c**self.c * (min(c, self.w) ** self.m if self.m else 1)

    def __str__(self) -> str:
        factors = [_power("b", self.b), _power("c", self.c), _power(f"min(c,{self.w})", self.m)]
        return "·".join(f for f in factors if f) or "1"

    @property
    def order(self) -> tuple[int, int]:
        """Degree in ``b``, then in the context (``c`` and ``min(c, w)`` together)."""
        return (self.b, self.c + self.m)

    def total(self, b: int, first: int, last: int) -> int:
        """``sum(self(b, c) for c in range(first, last + 1))``, in closed form."""
        if first > last:
            return 0
        if first < 0:
            raise ValueError(f"contexts are >= 0; given the range {first}..{last}")
        scale = b**self.b
        if not self.m:
            return scale * _range_sum(self.c, first, last)
        w = self.w
        below = _range_sum(self.c + self.m, first, min(last, w)) if first <= w else 0  # min(c, w) = c
        above = w**self.m * _range_sum(self.c, max(first, w + 1), last) if last > w else 0  # min(c, w) = w
        return scale * (below + above)


def basis(b_degree: int = 1, c_degree: int = 2, breakpoints: tuple[int, ...] = ()) -> tuple[Term, ...]:
    """Every ``b**i · c**j`` and ``b**i · min(c, w)**j`` (``j >= 1``) for ``i <= b_degree``,
    ``j <= c_degree`` and each breakpoint ``w``: the terms a fit may use.

    >>> [str(t) for t in basis(1, 1, (16,))]
    ['1', 'c', 'min(c,16)', 'b', 'b·c', 'b·min(c,16)']
    """
    out: list[Term] = []
    for i in range(b_degree + 1):
        out.append(Term(b=i))
        for w in (None, *sorted(set(breakpoints))):
            out.extend(Term(b=i, c=j) if w is None else Term(b=i, m=j, w=w) for j in range(1, c_degree + 1))
    return tuple(out)


def power_sum(p: int, n: int) -> int:
    """``sum(c**p for c in range(n + 1))`` (``0**0`` is 1), by Faulhaber's formula.

    >>> power_sum(2, 10), power_sum(0, 4), power_sum(3, -1)   # 385 = 10·11·21/6
    (385, 5, 0)
    """
    if n < 0:
        return 0
    if p == 0:
        return n + 1
    # sum_{c=1}^{n} c^p = 1/(p+1) · sum_k C(p+1, k) · B_k · n^(p+1-k), with B_1 = +1/2
    total = sum(math.comb(p + 1, k) * _bernoulli(k) * n ** (p + 1 - k) for k in range(p + 1))
    value = total / (p + 1)
    assert value.denominator == 1, (p, n, value)
    return int(value)


def _range_sum(p: int, first: int, last: int) -> int:
    return power_sum(p, last) - power_sum(p, first - 1)


@functools.cache  # (pure: a number per index)
def _bernoulli(k: int) -> Fraction:
    """The ``k``-th Bernoulli number with ``B_1 = +1/2``."""
    if k == 0:
        return Fraction(1)
    # sum_{j=0}^{k} C(k+1, j) B_j = 0 (B_1 = -1/2 convention), then flip B_1's sign
    minus = -sum(math.comb(k + 1, j) * _bernoulli_minus(j) for j in range(k)) / (k + 1)
    return -minus if k == 1 else minus


@functools.cache
def _bernoulli_minus(k: int) -> Fraction:
    return Fraction(-1, 2) if k == 1 else _bernoulli(k)


def _power(name: str, p: int) -> str:
    return "" if p == 0 else name if p == 1 else name + str(p).translate(_SUPERSCRIPT)


def formula(members: list[tuple[Term, Fraction]], outer: str = "") -> str:
    """``k1·t1 + k2·t2 ...`` with thousands separators; ``outer`` multiplies a single term."""
    out = []
    for t, k in members:
        factor = "·".join(f for f in (outer, "" if t == Term() else str(t)) if f)
        if not factor:
            out.append(number(k))
        elif k == 1:
            out.append(factor)
        elif k == -1:
            out.append(f"-{factor}")
        else:
            out.append(f"{number(k)}·{factor}")
    return " + ".join(out)


def number(k: Fraction | int) -> str:
    """``k`` with thousands separators, a fraction as ``p/q``: ``1,024``, ``-7/2``."""
    k = Fraction(k)
    text = f"{k.numerator:,}"
    return text if k.denominator == 1 else f"{text}/{k.denominator:,}"
