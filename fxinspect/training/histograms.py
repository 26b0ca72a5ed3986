"""Histograms that keep every value: signed log2-magnitude bins, NaN/±Inf/zero counted apart.

A finite nonzero value ``x`` falls in the bin of its sign and its binary exponent ``e``
(``2**e <= |x| < 2**(e + 1)``), read exactly from its bits: no range to choose, no
value clipped or dropped as an outlier, whatever the scale of activations or gradients,
and bins that read as orders of magnitude (what vanishing and exploding look like).
Zeros, NaN, +Inf and -Inf are counted exactly beside the bins. Everything runs on the
tensor's device (one ``bincount``); numbers reach the host only when read.

Example
-------
>>> import torch
>>> h = log2_histogram(torch.tensor([0.3, -3.0, 0.0, float("nan"), float("inf"), 5.0, 7.0]))
>>> h.zeros, h.nan, h.pos_inf, h.neg_inf, h.total
(1, 1, 1, 0, 7)
>>> h.bins()          # (sign, exponent, count): 0.3 in [2**-2, 2**-1), -3 in [2, 4), 5 and 7 in [4, 8)
[(-1, 1, 1), (1, -2, 1), (1, 2, 2)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Histogram", "log2_histogram"]


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

    def merged(self, other: Histogram) -> Histogram:
        """The histogram of both tensors' values together."""
        low = min(self.low, other.low)
        high = max(self.low + len(self.positive), other.low + len(other.positive))

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


class PendingHistogram:
    """A histogram still on the device (counts not read yet): :meth:`read` makes it one."""

    __slots__ = ("counts", "emin", "size")

    def __init__(self, counts: torch.Tensor, emin: int, size: int) -> None:
        self.counts, self.emin, self.size = counts, emin, size

    def read(self) -> Histogram:
        counts = self.counts.tolist()
        n = self.size
        negative, positive = counts[:n], counts[n : 2 * n]
        zeros, nan, pos_inf, neg_inf = counts[2 * n : 2 * n + 4]
        used = [i for i in range(n) if negative[i] or positive[i]]
        lo, hi = (used[0], used[-1] + 1) if used else (0, 0)
        return Histogram(
            self.emin + lo, tuple(negative[lo:hi]), tuple(positive[lo:hi]), zeros, nan, pos_inf, neg_inf, sum(counts)
        )


_LAYOUT = {  # dtype -> (integer view, mantissa bits, exponent bits)
    torch.float32: (torch.int32, 23, 8),
    torch.float64: (torch.int64, 52, 11),
    torch.float16: (torch.int16, 10, 5),
    torch.bfloat16: (torch.int16, 7, 8),
}


def log2_histogram(t: torch.Tensor, pending: bool = False) -> Histogram | PendingHistogram:
    """The signed log2 histogram of ``t``'s values (``pending=True``: leave it on the device).

    The binary exponent is read from the bits: one shift, one mask and one ``bincount``
    over (sign, exponent field). The field that zeros share with subnormals, and the one
    infinities share with NaN, are split by exact counts, computed only when such
    values are present.
    """
    x = t.detach().reshape(-1)
    if x.dtype not in _LAYOUT:  # integers, booleans, float8: their values as float64 / float32
        x = x.to(torch.float64 if x.dtype in (torch.int64, torch.int32) else torch.float32)
    view, mantissa, exponent_bits = _LAYOUT[x.dtype]
    fields = 1 << exponent_bits
    bias = fields // 2 - 1
    # (bincount takes the integer view's own type: no widening copy)
    key = (x.contiguous().view(view) >> mantissa) & (2 * fields - 1)  # sign bit, then exponent field
    counts = torch.bincount(key, minlength=2 * fields)  # positives: [0, fields), negatives: [fields, 2 * fields)
    low = 1 - bias - mantissa  # the smallest subnormal's exponent
    size = fields - 2 + mantissa  # exponents low .. the largest finite one
    out = torch.zeros(2 * size + 4, dtype=torch.int64, device=x.device)
    # normal numbers: field f holds exponent f - bias, i.e. slot f - bias - low
    out[mantissa : mantissa + fields - 2] = counts[fields : 2 * fields][1:-1]
    out[size + mantissa : size + mantissa + fields - 2] = counts[:fields][1:-1]
    shared = int(counts[0] + counts[fields])  # zeros and subnormals: one exponent field
    zeros = x.numel() - int(torch.count_nonzero(x)) if shared else 0  # (NaN is not zero)
    out[2 * size] = zeros
    if shared > zeros:  # subnormals: rare, binned exactly by frexp
        sub = x[(x != 0) & (key % fields == 0)]
        _, k = torch.frexp(sub)
        slot = (k.long() - 1 - low) + (sub > 0).long() * size
        out[: 2 * size] += torch.bincount(slot, minlength=2 * size)
    if int(counts[fields - 1] + counts[2 * fields - 1]):  # NaN or Inf present
        out[2 * size + 1] = torch.isnan(x).sum()
        out[2 * size + 2] = (x == float("inf")).sum()
        out[2 * size + 3] = (x == float("-inf")).sum()
    found = PendingHistogram(out, low, size)
    return found if pending else found.read()


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
