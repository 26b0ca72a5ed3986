"""Binning on the tensor's device: the counts of a :class:`~.histograms.Histogram`.

The binary exponent is read from a value's bits: a shift and a mask give (sign bit,
exponent field), and one ``bincount`` counts them. Two fields are shared: zeros with
subnormals, infinities with NaN. They are split by exact counts, made only when such
values are present. The layout that reads as exponents is made on the host, when a
histogram is read (:meth:`PendingHistogram.read`), so that binning runs as few device
ops as it can: what a training step pays for.

Small tensors (a bias, per-sample norms) cost their ops, not their values:
:class:`SmallBatch` keeps a copy of each and bins them all together, in one pass of a
few ops, when asked (``watch`` asks as the next step begins).

Example
-------
>>> import torch
>>> batch = SmallBatch()
>>> a, b = batch.add(torch.tensor([1.0, 0.0])), batch.add(torch.tensor([-3.0, float("inf")]))
>>> a.read().bins(), a.read().zeros, b.read().bins(), b.read().pos_inf
([(1, 0, 1)], 1, [(-1, 1, 1)], 1)
"""

from __future__ import annotations

import torch

from .histograms import Histogram

__all__ = ["SMALL", "PendingHistogram", "SmallBatch", "log2_histogram"]

SMALL = 1 << 14
"""Tensors of at most this many values are binned together by :class:`SmallBatch`."""

_LAYOUT = {  # dtype -> (integer view, mantissa bits, exponent bits)
    torch.float32: (torch.int32, 23, 8),
    torch.float64: (torch.int64, 52, 11),
    torch.float16: (torch.int16, 10, 5),
    torch.bfloat16: (torch.int16, 7, 8),
}


class PendingHistogram:
    """A histogram still on the device (counts not read yet): :meth:`read` makes it one.

    ``counts``: the raw ``bincount`` over (sign bit, exponent field); ``zeros`` an int;
    ``subnormal`` and ``special`` (NaN, +Inf, -Inf) counts, or ``None`` when there are none.
    """

    __slots__ = ("counts", "mantissa", "fields", "zeros", "subnormal", "special", "total")

    def __init__(self, counts, mantissa, fields, zeros, subnormal, special, total) -> None:
        self.counts, self.mantissa, self.fields = counts, mantissa, fields
        self.zeros, self.subnormal, self.special, self.total = zeros, subnormal, special, total

    def read(self) -> Histogram:
        raw, m, fields = self.counts.tolist(), self.mantissa, self.fields
        size = fields - 2 + m  # exponents from the smallest subnormal's to the largest finite one
        # normal numbers: field f holds exponent f - bias, slot f - 1 + m above the lowest
        negative = [0] * m + raw[fields + 1 : 2 * fields - 1]
        positive = [0] * m + raw[1 : fields - 1]
        if self.subnormal is not None:
            sub = self.subnormal.tolist()
            for i in range(m):
                negative[i], positive[i] = sub[i], sub[size + i]
        nan, pos_inf, neg_inf = self.special.tolist() if self.special is not None else (0, 0, 0)
        used = [i for i in range(size) if negative[i] or positive[i]]
        lo, hi = (used[0], used[-1] + 1) if used else (0, 0)
        low = 2 - fields // 2 - m  # the smallest subnormal's exponent: 1 - bias - m
        return Histogram(
            low + lo, tuple(negative[lo:hi]), tuple(positive[lo:hi]), self.zeros, nan, pos_inf, neg_inf, self.total
        )


def log2_histogram(t: torch.Tensor, pending: bool = False, scratch: dict | None = None) -> Histogram | PendingHistogram:
    """The signed log2 histogram of ``t``'s values (``pending=True``: leave it on the device).

    ``scratch``: a dict that keeps the integer buffer between calls (one per type and
    device, grown as needed), for a caller that bins many tensors in a row: a fresh
    buffer of a large tensor costs a fifth of its binning in page faults.
    """
    x = _binnable(t)
    view, mantissa, exponent_bits = _LAYOUT[x.dtype]
    fields = 1 << exponent_bits
    bits = x.view(view)
    buffer = _buffer(scratch, bits)
    # (bincount takes the integer view's own type: no widening copy)
    key = torch.bitwise_right_shift(bits, mantissa, out=buffer).bitwise_and_(2 * fields - 1)
    counts = torch.bincount(key, minlength=2 * fields)  # positives: [0, fields), negatives: [fields, 2 * fields)
    (pos_low, pos_top), (neg_low, neg_top) = counts.view(2, fields)[:, :: fields - 1].tolist()
    zeros = 0
    if pos_low + neg_low:  # zeros or subnormals; a zero's bits but the sign are 0
        # (integer passes: count_nonzero over floats is 10x slower)
        if neg_low:  # -0.0 may be among them: count with the sign bit shifted out
            zeros = x.numel() - int(torch.count_nonzero(torch.bitwise_left_shift(bits, 1, out=buffer)))
        else:  # no negative zero: +0.0 is the one value whose bits are all 0 (a ReLU's output: 8x faster)
            zeros = x.numel() - int(torch.count_nonzero(bits))
    found = PendingHistogram(counts, mantissa, fields, zeros, None, None, x.numel())
    _split_shared(found, x, pos_low + neg_low, pos_top + neg_top)
    return found if pending else found.read()


def _binnable(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values, flat and contiguous, in a type :data:`_LAYOUT` knows."""
    x = t.detach().reshape(-1)
    if x.dtype not in _LAYOUT:  # integers, booleans, float8: their values as float64 / float32
        x = x.to(torch.float64 if x.dtype in (torch.int64, torch.int32) else torch.float32)
    return x.contiguous()


def _split_shared(found: PendingHistogram, x: torch.Tensor, low_field: int, top_field: int) -> None:
    """Count what the shared fields hold apart: subnormals (binned exactly by ``frexp``)
    and NaN/±Inf. Both are rare: nothing runs when they are absent."""
    if low_field > found.zeros:
        sub = x[(x != 0) & (x.abs() < torch.finfo(x.dtype).tiny)]
        size, low = found.fields - 2 + found.mantissa, 2 - found.fields // 2 - found.mantissa
        _, k = torch.frexp(sub)  # |sub| = f * 2**k, 0.5 <= f < 1: exponent k - 1
        found.subnormal = torch.bincount((k.long() - 1 - low) + (sub > 0).long() * size, minlength=2 * size)
    if top_field:
        found.special = torch.stack([torch.isnan(x).sum(), (x == float("inf")).sum(), (x == float("-inf")).sum()])


def _buffer(scratch: dict | None, bits: torch.Tensor) -> torch.Tensor | None:
    """A flat buffer of ``bits``' type and size: ``scratch``'s, grown if too small (``None``: a new one)."""
    if scratch is None:
        return None
    where = (bits.dtype, bits.device)
    held = scratch.get(where)
    if held is None or held.numel() < bits.numel():
        held = scratch[where] = torch.empty(bits.numel(), dtype=bits.dtype, device=bits.device)
    return held[: bits.numel()]


class SmallBatch:
    """Small tensors binned together: :meth:`add` keeps a copy (values written in place
    later do not count), :meth:`bin` bins every copy in a few ops per type and device."""

    def __init__(self) -> None:
        self._waiting: list[tuple[torch.Tensor, _InBatch]] = []

    def add(self, t: torch.Tensor) -> _InBatch:
        entry = _InBatch(self)
        self._waiting.append((_binnable(t).clone(), entry))
        return entry

    def bin(self) -> None:
        """Bin the copies added since the last call (and let them go)."""
        waiting, self._waiting = self._waiting, []
        groups: dict = {}
        for x, entry in waiting:
            groups.setdefault((x.dtype, x.device), []).append((x, entry))
        for members in groups.values():
            for (_, entry), found in zip(members, _bin_together([x for x, _ in members])):
                entry.found = found


class _InBatch:
    """One tensor's histogram in a :class:`SmallBatch`: binned with the rest when read."""

    __slots__ = ("batch", "found")

    def __init__(self, batch: SmallBatch) -> None:
        self.batch, self.found = batch, None

    def read(self) -> Histogram:
        if self.found is None:
            self.batch.bin()
        return self.found.read()


def _bin_together(xs: list[torch.Tensor]) -> list[PendingHistogram]:
    """The histograms of flat tensors of one type and device: each value's key is offset
    by its tensor's place, so one ``bincount`` counts them all."""
    view, mantissa, exponent_bits = _LAYOUT[xs[0].dtype]
    fields, n, device = 1 << exponent_bits, len(xs), xs[0].device
    flat = torch.cat(xs)
    bits = flat.view(view)
    sizes = torch.tensor([x.numel() for x in xs], device=device)
    place = torch.repeat_interleave(torch.arange(n, device=device), sizes)
    key = ((bits >> mantissa) & (2 * fields - 1)) + place * (2 * fields)
    counts = torch.bincount(key, minlength=n * 2 * fields).view(n, 2 * fields)
    zeros = torch.bincount(place[(bits << 1) == 0], minlength=n)  # a zero's bits but the sign are 0
    edges = counts.view(n, 2, fields)[:, :, :: fields - 1].reshape(n, 4)  # pos low, pos top, neg low, neg top
    out = []
    for x, row, (pos_low, pos_top, neg_low, neg_top, z) in zip(
        xs, counts, torch.cat([edges, zeros[:, None]], 1).tolist()
    ):
        found = PendingHistogram(row, mantissa, fields, z, None, None, x.numel())
        _split_shared(found, x, pos_low + neg_low, pos_top + neg_top)
        out.append(found)
    return out
