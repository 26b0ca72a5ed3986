"""Tier ``eager``: record the aten ops one real run executes (to be written)."""

from __future__ import annotations

from typing import Any, Iterable

import torch

from .base import Capture
from .inputs import FlatInputs


def trace_eager(model: torch.nn.Module, inputs: FlatInputs, leaf_modules: Iterable[Any] = ()) -> Capture:
    raise NotImplementedError("the eager tier is not written yet")
