"""Optional dependencies, imported where a feature needs them, with the install hint.

>>> pandas("to_dataframe").DataFrame([{"a": 1}]).shape
(1, 1)
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["pandas"]


def pandas(feature: str) -> ModuleType:
    """The ``pandas`` module, or an ``ImportError`` naming ``feature`` and the extra to install."""
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError(f"{feature} needs pandas: pip install fxinspect[pandas]") from exc
    return pd
