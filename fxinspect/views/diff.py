"""``report.diff(other)``: per-module differences between two reports, as data and a table.

Modules are matched by path (two models, or one model before and after a change); a
module in only one report has ``None`` on the other side. Compared: parameters and every
figure whose declaration (:mod:`fxinspect.records.fields`) gives it a ``diff`` (FLOPs,
MACs, bytes moved, latency when both were timed, and any registered figure that asks).

Example
-------
>>> import torch, fxinspect
>>> x = torch.randn(2, 8)
>>> small = fxinspect.analyze(torch.nn.Sequential(torch.nn.Linear(8, 4)), x, timing=False, memory=False)
>>> large = fxinspect.analyze(torch.nn.Sequential(torch.nn.Linear(8, 16)), x, timing=False, memory=False)
>>> d = small.diff(large)
>>> d.modules["0"].params, d.modules["0"].macs                 # 8*4+4, 8*16+16 ; 2*8*4, 2*8*16
((36, 144), (64, 256))
>>> print(d.table(figures=("params",)))
module    type          params (this)    params (other)        Δ
--------  ----------  ---------------  ----------------  -------
(model)   Sequential               36               144  +300.0%
0         Linear                   36               144  +300.0%
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from tabulate import tabulate

from .. import formatting as fmt
from ..records import ModuleRecord, ReportRecord
from ..records.fields import Diff, shown
from .columns import unit_text

__all__ = ["ModuleDiff", "ReportDiff", "compared", "diff"]


@dataclass(frozen=True)
class _Figure:
    """One compared figure: how to read it from a module record and print it, and
    whether it differs from run to run (then never a change of the model)."""

    read: Callable[[ModuleRecord], Any]
    text: Callable[[Any], str]
    noisy: bool = False


def compared() -> dict[str, _Figure]:
    """What ``diff`` compares, by name: parameters, then the figures declared with a ``diff``."""
    out = {"params": _Figure(attrgetter("params"), fmt.count)}
    for f in shown():
        if f.diff is not Diff.NONE:
            text = unit_text(f.unit)
            out[f.name] = _Figure(attrgetter(f.attribute), lambda v, text=text: text(v, False), f.diff is Diff.NOISY)
    return out


@dataclass(frozen=True)
class ModuleDiff:
    """One module in both reports: ``(this, other)`` per figure (``None`` where absent),
    read as attributes (``d.flops``)."""

    path: str
    types: tuple
    figures: Mapping[str, tuple] = field(default_factory=dict)
    noisy: frozenset = field(default=frozenset(), repr=False)

    def __getattr__(self, name: str) -> tuple:
        figures = self.__dict__.get("figures", {})
        if name not in figures:
            raise AttributeError(f"ModuleDiff has no figure {name!r}; compared: {list(figures)}")
        return figures[name]

    @property
    def changed(self) -> bool:
        """Whether the type or any figure but the noisy ones differs."""
        return self.types[0] != self.types[1] or any(
            a != b for name, (a, b) in self.figures.items() if name not in self.noisy
        )


@dataclass(frozen=True)
class ReportDiff:
    """Per-module differences of two reports (``modules``, by path, root ``""`` included),
    and the two reports (``this``, ``other``) for :meth:`to_html`."""

    modules: Mapping[str, ModuleDiff]
    this: ReportRecord | None = field(default=None, repr=False, compare=False)
    other: ReportRecord | None = field(default=None, repr=False, compare=False)

    def changes(self) -> dict[str, dict[str, Any]]:
        """Per module path: whether it changed, whether it is in one report only, and the
        first figure that changed, as text (``params 36 → 144 (+300.0%)``)."""
        out = {}
        for path, m in self.modules.items():
            only = None in m.types
            text = "in one report only" if only else ""
            if not only and m.types[0] != m.types[1]:
                text = f"type {m.types[0]} → {m.types[1]}"
            for figure, read in compared().items():
                a, b = m.figures[figure]
                if not text and not read.noisy and a != b:
                    text = f"{figure} {read.text(a)} → {read.text(b)} ({_change(a, b)})"
            out[path] = {"changed": m.changed, "only": only, "text": text}
        return out

    def to_html(self, path: Any = None) -> str:
        """The two reports' explorers side by side, what differs framed in red; also
        written to ``path``. See ``fxinspect.views.explorer.diff_page``."""
        from .explorer.diff_page import diff_html  # (the explorer's package, loaded when asked)

        return diff_html(self, path)

    def table(
        self,
        figures: tuple[str, ...] = ("params", "flops", "bytes"),
        changed_only: bool = True,
        depth: int | None = None,
        width: int | None = 100,
    ) -> str:
        """A text table: each figure in this report, the other, and the change in per cent.

        When the figures side by side would be wider than ``width``, each figure gets a
        table of its own, one under the other (module paths cut from the middle to fit).
        """
        known = compared()
        unknown = [f for f in figures if f not in known]
        if unknown:
            raise ValueError(f"unknown figures {unknown}; choose from {list(known)}")
        shown = [
            (path, d)
            for path, d in self.modules.items()
            if not (changed_only and not d.changed) and not (depth is not None and path and path.count(".") >= depth)
        ]
        if not shown:
            return "no module differs"
        wide = _table(shown, figures)
        if width is None or len(figures) < 2 or max(map(len, wide.splitlines())) <= width:
            return wide
        return "\n\n".join(f"{f}:\n{_table(shown, (f,), width)}" for f in figures)

    def __str__(self) -> str:
        return self.table()


def _table(shown: list[tuple[str, Any]], figures: tuple[str, ...], width: int | None = None) -> str:
    """The rows of ``shown`` (path, ModuleDiff) with three columns per figure; module
    paths cut from the middle (keeping their last components) to fit ``width``."""
    headers, known = ["module", "type"], compared()
    for f in figures:
        headers += [f"{f} (this)", f"{f} (other)", "Δ"]
    rows = []
    for path, d in shown:
        a, b = d.types
        row = [path or "(model)", a if a == b or b is None else b if a is None else f"{a} → {b}"]
        for f in figures:
            x, y = d.figures[f]
            text = known[f].text
            row += [text(x) if x is not None else "—", text(y) if y is not None else "—", _change(x, y)]
        rows.append(row)
    if width is not None:
        rest = _tabulate([r[1:] for r in rows], headers[1:]).splitlines()[0]
        room = max(width - len(rest) - 2, 16)
        rows = [[fmt.middle(r[0], room), *r[1:]] for r in rows]
    return _tabulate(rows, headers)


def _tabulate(rows: list[list[str]], headers: list[str]) -> str:
    """Text columns (module, type) left, figures right."""
    text = len(headers) % 3  # three columns per figure after them
    align = ["left"] * text + ["right"] * (len(headers) - text)
    return tabulate(rows, headers=headers, disable_numparse=True, colalign=align)


def _change(x: Any, y: Any) -> str:
    """The change from ``x`` to ``y``: ``+300.0%``, ``=``, ``new``, ``added`` or ``removed``."""
    if x is None or y is None:
        return "added" if x is None and y is not None else "removed" if y is None and x is not None else ""
    if x == y:
        return "="
    return f"{(y - x) / x:+.1%}" if x else "new"


def diff(this: ReportRecord, other: ReportRecord) -> ReportDiff:
    """Module-by-module differences from ``this`` to ``other``."""
    paths = list(this.modules) + [p for p in other.modules if p not in this.modules]
    out, figures = {}, compared()
    noisy = frozenset(name for name, f in figures.items() if f.noisy)
    for path in paths:
        a, b = this.modules.get(path), other.modules.get(path)
        pairs = {name: tuple(f.read(r) if r is not None else None for r in (a, b)) for name, f in figures.items()}
        out[path] = ModuleDiff(path, (a.type if a else None, b.type if b else None), pairs, noisy)
    return ReportDiff(out, this, other)
