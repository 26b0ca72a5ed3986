"""Tensor metadata and value statistics, read cheaply and synchronised once.

Statistics come from three fast reductions per tensor: ``aminmax``, ``sum`` and a
dot product of the tensor with itself (``std`` = sqrt(E[x²] - E[x]²), computed in
float64 from float32 sums; it loses precision when ``|mean| ≫ std``). ``torch.std_mean``
and ``torch.isfinite(t).all()`` are 20-30x slower on CPU here, which would make the
counting run cost several forward passes.

NaN and Inf propagate into ``min``/``max``, so a tensor is finite exactly when both are
finite; only then-non-finite tensors pay for exact NaN/Inf counts. On CPU that test is
free; on CUDA the counts are always computed on the device, so nothing synchronises
until :meth:`ValueReader.finish`.

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

from .report import TensorMeta, ValueStats

_STAT_DTYPES = (torch.float32, torch.float64)


def has_data(t: torch.Tensor) -> bool:
    """False for meta and fake tensors, whose values cannot be read."""
    return t.device.type != "meta" and not isinstance(t, torch._subclasses.FakeTensor)


def tensor_meta(t: torch.Tensor, stats: ValueStats | None = None) -> TensorMeta:
    """Shape, dtype, device and size of ``t`` (no data is read)."""
    return TensorMeta(
        shape=tuple(int(s) for s in t.shape),
        dtype=str(t.dtype).removeprefix("torch."),
        device=str(t.device),
        nbytes=t.numel() * t.element_size(),
        stats=stats,
    )


class ValueReader:
    """Collects statistics of many tensors and turns them into ``ValueStats`` at the end."""

    def __init__(self) -> None:
        self._pending: list[tuple[Any, int]] = []  # (min, max, sum, sum of squares, nans, infs), numel

    def read(self, t: torch.Tensor) -> int | None:
        """Queue the statistics of ``t``; returns a slot for :meth:`finish`, or ``None``
        for tensors without readable floating values."""
        if not (t.is_floating_point() and t.numel() and has_data(t)):
            return None
        with torch._C._DisableTorchDispatch():  # detached: nothing here is recorded by autograd
            x = t.detach()
            if x.dtype not in _STAT_DTYPES:
                x = x.float()
            flat = x.reshape(-1)
            lo, hi = torch.aminmax(flat)
            sums = torch.stack([lo, hi, flat.sum(), torch.dot(flat, flat)])
            if x.is_cuda:  # stay on the device: one synchronisation in finish()
                counts = torch.stack([torch.isnan(flat).sum(), torch.isinf(flat).sum()]).to(sums.dtype)
                entry: Any = torch.cat([sums, counts]).double()
            else:  # reading CPU values costs no synchronisation
                entry = sums.tolist() + [0, 0]
                if not (math.isfinite(entry[0]) and math.isfinite(entry[1])):
                    entry[4:] = [int(torch.isnan(flat).sum()), int(torch.isinf(flat).sum())]
        self._pending.append((entry, t.numel()))
        return len(self._pending) - 1

    def finish(self) -> list[ValueStats]:
        """All queued statistics, in slot order (one device synchronisation)."""
        if not self._pending:
            return []
        by_device: dict[torch.device, list[int]] = {}
        rows: list[Any] = [entry for entry, _ in self._pending]
        for i, entry in enumerate(rows):
            if isinstance(entry, torch.Tensor):
                by_device.setdefault(entry.device, []).append(i)
        with torch.no_grad(), torch._C._DisableTorchDispatch():
            for slots in by_device.values():
                for i, row in zip(slots, torch.stack([rows[i] for i in slots]).tolist()):
                    rows[i] = row
        out = []
        for (lo, hi, total, squares, nans, infs), (_, n) in zip(rows, self._pending):
            mean = total / n
            var = squares / n - mean * mean
            std = math.sqrt(var) if var > 0 else (0.0 if var == var else float("nan"))
            out.append(ValueStats(lo, hi, mean, std, int(nans), int(infs)))
        return out


def nonfinite_tensors(model: torch.nn.Module) -> list[str]:
    """Names of the parameters and buffers holding a NaN or Inf, each tensor checked once.

    One pass per tensor: a NaN or Inf makes the sum non-finite (a finite sum that
    overflows is then checked element by element), where full statistics would cost
    three passes over every weight.
    """
    bad, seen = [], set()
    named = list(model.named_parameters(remove_duplicate=False)) + list(model.named_buffers(remove_duplicate=False))
    with torch._C._DisableTorchDispatch():
        for name, t in named:
            if id(t) in seen or not (t.is_floating_point() and t.numel() and has_data(t)):
                continue
            seen.add(id(t))
            x = t.detach()
            if x.dtype not in _STAT_DTYPES:  # (a dtype= argument makes sum several times slower)
                x = x.float()
            if not math.isfinite(x.sum().item()):
                if not bool(torch.isfinite(x).all()):
                    bad.append(name)
    return bad
