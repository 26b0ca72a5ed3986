"""Histograms that keep every value: signed log2-magnitude bins, NaN/±Inf/zero counted apart.

A finite nonzero value ``x`` falls in the bin of its sign and its binary exponent ``e``
(``2**e <= |x| < 2**(e + 1)``), read exactly from its bits: no range to choose, no
value clipped or dropped as an outlier, whatever the scale of activations or gradients,
and bins that read as orders of magnitude (what vanishing and exploding look like).
Zeros, NaN, +Inf and -Inf are counted exactly beside the bins. This module holds the
counts and their files; :mod:`.binning` makes them on the tensor's device.

Example
-------
>>> import torch
>>> from fxinspect.training.binning import log2_histogram
>>> h = log2_histogram(torch.tensor([0.3, -3.0, 0.0, float("nan"), float("inf"), 5.0, 7.0]))
>>> h.zeros, h.nan, h.pos_inf, h.neg_inf, h.total
(1, 1, 1, 0, 7)
>>> h.bins()          # (sign, exponent, count): 0.3 in [2**-2, 2**-1), -3 in [2, 4), 5 and 7 in [4, 8)
[(-1, 1, 1), (1, -2, 1), (1, 2, 2)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Histogram", "from_plain", "to_plain"]


@dataclass(frozen=True)
class Histogram:
    """Counts of one tensor: ``negative[i]``/``positive[i]`` hold the values whose exponent
    is ``low + i``; ``zeros``, ``nan``, ``pos_inf``, ``neg_inf`` apart; ``total`` of all."""

    low: int
    negative: tuple[int, ...]
    positive: tuple[int, ...]
    zeros: int
    nan: int
    pos_inf: int
    neg_inf: int
    total: int

    def bins(self) -> list[tuple[int, int, int]]:
        """``(sign, exponent, count)`` of every nonempty bin, negative values first."""
        out = [(-1, self.low + i, c) for i, c in enumerate(self.negative) if c]
        return out + [(1, self.low + i, c) for i, c in enumerate(self.positive) if c]

    @property
    def finite_nonzero(self) -> int:
        return sum(self.negative) + sum(self.positive)

    @property
    def nonfinite(self) -> int:
        return self.nan + self.pos_inf + self.neg_inf

    def typical_exponent(self) -> float | None:
        """The median binary exponent of the finite nonzero values (``None`` without any)."""
        counts = [a + b for a, b in zip(self.negative, self.positive)]
        half, seen = sum(counts) / 2, 0
        for i, c in enumerate(counts):
            seen += c
            if c and seen >= half:
                return float(self.low + i)
        return None

    def relu(self) -> Histogram:
        """The histogram of ``max(x, 0)`` over this one's values, as ``torch.relu`` makes
        them: negative values and -Inf become zeros, positive ones, +Inf and NaN stay."""
        used = [i for i, c in enumerate(self.positive) if c]
        lo, hi = (used[0], used[-1] + 1) if used else (0, 0)
        return Histogram(
            self.low + lo if used else 0,
            (0,) * (hi - lo),
            self.positive[lo:hi],
            self.zeros + sum(self.negative) + self.neg_inf,
            self.nan,
            self.pos_inf,
            0,
            self.total,
        )

    def merged(self, other: Histogram) -> Histogram:
        """The histogram of both tensors' values together."""
        sides = [h for h in (self, other) if h.positive] or [self]  # (an empty one has no place)
        low = min(h.low for h in sides)
        high = max(h.low + len(h.positive) for h in sides)

        def add(a: tuple[int, ...], la: int, b: tuple[int, ...], lb: int) -> tuple[int, ...]:
            out = [0] * (high - low)
            for i, c in enumerate(a):
                out[la - low + i] += c
            for i, c in enumerate(b):
                out[lb - low + i] += c
            return tuple(out)

        return Histogram(
            low,
            add(self.negative, self.low, other.negative, other.low),
            add(self.positive, self.low, other.positive, other.low),
            self.zeros + other.zeros,
            self.nan + other.nan,
            self.pos_inf + other.pos_inf,
            self.neg_inf + other.neg_inf,
            self.total + other.total,
        )


def to_plain(h: Histogram) -> dict[str, Any]:
    """``h`` as JSON-ready values."""
    return {
        "low": h.low,
        "negative": list(h.negative),
        "positive": list(h.positive),
        "zeros": h.zeros,
        "nan": h.nan,
        "pos_inf": h.pos_inf,
        "neg_inf": h.neg_inf,
        "total": h.total,
    }


def from_plain(d: dict[str, Any]) -> Histogram:
    """The histogram :func:`to_plain` wrote."""
    return Histogram(
        d["low"],
        tuple(d["negative"]),
        tuple(d["positive"]),
        d["zeros"],
        d["nan"],
        d["pos_inf"],
        d["neg_inf"],
        d["total"],
    )
