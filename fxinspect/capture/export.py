"""Tier ``export``: ``torch.export.export(..., strict=False)`` (to be written)."""

from __future__ import annotations

from typing import Any, Iterable

import torch

from .base import Capture
from .inputs import FlatInputs


def trace_export(model: torch.nn.Module, inputs: FlatInputs, leaf_modules: Iterable[Any] = ()) -> Capture:
    raise NotImplementedError("the export tier is not written yet")
