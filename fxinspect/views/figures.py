"""Saving figures: PNG, SVG or PDF by the file's extension, the same bytes for the same figure.

Matplotlib stamps files with the date and software version and gives SVG elements
random ids; :func:`save_figure` leaves the stamps out and salts the ids with a fixed
string, so a docs image changes only when the picture does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["save_figure"]

_NO_STAMPS = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}


def save_figure(fig: Any, path: str | Path) -> None:
    """Write ``fig`` to ``path`` without time stamps or random ids."""
    import matplotlib

    path = Path(path)
    with matplotlib.rc_context({"svg.hashsalt": "fxinspect"}):
        fig.savefig(path, metadata=_NO_STAMPS.get(path.suffix.lower().lstrip(".")))
