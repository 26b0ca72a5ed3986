"""Repeated blocks, found by structure: runs of identical sibling modules, folded into one.

Two sibling modules are the same block when their subtrees match: the same types,
parameter and buffer counts, and children with the same names, recursively. A *run* is
two or more such siblings next to each other in the model's order, whatever they are
called (``0..11``, ``h.0..h.11``, ``encoder_layer_0..11``). Folding writes a run's
members under one display path, their first and last names joined by an en dash
(``layer1.1–2``; ``encoder_layer_0–11``, the shared start written once), and every descendant likewise
(``layer1.1–2.conv1`` stands for ``layer1.1.conv1`` and ``layer1.2.conv1``).

Example
-------
>>> import torch, fxinspect
>>> layers = [torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh()) for _ in range(3)]
>>> folds = Folds(fxinspect.analyze(torch.nn.Sequential(*layers), torch.randn(2, 4), timing=False))
>>> folds.display("1.0"), folds.repeats("1.0")
('0–2.0', 3)
"""

from __future__ import annotations

import os

from .. import paths
from ..records import ReportRecord

__all__ = ["Folds", "DASH"]

DASH = "–"


class Folds:
    """The runs of repeated blocks of a report's modules, and display paths through them."""

    def __init__(self, report: ReportRecord) -> None:
        self.modules = report.modules
        self.children: dict[str, list[str]] = {path: [] for path in report.modules}
        self.children.setdefault("", [])
        for path in report.modules:
            if path:
                self.children[paths.nearest(paths.parent(path), self.children)].append(path)
        self._signature: dict[str, tuple] = {}
        self.run_of: dict[str, tuple[str, ...]] = {}  # a member's path -> every member of its run
        for kids in self.children.values():
            for run in self.runs(kids):
                if len(run) > 1:
                    for member in run:
                        self.run_of[member] = run

    def signature(self, path: str) -> tuple:
        """What two blocks must share to be the same: type, counts, children, recursively."""
        found = self._signature.get(path)
        if found is None:
            m = self.modules[path]
            kids = tuple((paths.name(c), self.signature(c)) for c in self.children.get(path, ()))
            found = self._signature[path] = (m.type, m.params, m.trainable_params, m.buffers, kids)
        return found

    def runs(self, kids: list[str]) -> list[tuple[str, ...]]:
        """``kids`` (siblings, in model order) grouped into runs of the same block."""
        runs: list[list[str]] = []
        for path in kids:
            if runs and self.signature(path) == self.signature(runs[-1][0]):
                runs[-1].append(path)
            else:
                runs.append([path])
        return [tuple(r) for r in runs]

    def label(self, path: str) -> str:
        """``path``'s last name, or its run's first and last names (``"0–11"``)."""
        run = self.run_of.get(path)
        if run is None:
            return paths.name(path)
        first, last = paths.name(run[0]), paths.name(run[-1])
        shared = len(os.path.commonprefix([first, last]))
        while shared and last[shared - 1].isdigit():  # never split a number: 9–12, not 9–2
            shared -= 1
        return f"{first}{DASH}{last[shared:]}"

    def display(self, path: str) -> str:
        """``path`` with every folded ancestor (and itself) written as its run."""
        if not path:
            return ""
        chain = list(paths.ancestors(path))[-2::-1]  # from the root's child down to ``path``
        return ".".join(self.label(p) for p in chain)

    def repeats(self, path: str) -> int:
        """How many modules the display path of ``path`` stands for."""
        count = 1
        for p in paths.ancestors(path):
            if p in self.run_of:
                count *= len(self.run_of[p])
        return count

    def only_run(self, path: str) -> tuple[str, ...] | None:
        """The run that makes up all of ``path``'s children (a container of one repeated
        block, such as a ``ModuleList`` of transformer layers), or ``None``."""
        kids = self.children.get(path, [])
        run = self.run_of.get(kids[0]) if kids else None
        return run if run is not None and len(run) == len(kids) else None
