"""The time model: each node's predicted latency on a device, from its counted aten ops.

``analyze(model, inputs, device_spec=...)`` (a preset of :mod:`fxinspect.timemodel.devices`,
a :class:`~fxinspect.records.DeviceSpec` or ``"measured"``) prices every aten op a node
ran under the roofline: ``max(FLOPs / peak, bytes moved / bandwidth)``, the peak of the
node's output dtype (on a calibrated spec, ``"measured"``, over the share of the roofs
its kernel class reaches, or a convolution's kind, :mod:`.kernel_classes`; a float32 matmul on a measured spec
without one: at the rate measured for its FLOPs per byte,
:meth:`~fxinspect.records.DeviceSpec.work_seconds`), plus the device's
launch overhead per call; a view or other free
op costs nothing. The sum is the node's ``predicted_latency`` (with ``backward=True``,
its backward's is ``backward_predicted_latency``); modules and totals sum them as they
sum ``latency``; the report keeps the spec as ``report.time_model``. No run is needed, so it works on the meta device (a 70B
step gets its prediction with no accelerator). ``report.roofline()`` and
``report.plot_roofline()`` set it beside what was measured.

Example
-------
>>> import torch, fxinspect
>>> linear, x = torch.nn.Linear(4096, 4096), torch.randn(64, 4096)
>>> report = fxinspect.analyze(linear, x, timing=False, device_spec="h100-sxm")
>>> # addmm: (2*64*4096*4096 + 64*4096) FLOPs / 67e12 = 32.06 us > 69.2 MB / 3.35e12 B/s = 20.7 us; + 5 us
>>> round(report.totals.predicted_latency * 1e6, 2)
37.06
"""

from __future__ import annotations

import functools

from ..options import Options
from ..records import DeviceSpec, OpStatus
from ..records.device_spec import priced_dtype
from ..run.passes import PassResult
from .devices import get
from .kernel_classes import curve_of, kernel_class, priced_class, scale

__all__ = ["TimeModelPricing", "call_seconds"]


class TimeModelPricing:
    """Prices the counted aten ops of every node on one device; see the module.

    It runs nothing: :meth:`priced` reads what the other passes counted (the forward's
    aten calls, and the backward's when one ran), so ``analyze`` calls it after them."""

    def __init__(self, spec: DeviceSpec) -> None:
        self.spec = spec

    @classmethod
    def planned(cls, options: Options) -> TimeModelPricing | None:
        return None if options.device_spec is None else cls(get(options.device_spec))

    def priced(self, results: list[PassResult]) -> PassResult:
        """Each node's predicted forward (and backward) seconds, from ``results``."""
        found: dict[str, dict] = {}
        for result in results:
            for name, record in result.nodes.items():
                got = found.setdefault(name, {})
                got.update({k: record[k] for k in ("aten", "outputs", "backward_aten") if k in record})
        nodes = {}
        for name, record in found.items():
            if "aten" not in record:
                continue  # not an op node
            dtype = priced_dtype(record["outputs"])
            nodes[name] = {"predicted_latency": self._seconds(record["aten"], dtype)}
            if "backward_aten" in record:
                nodes[name]["backward_predicted_latency"] = self._seconds(record["backward_aten"], dtype)
        return PassResult(nodes=nodes, report={"time_model": self.spec})

    def _seconds(self, calls, dtype: str | None) -> float:
        """The seconds of aten ``calls`` (:func:`call_seconds` each); free ops cost nothing."""
        return sum(
            call_seconds(
                self.spec, call.op, call.flops, call.bytes_read + call.bytes_written, call.calls, dtype, call.kind
            )
            for call in calls
            if call.status is not OpStatus.FREE
        )


def call_seconds(
    spec: DeviceSpec, op: str, flops: float, moved: float, calls: float, dtype: str | None, kind: str = ""
) -> float:
    """The seconds of ``calls`` calls of aten ``op`` (of ``kind``, :attr:`AtenCall.kind`)
    doing ``flops`` and moving ``moved`` bytes in all: the roofline time at ``dtype``'s
    peak, over the efficiency its kind's or class's curve gives on a calibrated spec, and
    a launch each."""
    kernel = _priced_kernel(op)
    if kind:
        kernel = curve_of(kernel, kind, "_backward" in op, spec.efficiency)
    work = spec.work_seconds(op, flops, moved, dtype, kernel, scale(kernel, flops, moved, calls))
    return work + calls * spec.launch_overhead


@functools.cache
def _priced_kernel(op: str) -> str:
    """The class whose curve prices aten ``op`` (asked per call of every step priced: kept)."""
    return priced_class(kernel_class(op))
