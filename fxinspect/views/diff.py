"""``report.diff(other)``: per-module differences between two reports, as data and a table.

Modules are matched by path (two models, or one model before and after a change); a
module in only one report has ``None`` on the other side. Compared: parameters, FLOPs,
MACs, bytes moved and, when both were timed, latency.

Example
-------
>>> d = small.diff(large)                                       # doctest: +SKIP
>>> d.modules["layer1"].flops                                   # doctest: +SKIP
(231211008, 924844032)
>>> print(d)                                                    # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from .. import formatting as fmt
from ..records import ReportRecord

__all__ = ["FIGURES", "ModuleDiff", "ReportDiff", "diff"]

FIGURES = ("params", "flops", "macs", "bytes", "latency")
_TEXT = {
    "params": fmt.count,
    "flops": fmt.count,
    "macs": fmt.count,
    "bytes": fmt.nbytes,
    "latency": lambda v, p=False: fmt.seconds(v),
}


def _figures(record: Any) -> dict[str, Any]:
    if record is None:
        return dict.fromkeys(FIGURES)
    return {
        "params": record.params,
        "flops": record.flops,
        "macs": record.macs,
        "bytes": record.bytes_read + record.bytes_written,
        "latency": record.latency,
    }


@dataclass(frozen=True)
class ModuleDiff:
    """One module in both reports: ``(this, other)`` per figure (``None`` where absent)."""

    path: str
    types: tuple[str | None, str | None]
    params: tuple[Any, Any]
    flops: tuple[Any, Any]
    macs: tuple[Any, Any]
    bytes: tuple[Any, Any]
    latency: tuple[Any, Any]

    @property
    def changed(self) -> bool:
        """Whether any figure (latency aside: it is noise) or the type differs."""
        return self.types[0] != self.types[1] or any(
            getattr(self, f)[0] != getattr(self, f)[1] for f in FIGURES if f != "latency"
        )


@dataclass(frozen=True)
class ReportDiff:
    """Per-module differences of two reports (``modules``, by path, root ``""`` included)."""

    modules: Mapping[str, ModuleDiff]

    def table(
        self,
        figures: tuple[str, ...] = ("params", "flops", "bytes"),
        changed_only: bool = True,
        depth: int | None = None,
    ) -> str:
        """A text table: each figure in this report, the other, and the change in per cent."""
        unknown = [f for f in figures if f not in FIGURES]
        if unknown:
            raise ValueError(f"unknown figures {unknown}; choose from {list(FIGURES)}")
        headers = ["module", "type"]
        for f in figures:
            headers += [f"{f} (this)", f"{f} (other)", "Δ"]
        rows = []
        for path, d in self.modules.items():
            if (changed_only and not d.changed) or (depth is not None and path and path.count(".") >= depth):
                continue
            a, b = d.types
            row = [path or "(model)", a if a == b or b is None else b if a is None else f"{a} → {b}"]
            for f in figures:
                x, y = getattr(d, f)
                text = _TEXT[f]
                row += [text(x) if x is not None else "—", text(y) if y is not None else "—", _change(x, y)]
            rows.append(row)
        if not rows:
            return "no module differs"
        return tabulate(
            rows, headers=headers, disable_numparse=True, colalign=["left", "left", *(["right"] * (3 * len(figures)))]
        )

    def __str__(self) -> str:
        return self.table()


def _change(x: Any, y: Any) -> str:
    if x is None or y is None:
        return "added" if x is None and y is not None else "removed" if y is None and x is not None else ""
    if x == y:
        return "="
    return f"{(y - x) / x:+.1%}" if x else "new"


def diff(this: ReportRecord, other: ReportRecord) -> ReportDiff:
    """Module-by-module differences from ``this`` to ``other``."""
    paths = list(this.modules) + [p for p in other.modules if p not in this.modules]
    out = {}
    for path in paths:
        a, b = this.modules.get(path), other.modules.get(path)
        fa, fb = _figures(a), _figures(b)
        out[path] = ModuleDiff(path, (a.type if a else None, b.type if b else None), *((fa[f], fb[f]) for f in FIGURES))
    return ReportDiff(out)
