"""The time model: a device's roofs, where they come from, and the ops priced under them.

One :class:`~fxinspect.records.DeviceSpec` (a record: the report keeps it as
``report.time_model``) is read by every part that needs a device's figures: the pricing
of each node (:mod:`.pricing`), the roofline view (:mod:`fxinspect.views.roofline`) and
the time of a parallel step's collectives on its links (:mod:`fxinspect.parallel.links`).

* :mod:`.devices`: the datasheet presets and :func:`get`, which resolves a preset's name,
  a driver's device name, a spec, or ``"measured"``; ``fxinspect.devices`` is this module;
* :mod:`.host`: ``"measured"``, this host's roofs, measured, checked and cached;
* :mod:`.calibration`: the share of those roofs each kernel class reaches, calibrated
  on the device (:func:`fxinspect.devices.calibrate`), with the workloads of
  :mod:`.kernel_probes` and the classes of :mod:`.kernel_classes`;
* :mod:`.pricing`: each node's predicted latency from its counted aten ops.

Example
-------
>>> get("h100-sxm").peak("float32") / 1e12
67.0
"""

from ..records.device_spec import DeviceSpec
from .devices import PRESETS, get

__all__ = ["PRESETS", "DeviceSpec", "get"]
