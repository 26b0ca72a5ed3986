"""The report's records: frozen dataclasses of every op and module, in base units.

Everything here is in base units (FLOPs, bytes, seconds) and carries no formatting;
views turn these records into text, pictures and files. This package imports nothing
from capture, the run layer, the views or torch: it is the bottom of the package.
:mod:`.nodes` holds the graph's parts (tensors, aten calls, nodes, modules),
:mod:`.analysis` the whole (totals, findings, timing, the report record),
:mod:`.memory` the memory of a run, :mod:`.device_spec` the device a time model prices for.
"""

from .analysis import (
    SCHEMA_VERSION,
    CaptureInfo,
    Environment,
    NonFinite,
    NonFiniteKind,
    ReportRecord,
    SharedParameter,
    TimingInfo,
    Totals,
    UncountedOp,
)
from .communication import Collective, Communication
from .device_spec import DeviceSpec
from .memory import LiveTensor, MemoryRecord, Phase, Saves, TensorRole
from .nodes import OP_KINDS, AtenCall, ModuleRecord, NodeRecord, OpStatus, TensorMeta, ValueStats

__all__ = [
    "OP_KINDS",
    "SCHEMA_VERSION",
    "AtenCall",
    "CaptureInfo",
    "Collective",
    "Communication",
    "DeviceSpec",
    "Environment",
    "LiveTensor",
    "MemoryRecord",
    "ModuleRecord",
    "NodeRecord",
    "NonFinite",
    "NonFiniteKind",
    "OpStatus",
    "Phase",
    "ReportRecord",
    "SharedParameter",
    "TensorMeta",
    "Saves",
    "TensorRole",
    "TimingInfo",
    "Totals",
    "UncountedOp",
    "ValueStats",
]
