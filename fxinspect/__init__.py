"""fxinspect: one call for every op and module of a PyTorch model.

Example
-------
>>> import torch, fxinspect
>>> report = fxinspect.analyze(torch.nn.Linear(8, 4), torch.randn(2, 8), timing=False)
>>> report.totals.flops                                # 2 * (2*8*4) + 2*4 bias adds
136
"""

from .analyze import analyze, instrument
from .errors import CaptureError, FxInspectError, InputError, NodeExecutionError
from .guard import ModelChangedError
from .integrations import StepFlops, StepMeter, step_flops
from .parallel import Parallel
from .planning import BatchFit, Budget, CheckpointPlan, StepPoint, Sweep, checkpoint_plan, max_batch, sweep
from .records import (
    AtenCall,
    CaptureInfo,
    Environment,
    LiveTensor,
    MemoryRecord,
    ModuleRecord,
    NodeRecord,
    NonFinite,
    SharedParameter,
    TensorMeta,
    TimingInfo,
    Totals,
    UncountedOp,
    ValueStats,
)
from .records.registry import register_figure, unregister_figure
from .report import Report
from .rules.registry import Cost, FreeReason, register_free, register_rule
from .run.program import InstrumentedProgram
from .serving import DecodeCost, Generation, GenerationMemory, decode_inputs, generation, prefill_inputs
from .timemodel import devices
from .training import Inspection, Stash, Tracker, Watch, inspect, track, watch


def diff_html(this: Report, other: Report, path=None) -> str:
    """Two reports' explorers side by side in one HTML page, what differs framed in red:
    ``this.diff(other).to_html(path)``."""
    return this.diff(other).to_html(path)


__all__ = [
    "AtenCall",
    "BatchFit",
    "Budget",
    "devices",
    "CaptureError",
    "CaptureInfo",
    "CheckpointPlan",
    "DecodeCost",
    "Cost",
    "Environment",
    "FreeReason",
    "FxInspectError",
    "Generation",
    "GenerationMemory",
    "InputError",
    "Inspection",
    "InstrumentedProgram",
    "LiveTensor",
    "MemoryRecord",
    "ModelChangedError",
    "ModuleRecord",
    "NodeExecutionError",
    "NodeRecord",
    "NonFinite",
    "Parallel",
    "Report",
    "SharedParameter",
    "Stash",
    "StepFlops",
    "StepMeter",
    "StepPoint",
    "Sweep",
    "TensorMeta",
    "TimingInfo",
    "Totals",
    "Tracker",
    "UncountedOp",
    "ValueStats",
    "Watch",
    "analyze",
    "checkpoint_plan",
    "diff_html",
    "decode_inputs",
    "generation",
    "inspect",
    "instrument",
    "max_batch",
    "prefill_inputs",
    "register_figure",
    "register_free",
    "register_rule",
    "step_flops",
    "sweep",
    "track",
    "unregister_figure",
    "watch",
]

__version__ = "0.1.0"
