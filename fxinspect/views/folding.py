"""Repeated blocks, found by structure and dataflow: runs of identical siblings, folded into one.

Two sibling modules are the same block when their subtrees match: the same types,
parameter and buffer counts, and children with the same names, recursively. Siblings
next to each other in the model's order that are the same block make a *run* when they
also repeat along the dataflow: each runs once, their calls follow one another (with
nothing between them but ops of the module running them on what the block before made
or was given, such as a residual add), and each feeds the next or they are the entries of a ``Sequential``, ``ModuleList`` or
``ModuleDict``. Two modules that play different roles (a decoder layer's norm before
attention and its norm before the MLP) never fold, and neither do calls that something
else runs between. Modules that never ran fold by structure alone.

Folding writes a run's members under one display path, their first and last names
joined by an en dash (``layer1.1–2``; ``encoder_layer_0–11``, the shared start written
once), and every descendant likewise (``layer1.1–2.conv1`` stands for
``layer1.1.conv1`` and ``layer1.2.conv1``).

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

__all__ = ["Folds", "DASH", "CONTAINERS"]

DASH = "–"

CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
"""Module types whose children are entries of one list: a run of them folds without
feeding one another (a ``ModuleList`` of parallel heads)."""


class Folds:
    """The runs of repeated blocks of a report's modules, and display paths through them
    (with ``fold=False``, no runs: every module stands for itself)."""

    def __init__(self, report: ReportRecord, fold: bool = True) -> None:
        self.fold = fold
        self.modules = report.modules
        self.children: dict[str, list[str]] = {path: [] for path in report.modules}
        self.children.setdefault("", [])
        self.parent_of: dict[str, str] = {}
        for path in report.modules:
            if path:
                above = paths.nearest(paths.parent(path), self.children)
                self.children[above].append(path)
                self.parent_of[path] = above
        self._dataflow(report)
        self._signature: dict[str, tuple] = {}
        self._shown: dict[str, str] = {}  # (display's answers: asked once per op node)
        self.run_of: dict[str, tuple[str, ...]] = {}  # a member's path -> every member of its run
        self.glue: dict[str, tuple[tuple[str, ...], int]] = {}  # node name -> (run, member before it)
        for kids in self.children.values():
            for run in self.runs(kids):
                if len(run) > 1:
                    for member in run:
                        self.run_of[member] = run
                    self._mark_glue(run)

    def _dataflow(self, report: ReportRecord) -> None:
        """Each op node's position and owner (its nearest known module), each module's
        span of positions (its subtree's first and last op node), each node's arguments."""
        self.owner: list[str] = []
        self.names: list[str] = []
        self.position: dict[str, int] = {}
        self.args: list[tuple[str, ...]] = []
        self.span: dict[str, tuple[int, int]] = {}
        nearest: dict[str, str] = {}
        for n in report.nodes:
            if not n.is_op:
                continue
            i = len(self.owner)
            owner = nearest.get(n.module_path)
            if owner is None:
                owner = nearest[n.module_path] = paths.nearest(n.module_path, self.modules)
            self.owner.append(owner)
            self.names.append(n.name)
            self.position[n.name] = i
            self.args.append(n.args)
            first, _ = self.span.get(owner, (i, i))
            self.span[owner] = (first, i)
        for owner, (first, last) in list(self.span.items()):  # a module spans its subtree's ops
            for p in list(paths.ancestors(owner))[1:]:
                low, high = self.span.get(p, (first, last))
                self.span[p] = (min(low, first), max(high, last))

    def signature(self, path: str) -> tuple:
        """What two blocks must share to be the same: type, counts, children, recursively."""
        found = self._signature.get(path)
        if found is None:
            m = self.modules[path]
            kids = tuple((paths.name(c), self.signature(c)) for c in self.children.get(path, ()))
            found = self._signature[path] = (m.type, m.params, m.trainable_params, m.buffers, kids)
        return found

    def runs(self, kids: list[str]) -> list[tuple[str, ...]]:
        """``kids`` (siblings, in model order) grouped into runs of the same block that
        repeat along the dataflow; a sibling that repeats nothing is a run of one."""
        runs: list[list[str]] = []
        for path in kids:
            last = runs[-1][-1] if runs and self.fold else None
            if last is not None and self.signature(path) == self.signature(last) and self._follows(last, path):
                runs[-1].append(path)
            else:
                runs.append([path])
        return [tuple(r) for r in runs]

    def _follows(self, before: str, after: str) -> bool:
        """Whether sibling ``after`` repeats ``before`` along the dataflow (see the module's
        docstring); siblings that never ran follow one another by structure alone."""
        first, second = self.span.get(before), self.span.get(after)
        if first is None or second is None:
            return first is None and second is None
        if self.modules[before].calls > 1 or self.modules[after].calls > 1 or first[1] >= second[0]:
            return False
        parent = self.parent_of[before]
        between = range(first[1] + 1, second[0])
        # between them only ops of the parent or above (a ModuleList's loop runs in its parent)
        if any(not paths.within(parent, self.owner[i]) for i in between):
            return False
        # ... on what ``before`` made or was given (a residual add, a getitem), not on the
        # work of other modules (a value projection and an output projection with
        # attention between them play two roles)
        inputs = {a for i in range(first[0], first[1] + 1) for a in self.args[i]}
        made = range(first[0], second[0])
        if any(self.position.get(a, first[0]) not in made and a not in inputs for i in between for a in self.args[i]):
            return False
        if self.modules[parent].type in CONTAINERS:
            return True
        return any(self.position.get(a, -1) in made for i in range(second[0], second[1] + 1) for a in self.args[i])

    def _mark_glue(self, run: tuple[str, ...]) -> None:
        """The parent's own ops between a run's members: they belong to the member before."""
        for k, (before, after) in enumerate(zip(run, run[1:])):
            if before in self.span and after in self.span:
                for i in range(self.span[before][1] + 1, self.span[after][0]):
                    self.glue[self.names[i]] = (run, k)

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
        shown = self._shown.get(path)
        if shown is None:
            chain = list(paths.ancestors(path))[-2::-1]  # from the root's child down to ``path``
            shown = self._shown[path] = ".".join(self.label(p) for p in chain)
        return shown

    def repeats(self, path: str) -> int:
        """How many modules the display path of ``path`` stands for."""
        count = 1
        for p in paths.ancestors(path):
            if p in self.run_of:
                count *= len(self.run_of[p])
        return count

    def members(self, path: str) -> tuple[tuple[tuple[str, ...], int], ...]:
        """Every run ``path`` lies in, outermost first, with the index of its member there."""
        return tuple(
            (self.run_of[p], self.run_of[p].index(p)) for p in list(paths.ancestors(path))[::-1] if p in self.run_of
        )

    def only_run(self, path: str) -> tuple[str, ...] | None:
        """The run that makes up all of ``path``'s children (a container of one repeated
        block, such as a ``ModuleList`` of transformer layers), or ``None``."""
        kids = self.children.get(path, [])
        run = self.run_of.get(kids[0]) if kids else None
        return run if run is not None and len(run) == len(kids) else None
