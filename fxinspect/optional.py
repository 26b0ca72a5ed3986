"""Optional dependencies, imported where a feature needs them, with the install hint.

Each is named by the extra that installs it (``pip install fxinspect[<extra>]``); none is
imported by ``import fxinspect``.

>>> pandas("to_dataframe").DataFrame([{"a": 1}]).shape
(1, 1)
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["optional", "pandas", "summary_writer", "wandb"]


def optional(module: str, extra: str, feature: str) -> ModuleType:
    """``module`` imported, or an ``ImportError`` naming ``feature`` and the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{feature} needs {extra}: pip install fxinspect[{extra}]") from exc


def pandas(feature: str) -> ModuleType:
    """The ``pandas`` module."""
    return optional("pandas", "pandas", feature)


def summary_writer(feature: str) -> type:
    """PyTorch's TensorBoard ``SummaryWriter`` (it needs the ``tensorboard`` package)."""
    return optional("torch.utils.tensorboard", "tensorboard", feature).SummaryWriter


def wandb(feature: str) -> ModuleType:
    """The ``wandb`` module (Weights & Biases)."""
    return optional("wandb", "wandb", feature)
