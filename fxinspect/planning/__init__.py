"""Planning on the memory and time models: sweeps, the largest batch, checkpoint plans.

Each tool analyses whole steps (:func:`~fxinspect.analyze`, by default on the meta device:
no memory, no data, no trial run on the target) and compares them:

* :func:`sweep`: figures over batch sizes (and sequence lengths);
* :func:`max_batch`: the largest batch whose step fits a budget;
* :func:`checkpoint_plan`: which modules to recompute to fit a budget, at the least cost.
"""

from .applied import AppliedPlan
from .budget import Budget, parse_bytes
from .checkpointing import checkpoint_plan
from .fit import BatchFit, max_batch
from .plan import CheckpointPlan, CurvePoint
from .points import StepPoint
from .sweep import Sweep, sweep

__all__ = [
    "AppliedPlan",
    "BatchFit",
    "Budget",
    "CheckpointPlan",
    "CurvePoint",
    "StepPoint",
    "Sweep",
    "checkpoint_plan",
    "max_batch",
    "parse_bytes",
    "sweep",
]
