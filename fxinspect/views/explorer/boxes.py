"""What the explorer needs to draw ``report.plot``'s boxes: marks on the page's nodes.

The page keys a box by what is closed above a node (a module's call, a folded run, a
stretch of an open module's own ops), so it draws ``to_networkx(by="diagram",
depth=d)``'s boxes and edges when every module above depth ``d`` is open, and the
same rules in any mix of open and closed. Three things :mod:`..boxgraph` decides from
the graph's order and dataflow, which the module tree does not tell, are marked here:

* ``parts``: a call whose ops are not contiguous (a module's method its parent calls
  later, a ``ModuleList`` whose members run between another's) is a box per stretch,
  ``{module: part}`` from the second part on;
* ``stretch``: a stretch of an open module's own ops, split into the groups of them
  that feed one another (a mask built beside an embedding sum), given where a box holds
  two ops or more (a lone op is drawn as itself);
* ``glue``: an op of the parent between two members of a folded run (a loop's ``[0]``,
  a residual add), ``[first member, member before it]``: the run's box holds it.

Example
-------
>>> import torch, fxinspect
>>> from fxinspect.views.folding import Folds
>>> class Two(torch.nn.Module):  # the input's scaling and a mask, side by side, before ``fc``
...     def __init__(self):
...         super().__init__()
...         self.fc = torch.nn.Linear(4, 4)
...     def forward(self, x):
...         h, mask = x * 2 + 1, x.new_ones(4, 4).tril()
...         return self.fc(h) @ mask
>>> r = fxinspect.analyze(Two(), torch.randn(2, 4), timing=False)
>>> nodes = [{"name": n.name, "kind": "op", "module": n.module_path, "call": list(n.call)} for n in r.nodes if n.is_op]
>>> mark_boxes(nodes, r, Folds(r))
>>> [(n["name"], n.get("stretch")) for n in nodes]    # the model's first stretch: two boxes
[('mul', '1.1'), ('add', '1.1'), ('new_ones', '1.2'), ('tril', '1.2'), ('fc', None), ('matmul', None)]
"""

from __future__ import annotations

from typing import Any

from ... import paths
from ...records import ReportRecord
from ..folding import Folds
from ..grouped import unrelated_groups

__all__ = ["mark_boxes"]


def mark_boxes(entries: list[dict[str, Any]], report: ReportRecord, folds: Folds) -> None:
    """Mark the page's node ``entries`` (in the report's order) with ``parts``,
    ``stretch`` and ``glue`` (see the module)."""
    ops = [e for e in entries if e["kind"] == "op"]
    _parts(ops, report)
    _stretches(entries, report, folds)
    for e in ops:
        glued = folds.glue.get(e["name"])
        if glued is not None:
            e["glue"] = [glued[0][0], glued[1]]


def _chain(path: str, report: ReportRecord) -> list[tuple[str, int]]:
    """The modules on ``path`` (the root's child first), each with its depth."""
    parts = path.split(".") if path else []
    found = [(".".join(parts[:d]), d) for d in range(1, len(parts) + 1)]
    return [(p, d) for p, d in found if p in report.modules]


def _call(entry: dict[str, Any], path: str, depth: int, report: ReportRecord) -> int:
    """Which call of module ``path`` ran node ``entry`` (0 for a module run once), as
    :mod:`..boxgraph` keys a module's boxes."""
    if report.modules[path].calls <= 1 or len(entry["call"]) < depth:
        return 0
    return entry["call"][depth - 1]


def _parts(ops: list[dict[str, Any]], report: ReportRecord) -> None:
    """Each call's parts: a call of a module starts a new part when the op before is not
    in that call (other boxes ran in between), as :mod:`..boxgraph` splits it."""
    count: dict[tuple[str, int], int] = {}
    before: set[tuple[str, int]] = set()
    chains: dict[str, list[tuple[str, int]]] = {}
    for e in ops:
        chain = chains.get(e["module"])
        if chain is None:
            chain = chains[e["module"]] = _chain(e["module"], report)
        mine = {(p, _call(e, p, d, report)) for p, d in chain}
        for key in mine - before:
            count[key] = count.get(key, 0) + 1
        later = {p: count[(p, c)] for p, c in mine if count[(p, c)] > 1}
        if later:
            e["parts"] = dict(sorted(later.items()))
        before = mine


def _stretches(entries: list[dict[str, Any]], report: ReportRecord, folds: Folds) -> None:
    """Number the stretches of a module's own ops: the ops of a module with children (a
    reshape, a residual add, a mask's construction) that run one after another in one
    call, with no other module's op between, split as :func:`..grouped.unrelated_groups`
    splits them (not inside a folded run's member, nor between members: those boxes are
    drawn once for every repeat and stay whole). ``stretch`` is the module's stretch
    number (``"3.2"``: its second group), given where a box holds two ops or more."""
    parents = {m.path for m in report.modules.values() if m.children}
    runs: list[list[dict[str, Any]]] = []
    last = None
    for e in entries:
        own = e["kind"] == "op" and e["module"] in parents
        key = (e["module"], _own_call(e, report), e["name"] in folds.glue) if own else None
        if own and key == last:
            runs[-1].append(e)
        elif own:
            runs.append([e])
        last = key
    by_name = {n.name: n for n in report.nodes}
    position = {n.name: i for i, n in enumerate(report.nodes)}
    read_by: dict[str, set[str]] = {}
    for n in report.nodes:
        for arg in n.args:
            read_by.setdefault(arg, set()).add(n.name)
    count: dict[str, int] = {}
    for run in runs:
        if len(run) < 2:
            continue
        module = run[0]["module"]
        number = count[module] = count.get(module, 0) + 1
        whole = run[0]["name"] in folds.glue or folds.repeats(module) > 1
        groups = None if whole else unrelated_groups([by_name[e["name"]] for e in run], read_by, position)
        if groups is None:
            for e in run:
                e["stretch"] = number
            continue
        entry = {e["name"]: e for e in run}
        for g, nodes in enumerate(groups, 1):
            if len(nodes) > 1:  # (a lone op is drawn as itself)
                for n in nodes:
                    entry[n.name]["stretch"] = f"{number}.{g}"


def _own_call(entry: dict[str, Any], report: ReportRecord) -> int:
    """The call of its own module that ran ``entry`` (0 for the root or a module run once)."""
    path = entry["module"]
    return _call(entry, path, paths.depth(path), report) if path else 0
