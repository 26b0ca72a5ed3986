"""Tensor metadata and value statistics, read cheaply and synchronised once.

Statistics are min, max, mean, population std and NaN/Inf counts:

* a tensor of more than :data:`SMALL` elements gets four fast reductions at once:
  ``amin``, ``amax``, ``sum`` and a dot product with itself, in float32 (float64 for
  float64 tensors); ``std`` = sqrt(E[x²] - E[x]²). ``torch.aminmax``,
  ``torch.std_mean`` and ``torch.isfinite(t).all()`` are 1.5x, 20x and 30x slower on
  CPU here. That formula cancels badly when ``|mean| ≫ std`` (a saturated sigmoid:
  0.5 ± 1e-7 came out with a std 500 times too large) and its sums overflow float32
  for huge values (``finfo.min`` attention masks): in those cases, rare in practice,
  the mean and std are computed again, in float64 and around the mean
  (:data:`WELL_CONDITIONED`). On CUDA ``torch.var_mean`` (stable there) is used;
* smaller tensors are all reduced together in :meth:`ValueReader.finish`, a few
  segment reductions in all (in float64, the variance around each tensor's mean):
  per tensor, the fixed cost of launching reductions (or even of one copy) is many
  times the cost of reading 256 numbers. A reader that may not hold tensors (a run
  whose storage lifetimes are modelled) copies each at once, or reads a tiny 1-D CPU
  one as a list of floats (:data:`TINY`). Otherwise the reader keeps a reference,
  and whoever is about to write a tensor in place calls
  :meth:`ValueReader.flush` first, which copies everything pending in one go (the
  counting mode does, before every aten op that mutates; in-place ops are rare
  enough that most tensors are never copied). A view is copied at once, so that a
  small slice never keeps a large tensor alive; a write that bypassed ``flush`` is
  caught by the tensor's version counter and its statistics are ``None``, never stale.

NaN and Inf propagate into ``min``/``max``, so a tensor is finite exactly when both are
finite; only non-finite tensors pay for exact NaN/Inf counts. On CPU that test is free;
on CUDA the counts are always computed on the device, so nothing synchronises until
:meth:`ValueReader.finish`.

Example
-------
>>> import torch
>>> reader = ValueReader()
>>> slot = reader.read(torch.tensor([1.0, 3.0, float("nan")]))
>>> stats = reader.finish()[slot]
>>> stats.nan_count, stats.inf_count
(1, 0)
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from ..records import TensorMeta, ValueStats
from ..tensors import has_data, version

STAT_DTYPES = (torch.float32, torch.float64)
SMALL = 256
"""Tensors of at most this many elements are reduced in one batch at the end."""
TINY = 64
"""A CPU tensor of at most one dimension and this many elements is read as a Python list
when it may not be held: ``tolist`` costs a quarter of a copy and makes no tensor."""
WELL_CONDITIONED = 100.0
"""E[x²] / var up to which the one-pass variance of a large tensor is kept: float32
sums lose about this factor times their ~1e-7 precision to cancellation, far below
the 1e-3 a statistic is reported to. Beyond it the moments are computed again."""


Description = tuple  # (shape, dtype name, device name, bytes): TensorMeta's fields without stats
_NAMES: dict[Any, str] = {}


def _name(value: Any) -> str:
    """``torch.float32`` -> ``"float32"``, ``device("cpu")`` -> ``"cpu"`` (cached)."""
    name = _NAMES.get(value)
    if name is None:
        name = _NAMES[value] = str(value).removeprefix("torch.")
    return name


def describe(t: torch.Tensor) -> Description:
    """Shape, dtype, device and size of ``t`` as a tuple (no data is read).

    The counting run describes every output; the record is built once the value
    statistics are known (:func:`tensor_meta`). A nested tensor, whose sequences differ in
    length, is described by the padded shape that holds them and its true size."""
    if t.is_nested:
        sizes = t._nested_tensor_size().tolist()
        shape = (len(sizes), *(max(dims) for dims in zip(*sizes))) if sizes else (0,)
        return (shape, _name(t.dtype), _name(t.device), t.numel() * t.element_size())
    dtype, device = t.dtype, t.device
    return (
        tuple(t.shape),
        _NAMES.get(dtype) or _name(dtype),  # (the cache read inline: it runs per output)
        _NAMES.get(device) or _name(device),
        t.numel() * t.element_size(),
    )


def tensor_meta(t: torch.Tensor | Description, stats: ValueStats | None = None) -> TensorMeta:
    """Shape, dtype, device and size of a tensor or of its :func:`describe` tuple."""
    return TensorMeta.of(*(describe(t) if isinstance(t, torch.Tensor) else t), stats)


def _nonfinite_counts(flat: torch.Tensor) -> list[int]:
    return [int(torch.isnan(flat).sum()), int(torch.isinf(flat).sum())]


class ValueReader:
    """Collects statistics of many tensors and turns them into ``ValueStats`` at the end."""

    def __init__(self, hold: bool = True) -> None:
        # ``hold``: small tensors are converted in batches, so until then the reader
        # holds them; a run whose storage lifetimes are modelled holds private clones
        self.hold = hold
        # per slot: [min, max, mean, variance, nans, infs], a device tensor of the
        # same six, or (small tensors) None until finish() makes it a ValueStats
        self._rows: list[Any] = []
        self._numel: list[int] = []
        # small tensors: (slots, flat float64 copy of them all), one chunk per flush ...
        self._chunks: list[tuple[list[int], torch.Tensor]] = []
        # ... and those read since: (slot, the tensor itself, its version when read)
        self._pending: list[tuple[int, torch.Tensor, int | None]] = []
        # tiny CPU tensors not held: (slots, their values one after another)
        self._listed: tuple[list[int], list[float]] = ([], [])

    def read(self, t: torch.Tensor) -> int | None:
        """Queue the statistics of ``t``; returns a slot for :meth:`finish`, or ``None``
        for tensors without readable floating values (and wrapper subclasses: a quantized
        weight's values are no plain ones, and dispatch off reaches no data)."""
        # (called for every output of every node: the checks go cheapest first)
        if not t.is_floating_point() or t.is_meta or t.is_nested:  # (ragged sequences: unknown, never zero)
            return None
        if type(t) is not torch.Tensor and (not has_data(t) or is_traceable_wrapper_subclass(t)):
            return None
        n = t.numel()
        if not n:
            return None
        slot = len(self._rows)
        self._numel.append(n)
        if n <= SMALL and self.hold and not t.requires_grad and not t._is_view():  # the common case: no op at all
            self._rows.append(None)
            self._pending.append((slot, t, version(t)))
            return slot
        if n <= TINY and not self.hold and t.is_cpu and t.dim() <= 1:
            # (per output of tiny-op models: a list of floats read as is, never dispatched)
            self._rows.append(None)
            values = t.tolist()
            self._listed[0].append(slot)
            if type(values) is list:
                self._listed[1].extend(values)
            else:
                self._listed[1].append(values)
            return slot
        with torch._C._DisableTorchDispatch():  # the counting mode must not see these ops
            x = t.detach() if t.requires_grad else t  # nothing here is recorded by autograd
            if n <= SMALL:
                row: Any = None
                if not self.hold:  # a private copy (cheap: same dtype), converted with the rest later
                    self._pending.append((slot, x.clone(), None))
                elif x._is_view():  # (a reference would keep the viewed tensor alive)
                    self._chunks.append(([slot], x.reshape(-1).to(torch.float64, copy=True)))
                else:  # inference tensors have no version counter; flush() covers them
                    self._pending.append((slot, x, version(x)))
            else:
                flat = x.reshape(-1)
                if flat.dtype not in STAT_DTYPES:
                    flat = flat.float()
                if flat.is_cuda:  # stay on the device: one synchronisation in finish()
                    var, mean = torch.var_mean(flat, correction=0)
                    counts = torch.stack([torch.isnan(flat).sum(), torch.isinf(flat).sum()]).to(mean.dtype)
                    row = torch.cat([torch.stack([flat.amin(), flat.amax(), mean, var]), counts]).double()
                else:  # reading CPU values costs no synchronisation
                    lo, hi, total, squares = torch.stack(
                        [flat.amin(), flat.amax(), flat.sum(), torch.dot(flat, flat)]
                    ).tolist()
                    mean = total / n
                    var = squares / n - mean * mean
                    if not (math.isfinite(lo) and math.isfinite(hi)):
                        row = [lo, hi, mean, var, *_nonfinite_counts(flat)]
                    else:
                        if not (math.isfinite(squares) and var * WELL_CONDITIONED >= squares / n):
                            mean, var = _centred_moments(flat)
                        row = [lo, hi, mean, var, 0, 0]
        self._rows.append(row)
        return slot

    def flush(self) -> None:
        """Copy every small tensor read since the last flush: call it before writing
        a tensor that may have been read (one copy per device, not one per tensor)."""
        pending, self._pending = self._pending, []
        if pending:
            with torch.no_grad(), torch._C._DisableTorchDispatch():
                self._chunks += self._copy(pending)

    @staticmethod
    def _copy(pending: list[tuple[int, torch.Tensor, int | None]]) -> list[tuple[list[int], torch.Tensor]]:
        """``pending`` as flat float64 copies: one per device (almost always just one)."""
        if not pending:
            return []
        groups = [pending]
        try:  # one concatenation (a copy when there are several; ``to`` copies a lone one)
            flats = [_flatten([t for _, t, _ in pending])]
        except RuntimeError:  # tensors on several devices
            by_device: dict[torch.device, list[tuple[int, torch.Tensor, int | None]]] = {}
            for item in pending:
                by_device.setdefault(item[1].device, []).append(item)
            groups = list(by_device.values())
            flats = [_flatten([t for _, t, _ in items]) for items in groups]
        return [
            ([slot for slot, _, _ in items], flat.to(torch.float64, copy=len(items) == 1))
            for items, flat in zip(groups, flats)
        ]

    def finish(self) -> list[ValueStats | None]:
        """All queued statistics, in slot order (one synchronisation per device).

        ``None`` for a small tensor written in place after it was read without a
        :meth:`flush` (its values at the time it was read are lost)."""
        rows = self._rows
        with torch.no_grad(), torch._C._DisableTorchDispatch():
            pending, self._pending = self._pending, []
            unchanged = [item for item in pending if item[2] is None or item[1]._version == item[2]]
            if len(unchanged) < len(pending):
                for slot, t, when_read in pending:
                    if when_read is not None and t._version != when_read:
                        rows[slot] = _UNREADABLE
            chunks, self._chunks = self._chunks + self._copy(unchanged), []
            slots, values = self._listed
            if slots:  # (float64 holds every value of a narrower float exactly, as ``to`` gives it)
                chunks.append((slots, torch.tensor(values, dtype=torch.float64)))
                self._listed = ([], [])
            self._reduce_small(chunks)
            on_device = [i for i, row in enumerate(rows) if isinstance(row, torch.Tensor)]
            if on_device:
                by_device: dict[torch.device, list[int]] = {}
                for i in on_device:
                    by_device.setdefault(rows[i].device, []).append(i)
                for slots in by_device.values():
                    for i, row in zip(slots, torch.stack([rows[i] for i in slots]).tolist()):
                        rows[i] = row
        return [
            row if type(row) is ValueStats else None if row is _UNREADABLE else _stats(row, n)
            for row, n in zip(rows, self._numel)
        ]

    def _reduce_small(self, chunks: list[tuple[list[int], torch.Tensor]]) -> None:
        """Statistics of all small tensors: per device, one concatenation, four segment
        reductions (which propagate NaN like ``amin``/``amax``) and the moments, all in
        float64 on the device; Python only reads the table."""
        by_device: dict[torch.device, list[tuple[list[int], torch.Tensor]]] = {}
        for chunk in chunks:
            by_device.setdefault(chunk[1].device, []).append(chunk)
        rows, numel = self._rows, self._numel
        for group in by_device.values():
            slots = [slot for chunk_slots, _ in group for slot in chunk_slots]
            data = torch.cat([flat for _, flat in group]) if len(group) > 1 else group[0][1]
            counts = torch.tensor([numel[slot] for slot in slots], device=data.device)
            lo, hi, total = (torch.segment_reduce(data, reduce, lengths=counts) for reduce in ("min", "max", "sum"))
            mean = total / counts
            centred = data - mean.repeat_interleave(counts)
            var = torch.segment_reduce(centred * centred, "sum", lengths=counts) / counts
            table = torch.stack([lo, hi, mean, var.sqrt()]).T.tolist()
            if bool(torch.isfinite(lo).all()) and bool(torch.isfinite(hi).all()):  # the common case
                for slot, (a, b, m, sd) in zip(slots, table):
                    rows[slot] = ValueStats.of(a, b, m, sd, 0, 0)
                continue
            offsets = None
            for i, (slot, (a, b, m, sd)) in enumerate(zip(slots, table)):
                if math.isfinite(a) and math.isfinite(b):
                    rows[slot] = ValueStats.of(a, b, m, sd, 0, 0)
                    continue
                if offsets is None:  # only a non-finite tensor needs its own values again
                    offsets = [0]
                    for s in slots:
                        offsets.append(offsets[-1] + numel[s])
                counts_nonfinite = _nonfinite_counts(data[offsets[i] : offsets[i + 1]])
                rows[slot] = ValueStats.of(a, b, m, sd, *counts_nonfinite)


def _flatten(tensors: list[torch.Tensor]) -> torch.Tensor:
    """``torch._utils._flatten_dense_tensors``: the values in order, one after another,
    with no view made of a tensor flat already (most outputs read: a view per tensor is
    most of that function's cost)."""
    return torch.cat([t if t.dim() == 1 else t.reshape(-1) for t in tensors])


_UNREADABLE = object()  # a finish() row: the tensor was written after it was read


def _stats(row: list, n: int) -> ValueStats:
    """``ValueStats`` from ``[min, max, mean, variance, nans, infs]`` of ``n`` values."""
    lo, hi, mean, var, nans, infs = row
    std = math.sqrt(var) if var > 0 else (0.0 if var == var else math.nan)
    return ValueStats.of(lo, hi, mean, std, int(nans), int(infs))


def _centred_moments(flat: torch.Tensor) -> tuple[float, float]:
    """Mean and population variance in float64, around the mean (no cancellation, no overflow)."""
    x = flat.double()
    mean = x.mean()
    centred = x - mean
    return mean.item(), (torch.dot(centred, centred) / x.numel()).item()
