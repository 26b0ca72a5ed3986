"""A device's roofs: the one record the time model, the roofline and the links read.

``analyze(..., device_spec=...)`` resolves a preset (:mod:`fxinspect.timemodel.devices`),
a :class:`DeviceSpec` or ``"measured"`` to one spec; the pricing reads it, the report
keeps it as ``report.time_model`` (the roofline draws its roofs from it) and a parallel
step's collectives are timed on its ``interconnect``. Dtypes are keyed by name
(``"bfloat16"``), so the record holds no torch object and a report round-trips through
JSON; a ``torch.dtype`` is accepted wherever a dtype is asked for.

Example
-------
>>> import torch
>>> spec = DeviceSpec("toy", {torch.float32: 1e12, "bfloat16": 4e12}, 1e11)
>>> spec.peak_flops, spec.peak(torch.bfloat16), spec.peak("torch.int64")   # an unlisted dtype: float32's
({'float32': 1000000000000.0, 'bfloat16': 4000000000000.0}, 4000000000000.0, 1000000000000.0)
>>> spec.seconds(2e12, 1e11, "float32")   # (2e12 / 1e12 s at the peak, 1e11 / 1e11 s at the bandwidth)
(2.0, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .nodes import TensorMeta

__all__ = ["DeviceSpec", "dtype_name", "priced_dtype"]


def dtype_name(dtype: Any) -> str:
    """A dtype's name without ``torch.``: ``torch.bfloat16`` and ``"torch.bfloat16"`` are ``"bfloat16"``."""
    return str(dtype).removeprefix("torch.")


def priced_dtype(outputs: Sequence[TensorMeta]) -> str | None:
    """The dtype a node's ops are priced at: its first floating output's (``None``: float32's)."""
    return next((t.dtype for t in outputs if t.dtype.startswith(("float", "bfloat"))), None)


@dataclass(frozen=True)
class DeviceSpec:
    """A device's roofs: ``peak_flops`` maps a dtype's name (or a ``torch.dtype``) to
    dense FLOP/s and must give float32's, the peak of every dtype it does not list;
    ``memory_bandwidth`` is bytes/s, ``launch_overhead`` seconds per aten op;
    ``tf32_flops`` float32 matmuls with TF32 allowed (not used by default);
    ``interconnect`` its links' bandwidths in bytes/s (see :mod:`fxinspect.parallel.links`);
    ``matmul_rates`` measured float32 matmuls, ``(FLOPs per byte moved, FLOP/s)`` pairs,
    which price 2-D matmuls instead of the roofline (empty for the presets: see
    :meth:`work_seconds`); ``efficiency`` per kernel class, and per kind of one
    (``"conv.depthwise"``, ``"conv.dense.backward"``, ``"batch_norm.train"``:
    :mod:`fxinspect.timemodel.kernel_classes`), ``(x, share of the roofline reached)``
    points measured on the device (:mod:`fxinspect.timemodel.calibration`), ``x`` the
    class's measure of an op (FLOPs per byte or bytes per call; empty for the presets)."""

    name: str
    peak_flops: Mapping[str, float]
    memory_bandwidth: float
    launch_overhead: float = 5e-6
    tf32_flops: float | None = None
    interconnect: Mapping[str, float] = field(default_factory=dict)
    source: str = ""
    matmul_rates: Sequence[tuple[float, float]] = ()
    efficiency: Mapping[str, Sequence[tuple[float, float]]] = field(default_factory=dict, metadata={"omit_empty": True})

    def __post_init__(self) -> None:
        peaks = {dtype_name(k): v for k, v in self.peak_flops.items()}
        if "float32" not in peaks:
            raise ValueError(
                f"DeviceSpec {self.name!r}: peak_flops needs a float32 figure (the peak of every dtype it "
                f"does not list), got {sorted(peaks)}"
            )
        object.__setattr__(self, "peak_flops", peaks)  # (frozen: set once, here)
        object.__setattr__(self, "interconnect", dict(self.interconnect))
        object.__setattr__(self, "matmul_rates", tuple(sorted((float(i), float(r)) for i, r in self.matmul_rates)))
        curves = {k: tuple(sorted((float(x), float(e)) for x, e in v)) for k, v in self.efficiency.items()}
        object.__setattr__(self, "efficiency", {k: v for k, v in curves.items() if v})

    def peak(self, dtype: Any) -> float:
        """Dense FLOP/s for ``dtype`` (a ``torch.dtype`` or its name, with or without
        ``torch.``); float32's when it is not listed or ``None``."""
        found = self.peak_flops.get(dtype_name(dtype)) if dtype is not None else None
        return self.peak_flops["float32"] if found is None else found

    def seconds(self, flops: float, moved: float, dtype: Any) -> tuple[float, float]:
        """The roofline's two times: ``flops`` at ``dtype``'s peak, ``moved`` bytes at the
        memory bandwidth. Their maximum is the time the roofs allow."""
        return flops / self.peak(dtype), moved / self.memory_bandwidth

    def work_seconds(
        self, op: str, flops: float, moved: float, dtype: Any, kernel: str | None = None, x: float = 0.0
    ) -> float:
        """The seconds aten ``op``'s work takes (its launches apart): the larger of the
        roofline's two times; given its ``kernel`` class with a curve in ``efficiency``,
        that over :meth:`efficiency_at` ``x``; else for a float32 2-D matmul (``mm``,
        ``addmm``) on a spec with ``matmul_rates``, ``flops`` at :meth:`matmul_rate` of
        its intensity."""
        roof = max(self.seconds(flops, moved, dtype))
        if kernel in self.efficiency:
            return roof / self.efficiency_at(kernel, x)
        if self.matmul_rates and flops and moved and op.startswith(_MATMULS) and self._float32(dtype):
            return flops / self.matmul_rate(flops / moved)
        return roof

    def efficiency_at(self, kernel: str | None, x: float) -> float:
        """The share of the roofline ``kernel``'s ops reach at ``x``: interpolated between
        its curve's points in log-log, its end points' beyond them; 1 without a curve."""
        points = self.efficiency.get(kernel) if kernel else None
        if not points:
            return 1.0
        if x <= points[0][0]:
            return points[0][1]
        for (x0, e0), (x1, e1) in zip(points, points[1:]):
            if x <= x1:
                share = math.log(x / x0) / math.log(x1 / x0) if x1 > x0 else 1.0
                return e0 * (e1 / e0) ** share
        return points[-1][1]

    def scaled_to(self, target: DeviceSpec, reference: DeviceSpec | None = None) -> DeviceSpec:
        """This spec, measured on one device, made to price ``target``, another of the same
        architecture family (an H100's calibration pricing an H200): its peaks and
        bandwidth times the ratios of ``target``'s roofs to ``reference``'s (the
        datasheet of the device it was measured on; this spec's own roofs when ``None``),
        its kernel efficiencies, matmul rates' intensities and launch overhead kept.
        Sound only within a family, where the kernels are the same code on the same
        units: across families the efficiencies differ. ``fxinspect.devices.scaled_to``
        takes names."""
        ref = reference or self
        compute = {d: self.peak(d) * target.peak(d) / ref.peak(d) for d in {*self.peak_flops, *target.peak_flops}}
        memory = target.memory_bandwidth / ref.memory_bandwidth
        flops32 = target.peak("float32") / ref.peak("float32")
        return replace(
            self,
            name=f"{self.name} scaled to {target.name}",
            peak_flops=compute,
            memory_bandwidth=self.memory_bandwidth * memory,
            tf32_flops=target.tf32_flops,
            interconnect=target.interconnect,
            source=f"{self.source}; scaled to {target.name} by its roofs over {ref.name}'s",
            # a measured matmul rate is bound by memory or compute: scaled by the smaller ratio
            matmul_rates=tuple((i, r * min(memory, flops32)) for i, r in self.matmul_rates),
        )

    def matmul_rate(self, intensity: float) -> float:
        """float32 matmul FLOP/s at ``intensity`` FLOPs per byte, from ``matmul_rates``:
        interpolated between its points in log-log; below the first, its bytes/s (a
        matmul that moves more per FLOP is bound by memory); above the last, the last."""
        points = self.matmul_rates
        if intensity <= points[0][0]:
            return points[0][1] * intensity / points[0][0]
        for (i0, r0), (i1, r1) in zip(points, points[1:]):
            if intensity <= i1:
                share = math.log(intensity / i0) / math.log(i1 / i0) if i1 > i0 else 1.0
                return r0 * (r1 / r0) ** share
        return points[-1][1]

    def _float32(self, dtype: Any) -> bool:
        return dtype is None or dtype_name(dtype) == "float32"


_MATMULS = ("aten.mm.", "aten.addmm.")  # (2-D: a Linear's product, priced from measured matmuls)
