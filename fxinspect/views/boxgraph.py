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
[('input_1', '', '1×4'), ('0', 'Linear', '1×8'), ('1', 'ReLU', '1×8'), ('2', 'Linear', '1×2'), ('output', '', '1×2')]
>>> edges[:2]
[('<placeholder:input_1>', '0'), ('0', '1')]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import formatting as fmt
from .. import paths
from ..records import NodeRecord, ReportRecord
from .folding import Folds

__all__ = ["Box", "boxes"]


@dataclass
class Box:
    """One box of the diagram: the op nodes it stands for and how it is labelled."""

    key: str
    title: str
    kind: str  # "input", "module", "op" or "output"
    type: str = ""
    repeats: int = 1
    nodes: list[NodeRecord] = field(default_factory=list)
    shape: str = ""
    order: int = 0


def boxes(report: ReportRecord, depth: int | None) -> tuple[dict[str, Box], list[tuple[str, str]]]:
    """The boxes (by key, in execution order) and the edges between them.

    At module level a module shown with its children as boxes of their own keeps its own
    ops (a reshape, a residual add) in boxes of their own: one per stretch of them that
    runs between its children, so that each box sits where its ops run in the dataflow.
    """
    found, box_of = _group(report, depth)
    for box in found.values():
        if not box.title:
            box.title = _own_ops_title(box.nodes)
    edges, last_out = _connect(report, found, box_of)
    for key, box in found.items():
        if box.kind in ("module", "op") and not box.shape:
            # the shape a box shows is that of the tensor leaving it for the next box
            leaving = last_out.get(key) or (box.nodes[-1] if box.nodes else None)
            box.shape = fmt.shapes(tuple(t.shape for t in leaving.outputs)) if leaving is not None else ""
    return found, edges


def _group(report: ReportRecord, depth: int | None) -> tuple[dict[str, Box], dict[str, str]]:
    """The boxes, titled except for a module's own ops, and each node's box key."""
    folds = Folds(report)
    path_of, expanded = _module_paths(report, depth, folds) if depth is not None else ({}, set())
    found: dict[str, Box] = {}
    box_of: dict[str, str] = {}
    previous, stretch = None, 0
    for i, n in enumerate(report.nodes):
        if n.op == "get_attr":
            continue
        if n.op in ("placeholder", "output"):
            key = f"<{n.op}:{n.name}>"
            found[key] = _end_box(report, n, key, i)
        elif depth is None:
            key = n.name
            found[key] = Box(key, n.name, "op", n.label, nodes=[n], order=i)
        else:
            path = path_of[n.name]
            record = report.modules.get(path)
            kind = record.type if record else "model"
            key = folds.display(path)
            if path in expanded:  # the module's own ops, between its children's boxes
                if previous != key:
                    stretch += 1
                key, previous = f"{key}#{stretch}", key
                if key not in found:
                    found[key] = Box(key, "", "module", f"{kind} ops", folds.repeats(path), order=i)
            else:
                previous = key
                if key not in found:
                    found[key] = Box(key, key or kind, "module", kind, folds.repeats(path), order=i)
            found[key].nodes.append(n)
        box_of[n.name] = key
    return found, box_of


def _module_paths(report: ReportRecord, depth: int, folds: Folds) -> tuple[dict[str, str], set[str]]:
    """Each op node's module path at ``depth``, and the paths shown with children boxes inside."""
    ops = [n for n in report.nodes if n.is_op]
    path_of = {n.name: _module_key(n, depth, folds, report.modules) for n in ops}
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


def _end_box(report: ReportRecord, n: NodeRecord, key: str, order: int) -> Box:
    """The box of a model input (a placeholder node) or of the model's output."""
    shapes = n.outputs if n.op == "placeholder" else report.outputs
    return Box(
        key,
        n.name if n.op == "placeholder" else "output",
        "input" if n.op == "placeholder" else "output",
        shape=fmt.shapes(tuple(t.shape for t in shapes)),
        order=order,
    )


def _own_ops_title(nodes: list[NodeRecord]) -> str:
    """A title for a module's own ops: the costliest kind (FLOPs, then bytes moved), and
    how many other kinds run with it (a norm's ``batch_norm``, not its first ``getattr``)."""
    cost: dict[str, tuple[int, int]] = {}
    for n in nodes:  # (dicts keep first appearance: the order among equal costs)
        flops, moved = cost.get(n.label, (0, 0))
        cost[n.label] = (flops + n.flops, moved + n.bytes_moved)
    ranked = sorted(cost, key=lambda label: cost[label], reverse=True)
    return ranked[0] + (f" +{len(ranked) - 1} more" if len(ranked) > 1 else "")


def _connect(
    report: ReportRecord, found: dict[str, Box], box_of: dict[str, str]
) -> tuple[list[tuple[str, str]], dict[str, NodeRecord]]:
    """The edges between boxes, in graph order, and per box the last node whose output leaves it."""
    edges: dict[tuple[str, str], None] = {}
    last_out: dict[str, NodeRecord] = {}
    for n in report.nodes:
        dst = box_of.get(n.name)
        for arg in n.args:
            src = box_of.get(arg)
            if src is None or dst is None or src == dst:
                continue
            edges[(src, dst)] = None
            producer = next((m for m in found[src].nodes if m.name == arg), None)
            if producer is not None:
                last_out[src] = producer
    return list(edges), last_out
