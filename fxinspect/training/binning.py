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

from collections.abc import Callable
from typing import Any

import torch

from .histograms import Histogram

__all__ = ["CHUNK", "SMALL", "Derived", "PendingHistogram", "SmallBatch", "log2_histogram", "places"]

SMALL = 1 << 14
"""Tensors of at most this many values are binned together by :class:`SmallBatch`."""

CHUNK = 1 << 20
"""Values of a CPU tensor binned at a time: the keys' buffer (4 MiB for float32) stays in
cache between the passes over it. GPT-2's 38.6 M-value embedding bins in 50 ms, against
70 ms in one pass through a kept buffer of its size and 130 ms through a fresh one."""

_LAYOUT = {  # dtype -> (integer view, mantissa bits, exponent bits)
    torch.float32: (torch.int32, 23, 8),
    torch.float64: (torch.int64, 52, 11),
    torch.float16: (torch.int16, 10, 5),
    torch.bfloat16: (torch.int16, 7, 8),
}


class PendingHistogram:
    """A histogram still on the device (counts not read yet): :meth:`read` makes it one.

    ``counts``: the raw ``bincount`` over (sign bit, exponent field), negatives' fields
    first (the key is the value's bits shifted, arithmetically, plus ``fields``), a tensor or a list
    (``row``: the row of a matrix of them, read only here); ``zeros`` an int;
    ``subnormal`` and ``special`` (NaN, +Inf, -Inf) counts, or ``None`` when there are none.
    """

    __slots__ = ("counts", "mantissa", "fields", "zeros", "subnormal", "special", "total", "row")

    def __init__(self, counts, mantissa, fields, zeros, subnormal, special, total, row=None) -> None:
        self.counts, self.mantissa, self.fields, self.row = counts, mantissa, fields, row
        self.zeros, self.subnormal, self.special, self.total = zeros, subnormal, special, total

    def read(self) -> Histogram:
        raw = self.counts if self.row is None else self.counts[self.row]
        raw, m, fields = raw if isinstance(raw, list) else raw.tolist(), self.mantissa, self.fields
        size = fields - 2 + m  # exponents from the smallest subnormal's to the largest finite one
        # normal numbers: field f holds exponent f - bias, slot f - 1 + m above the lowest
        negative = [0] * m + raw[1 : fields - 1]
        positive = [0] * m + raw[fields + 1 : 2 * fields - 1]
        if self.subnormal is not None:
            sub = self.subnormal.tolist()
            for i in range(m):
                negative[i], positive[i] = sub[i], sub[size + i]
        nan, pos_inf, neg_inf = self.special.tolist() if self.special is not None else (0, 0, 0)
        used = [i for i in range(size) if negative[i] or positive[i]]
        lo, hi = (used[0], used[-1] + 1) if used else (0, 0)
        low = 2 - fields // 2 - m if used else 0  # the smallest subnormal's exponent: 1 - bias - m
        return Histogram(
            low + lo, tuple(negative[lo:hi]), tuple(positive[lo:hi]), self.zeros, nan, pos_inf, neg_inf, self.total
        )


class Derived:
    """A histogram made from another one when read: ``transform(source)`` (``source``
    pending or read), as a ReLU's output's from its input's."""

    __slots__ = ("source", "transform")

    def __init__(self, source: Any, transform: Callable[[Histogram], Histogram]) -> None:
        self.source, self.transform = source, transform

    def read(self) -> Histogram:
        return self.transform(self.source if isinstance(self.source, Histogram) else self.source.read())


def log2_histogram(t: torch.Tensor, pending: bool = False, scratch: dict | None = None) -> Histogram | PendingHistogram:
    """The signed log2 histogram of ``t``'s values (``pending=True``: leave it on the device).

    ``scratch``: a dict that keeps the integer buffer between calls (one per type and
    device, grown as needed), for a caller that bins many tensors in a row: a fresh
    buffer costs its page faults on every call. On the CPU the values are binned
    :data:`CHUNK` at a time, so the buffer is never larger than a chunk and each chunk's
    keys are counted while they are still in cache; a GPU bins a tensor in one pass.
    """
    x = _binnable(t)
    view, mantissa, exponent_bits = _LAYOUT[x.dtype]
    fields = 1 << exponent_bits
    bits = x.view(view)
    n = bits.numel()
    # (a CPU's counts are read at once, as a list: each op a step runs costs more than the values)
    cpu = x.device.type == "cpu"
    step = CHUNK if cpu else max(n, 1)
    counts, zeros, low, top = None, 0, 0, 0
    for start in range(0, max(n, 1), step):
        part = bits if n <= step else bits[start : start + step]
        buffer = _buffer(scratch, part)
        # the shift keeps the sign (a negative's key is its field - fields); bincount takes
        # the integer view's own type: no widening copy
        key = torch.bitwise_right_shift(part, mantissa, out=buffer).add_(fields)
        found = torch.bincount(key, minlength=2 * fields)  # negatives: [0, fields), positives: [fields, 2 * fields)
        if cpu:
            found = found.tolist()
            neg_low, neg_top, pos_low, pos_top = (found[i] for i in (0, fields - 1, fields, 2 * fields - 1))
            counts = found if counts is None else [a + b for a, b in zip(counts, found)]
        else:
            (neg_low, neg_top), (pos_low, pos_top) = found.view(2, fields)[:, :: fields - 1].tolist()
            counts = found if counts is None else counts.add_(found)
        if pos_low + neg_low:  # zeros or subnormals: count the zeros while the chunk is in cache
            zeros += _zeros(part, bool(neg_low), buffer)
        low, top = low + pos_low + neg_low, top + pos_top + neg_top
    histogram = PendingHistogram(counts, mantissa, fields, zeros, None, None, n)
    _split_shared(histogram, x, low, top)
    return histogram if pending else histogram.read()


def _zeros(bits: torch.Tensor, signed: bool, buffer: torch.Tensor | None) -> int:
    """How many of ``bits`` are a zero's: all bits 0 but the sign. With no negative value
    among the zeros and subnormals (``signed`` false: a ReLU's output) +0.0 is the one
    value whose bits are all 0, and no shift is needed (8x faster); integer passes, as
    ``count_nonzero`` over floats is 10x slower."""
    if signed:  # -0.0 may be among them: count with the sign bit shifted out
        return bits.numel() - int(torch.count_nonzero(torch.bitwise_left_shift(bits, 1, out=buffer)))
    return bits.numel() - int(torch.count_nonzero(bits))


def _binnable(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values, flat and contiguous, in a type :data:`_LAYOUT` knows (as few ops as
    it can: a logged step pays each)."""
    x = t.detach() if t.requires_grad else t
    if x.dim() != 1:
        x = x.reshape(-1)
    if x.dtype not in _LAYOUT:  # integers, booleans, float8: their values as float64 / float32
        x = x.to(torch.float64 if x.dtype in (torch.int64, torch.int32) else torch.float32)
    return x if x.is_contiguous() else x.contiguous()


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

    def add(self, t: torch.Tensor, copy: bool = True) -> _InBatch:
        """``t``'s histogram, binned at the next :meth:`bin`. ``copy=False`` keeps ``t``
        itself, for a caller that knows nothing writes it before then (a gradient binned
        as its backward ends, a tensor it made itself): then an add runs no op at all."""
        entry = _InBatch(self)
        if copy:
            t = (t.detach() if t.requires_grad else t).clone()
        self._waiting.append((t, entry))
        return entry

    def bin(self) -> None:
        """Bin the tensors added since the last call (and let them go)."""
        waiting, self._waiting = self._waiting, []
        groups: dict = {}
        for x, entry in waiting:
            groups.setdefault((x.dtype, x.device), []).append((x, entry))
        with torch.no_grad():  # (the tensors are read as they are: no op per tensor to detach them)
            for (dtype, _), members in groups.items():
                xs = [x if dtype in _LAYOUT else _binnable(x) for x, _ in members]
                for (_, entry), found in zip(members, _bin_together(xs)):
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
    """The histograms of tensors of one type and device: each value's key is offset
    by its tensor's place, so one ``bincount`` counts them all, in a few ops whatever
    their number (no op per tensor: each costs a logged step more than its values). The
    zeros, in the lowest field with the subnormals, are counted apart only when a
    tensor has values there."""
    view, mantissa, exponent_bits = _LAYOUT[xs[0].dtype]
    fields, n = 1 << exponent_bits, len(xs)
    bits = torch._C._nn.flatten_dense_tensors(xs).view(view)  # (their values end to end, in one call)
    sizes = tuple(x.numel() for x in xs)
    # (a 16-bit view's key widens to int32 as the offsets are added)
    key = torch.bitwise_right_shift(bits, mantissa) + _offsets(sizes, bits.device, fields)
    counts = torch.bincount(key, minlength=n * 2 * fields).view(n, 2 * fields)
    edges = counts.index_select(1, _edge_columns(fields, bits.device)).tolist()
    zeros = [0] * n
    if any(neg_low + pos_low for neg_low, _, pos_low, _ in edges):
        owners = places(sizes, bits.device)
        zeros = torch.bincount(owners[torch.bitwise_left_shift(bits, 1) == 0], minlength=n).tolist()
    out = []
    for i, (x, (neg_low, neg_top, pos_low, pos_top)) in enumerate(zip(xs, edges)):
        found = PendingHistogram(counts, mantissa, fields, zeros[i], None, None, x.numel(), row=i)
        if neg_low + pos_low > zeros[i] or neg_top + pos_top:
            _split_shared(found, x, neg_low + pos_low, neg_top + pos_top)
        out.append(found)
    return out


_PLACES: dict[tuple, torch.Tensor] = {}
"""Each value's tensor place, by the sizes of the tensors laid end to end: a watch lays
the same tensors end to end every logged step."""


def places(sizes: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """For each value of tensors of ``sizes`` laid end to end, its tensor's place (int32)."""
    key = (sizes, device)
    found = _PLACES.get(key)
    if found is None:
        if len(_PLACES) >= 16:
            _PLACES.pop(next(iter(_PLACES)))
        each = torch.arange(len(sizes), device=device, dtype=torch.int32)
        found = _PLACES[key] = torch.repeat_interleave(each, torch.tensor(sizes, device=device))
    return found


_OFFSETS: dict[tuple, torch.Tensor] = {}


def _offsets(sizes: tuple[int, ...], device: torch.device, fields: int) -> torch.Tensor:
    """For each value of tensors of ``sizes`` laid end to end: its tensor's place times
    ``2 * fields``, plus ``fields`` (a key's offset)."""
    key = (sizes, device, fields)
    found = _OFFSETS.get(key)
    if found is None:
        if len(_OFFSETS) >= 8:
            _OFFSETS.pop(next(iter(_OFFSETS)))
        found = _OFFSETS[key] = places(sizes, device) * (2 * fields) + fields
    return found


_COLUMNS: dict[tuple, torch.Tensor] = {}


def _edge_columns(fields: int, device: torch.device) -> torch.Tensor:
    """The columns of a row of counts: negatives' lowest and top fields, positives' lowest and top."""
    key = (fields, device)
    if key not in _COLUMNS:
        _COLUMNS[key] = torch.tensor([0, fields - 1, fields, 2 * fields - 1], device=device)
    return _COLUMNS[key]
