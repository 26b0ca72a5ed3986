"""The boxes of a dataflow diagram and the edges between them, read from a report's nodes.

Boxes are the model's modules cut to a depth (op nodes at ``depth=None``), repeated
blocks folded into one box, plus a box per model input and one for the output;
:mod:`.diagram` lays them out and draws them.

Example
-------
>>> import torch, fxinspect
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
>>> report = fxinspect.analyze(model, torch.randn(1, 4), timing=False)
>>> found, edges = boxes(report, depth=1)
>>> [(b.title, b.type, b.shape) for b in found.values()]
[('input_1', '', '1×4'), ('0', 'Linear', '1×4 → 1×8'), ('1', 'ReLU', '1×8'), ('2', 'Linear', '1×8 → 1×2'), ('output', '', '1×2')]
>>> edges[:2]
[('<placeholder:input_1>', '0'), ('0', '1')]
>>> [n.name for n in box_graph(report, depth=1).carries[("0", "1")]]   # what the edge carries
['_0']
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .. import formatting as fmt
from .. import paths
from ..records import NodeRecord, ReportRecord
from .box import Box, end_box
from .folding import Folds
from .grouped import split_unrelated
from .op_boxes import op_boxes

__all__ = ["Box", "BoxGraph", "box_graph", "boxes"]


Edge = tuple[str, str]


@dataclass
class BoxGraph:
    """The boxes (by key, in execution order), the edges between them in graph order,
    and per edge the nodes whose outputs it carries (each once, in graph order)."""

    found: dict[str, Box]
    edges: list[Edge]
    carries: dict[Edge, list[NodeRecord]]


def boxes(report: ReportRecord, depth: int | None, fold: bool = True) -> tuple[dict[str, Box], list[Edge]]:
    """The boxes (by key, in execution order) and the edges between them (see :func:`box_graph`)."""
    graph = box_graph(report, depth, fold)
    return graph.found, graph.edges


def box_graph(report: ReportRecord, depth: int | None, fold: bool = True) -> BoxGraph:
    """The boxes, the edges between them and what each edge carries.

    At module level a module shown with its children as boxes of their own keeps its own
    ops (a reshape, a residual add) in boxes of their own: one per stretch of them that
    runs between its children, so that each box sits where its ops run in the dataflow,
    and within a stretch one per group of ops that feed one another (GPT-2's embedding
    sum and its causal mask run side by side: two boxes).
    """
    folds = Folds(report, fold)
    constants: set[str] = set()
    if depth is None:
        found, box_of, constants = op_boxes(report, folds)
    else:
        found, box_of = _group(report, depth, folds)
        found = split_unrelated(report, found, box_of)
    for box in found.values():
        if not box.title:
            box.title = _own_ops_title(box.nodes)
    carries, last_out, entering = _connect(report, found, box_of, folds, constants)
    for key, box in found.items():
        if box.kind in ("module", "op") and not box.shape:
            # the shapes a box shows: what enters it from other boxes, and the tensor
            # leaving it for the next box
            leaving = last_out.get(key) or (box.nodes[-1] if box.nodes else None)
            out = fmt.shapes(tuple(t.shape for t in leaving.outputs)) if leaving is not None else ""
            shapes = list(dict.fromkeys(t.shape for n in entering.get(key, ()) for t in n.outputs))
            came = fmt.shapes(tuple(shapes[:_SHAPES_IN])) + (", …" if len(shapes) > _SHAPES_IN else "")
            box.shape = f"{came} → {out}" if came and out and came != out else out or came
    return BoxGraph(found, list(carries), carries)


_SHAPES_IN = 2  # the input shapes a box lists before "…"


def _group(report: ReportRecord, depth: int | None, folds: Folds) -> tuple[dict[str, Box], dict[str, str]]:
    """The boxes, titled except for a module's own ops, and each node's box key.

    A box stands for one call of a module (a module run three times is three boxes), or
    for a stretch of a shown module's own ops between its children's boxes. A folded
    run is drawn once: its later members' nodes join the first member's boxes (their
    figures summed), and the ops between the members join the run's box. So every box
    is a contiguous stretch of the graph's order, or the same stretch of each repeat,
    and the picture of a feed-forward model has no cycle: a call whose ops are not
    contiguous (a method of a module called from its parent) is split into parts.
    """
    grouping = _Grouping(report, depth, folds)
    for i, n in enumerate(report.nodes):
        if n.op == "get_attr":
            continue
        if n.op in ("placeholder", "output"):
            key = f"<{n.op}:{n.name}>"
            grouping.found[key] = end_box(report, n, key, i)
        else:
            key = grouping.add(n, i)
        grouping.box_of[n.name] = key
    return grouping.found, grouping.box_of


class _Grouping:
    """The boxes of module level, built node by node in graph order."""

    def __init__(self, report: ReportRecord, depth: int | None, folds: Folds) -> None:
        self.report, self.folds = report, folds
        self.path_of, self.expanded = _module_paths(report, depth, folds) if depth is not None else ({}, set())
        self.found: dict[str, Box] = {}
        self.box_of: dict[str, str] = {}
        self.stretches: dict[tuple[str, int], int] = {}  # (own-ops module, its call) -> stretches so far
        self.own: tuple[str, int] | None = None  # the last node's (own-ops module, call), if it was one
        self.last: str | None = None  # the last op node's box
        self.parts: dict[str, str] = {}  # a box -> the key of its latest part
        self.repeat: dict[str, dict] = {}  # a box -> the repeats of folded runs its last node was in
        self.repeats_of: dict[str, dict] = {}  # (a cache for _repeats_of)

    def add(self, n: NodeRecord, order: int) -> str:
        """Put op node ``n`` in its box; returns the box's key."""
        path = self.path_of[n.name]
        call = n.call[paths.depth(path) - 1] if path and len(n.call) >= paths.depth(path) else 0
        glue = self._glue(n, order)
        base = glue or self._module(path, call, order)
        self.own = (path, call) if glue is None and path in self.expanded else None
        key = self.parts.get(base, base)
        repeat = _repeats_of(self.folds, n.name, self.repeats_of)
        if self.last != key and self.found[key].nodes and self.repeat[key] == repeat:
            key = self._next_part(base, order)  # the same call again, after other boxes
        self.repeat[key] = repeat
        self.found[key].nodes.append(n)
        self.last = key
        return key

    def _module(self, path: str, call: int, order: int) -> str:
        """The key of the box of module ``path``'s call ``call`` (made if new)."""
        record = self.report.modules.get(path)
        kind = record.type if record else "model"
        calls = record.calls if record else 1
        shown = self.folds.display(path)
        key = shown + (f"@{call}" if calls > 1 else "")
        if path in self.expanded:  # the module's own ops, one box per stretch between its children's boxes
            stretch = self.stretches.get((path, call), 0)
            if self.own != (path, call):
                stretch = self.stretches[(path, call)] = stretch + 1
            key = f"{key}#{stretch}"
            if key not in self.found:
                self.found[key] = Box(key, "", "module", f"{kind} ops", self.folds.repeats(path), order=order)
        elif key not in self.found:
            title = (shown or kind) + (f" (call {call + 1} of {calls})" if calls > 1 else "")
            repeats = self.folds.repeats(path)
            self.found[key] = Box(key, title, "module", kind, repeats, order=order, call=call, calls=calls)
        return key

    def _glue(self, n: NodeRecord, order: int) -> str | None:
        """The box of an op that runs between two members of a folded run (a loop's
        glue): the run's box when each member is one box, else a box of its own, drawn
        once like the members; ``None`` for any other node, or when one box holds the
        whole run."""
        folds = self.folds
        glued = folds.glue.get(n.name)
        if glued is None:
            return None
        run, _ = glued
        member = run[0]
        shown = self.path_of[folds.names[folds.span[member][0]]]  # the box path of the member's first op
        if not paths.within(shown, member):
            return None  # the run is inside a bigger box, with its glue
        key = folds.display(member)
        if shown == member:
            return key
        key += "#between"
        if key not in self.found:
            owner = folds.modules[folds.owner[folds.position[n.name]]]
            repeats = folds.repeats(folds.parent_of[member]) * (len(run) - 1)
            self.found[key] = Box(key, "", "module", f"{owner.type} ops", repeats, order=order)
        return key

    def _next_part(self, base: str, order: int) -> str:
        """A new box for another part of box ``base``'s call; both titled as parts."""
        first = self.found[base]
        count = sum(1 for k in self.found if k.startswith(base + "~")) + 2
        key = self.parts[base] = f"{base}~{count}"
        if first.title and count == 2:
            first.title += " (part 1)"
        title = first.title.replace(" (part 1)", f" (part {count})")
        self.found[key] = dataclasses.replace(first, key=key, title=title, nodes=[], order=order, shape="")
        return key


def _module_paths(report: ReportRecord, depth: int, folds: Folds) -> tuple[dict[str, str], set[str]]:
    """Each op node's module path at ``depth``, and the paths shown with children boxes inside."""
    keys: dict[str, str] = {}  # module path -> its box's path (many nodes share one)
    path_of = {}
    for n in report.nodes:
        if n.is_op:
            key = keys.get(n.module_path)
            if key is None:
                key = keys[n.module_path] = _module_key(n, depth, folds, report.modules)
            path_of[n.name] = key
    shown = set(path_of.values())
    expanded = {p for p in shown if any(q != p and paths.within(q, p) for q in shown)}
    return path_of, expanded


def _module_key(n: NodeRecord, depth: int, folds: Folds, modules: Any) -> str:
    """The path of the module whose box shows node ``n`` at ``depth``."""
    path = paths.nearest(paths.cut(n.module_path, depth), modules)
    # a container of nothing but one repeated block shows the block, folded
    while path != n.module_path and folds.only_run(path) is not None:
        path = paths.cut(n.module_path, paths.depth(path) + 1)
    return path


def _own_ops_title(nodes: list[NodeRecord]) -> str:
    """A title for a module's own ops: the costliest kind (FLOPs, then bytes moved), and
    how many other kinds run with it (a norm's ``batch_norm``, not its first ``getattr``).
    Ops that send collectives (a parallel step's: FSDP's gather of the module's
    parameters) are the module's, named for it (``(root) collectives``), not for an op,
    with the ops that compute beside them."""
    if any(n.comm_bytes for n in nodes):
        owner = nodes[0].module_path or "(root)"
        computing = [n for n in nodes if n.flops]
        return f"{owner} collectives" + (f", {_own_ops_title(computing)}" if computing else "")
    cost: dict[str, tuple[int, int]] = {}
    for n in nodes:  # (dicts keep first appearance: the order among equal costs)
        flops, moved = cost.get(n.label, (0, 0))
        cost[n.label] = (flops + n.flops, moved + n.bytes_moved)
    ranked = sorted(cost, key=lambda label: cost[label], reverse=True)
    return ranked[0] + (f" +{len(ranked) - 1} more" if len(ranked) > 1 else "")


def _connect(
    report: ReportRecord, found: dict[str, Box], box_of: dict[str, str], folds: Folds, constants: set[str]
) -> tuple[dict[Edge, list[NodeRecord]], dict[str, NodeRecord], dict[str, list[NodeRecord]]]:
    """The edges between boxes, in graph order, each with the nodes whose outputs it
    carries; per box the last node whose output leaves it, and the nodes whose outputs
    enter it from other boxes. An edge from one
    repeat of a folded run into the next is the loop the fold stands for: the boxes are
    drawn once, so it is left out; so are the edges of ``constants`` (drawn inside a
    box that uses them)."""
    by_name = {n.name: n for n in report.nodes}
    edges: dict[Edge, dict[str, NodeRecord]] = {}
    last_out: dict[str, NodeRecord] = {}
    entering: dict[str, dict[str, NodeRecord]] = {}
    repeat: dict[str, dict[tuple[str, ...], int]] = {}
    for n in report.nodes:
        dst = box_of.get(n.name)
        for arg in n.args:
            src = box_of.get(arg)
            if src is None or dst is None or src == dst or arg in constants:
                continue
            if _across_repeats(folds, arg, n.name, repeat):
                continue
            edges.setdefault((src, dst), {})[arg] = by_name[arg]
            entering.setdefault(dst, {})[arg] = by_name[arg]
            if found[src].nodes:  # (an input's box shows its own shape)
                last_out[src] = by_name[arg]
    carries = {edge: list(nodes.values()) for edge, nodes in edges.items()}
    return carries, last_out, {key: list(nodes.values()) for key, nodes in entering.items()}


def _across_repeats(folds: Folds, a: str, b: str, cache: dict[str, dict[tuple[str, ...], int]]) -> bool:
    """Whether nodes ``a`` and ``b`` lie in different members of one folded run."""
    if a not in folds.position or b not in folds.position:
        return False
    first, second = (_repeats_of(folds, name, cache) for name in (a, b))
    return any(second.get(run, index) != index for run, index in first.items())


def _repeats_of(folds: Folds, name: str, cache: dict[str, dict[tuple[str, ...], int]]) -> dict[tuple[str, ...], int]:
    """``{run: member index}`` for every folded run node ``name`` lies in (its glue too)."""
    found = cache.get(name)
    if found is None:
        found = dict(folds.members(folds.owner[folds.position[name]]))
        if name in folds.glue:
            run, index = folds.glue[name]
            found[run] = index
        cache[name] = found
    return found
