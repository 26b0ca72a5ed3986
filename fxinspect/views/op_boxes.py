"""The boxes of the op-level diagram (``depth=None``): one per op, repeats folded, constants inside.

Two things make the op-level picture of a real model unreadable when every op node is
a box: repeated blocks (GPT-2's twelve layers are twelve copies of the same ops) and
ops that compute nothing from the model's inputs (a scalar lifted to a tensor, an empty
tensor, a transpose of a weight), which sit in a row of their own with one long edge
each. Here a node of a later member of a folded run joins the box of the node at the
same place in the run's first member (when it is the same op: members of a run have the
same structure, so they line up), and a *constant* node, one whose arguments are only
weights and other constants, is drawn inside the box of the first node that uses it; its
edges are left out, and the box lists it in ``Box.constants``.

Example
-------
>>> import torch, fxinspect
>>> blocks = [torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh()) for _ in range(3)]
>>> report = fxinspect.analyze(torch.nn.Sequential(*blocks), torch.randn(2, 4), timing=False)
>>> found, box_of, constants = op_boxes(report, Folds(report))
>>> [(b.title, b.repeats) for b in found.values() if b.kind == "op"]
[('_0_0', 3), ('_0_1', 3)]
"""

from __future__ import annotations

from ..records import NodeRecord, ReportRecord
from .box import Box, end_box
from .folding import Folds

__all__ = ["op_boxes", "constant_nodes"]


def op_boxes(report: ReportRecord, folds: Folds) -> tuple[dict[str, Box], dict[str, str], set[str]]:
    """The op-level boxes (by key, in graph order, ends included), each node's box key,
    and the constant nodes (drawn inside the box that uses them, without edges)."""
    by_name = {n.name: n for n in report.nodes}
    order = {n.name: i for i, n in enumerate(report.nodes)}
    # a collective on constants (FSDP's all-gather of a unit's parameters) sends bytes
    # the rank pays for: a box of its own, with what it gathers from drawn inside
    constants = {name for name in constant_nodes(report) if not by_name[name].comm_bytes}
    first_user = _first_users(report, constants, by_name)
    found: dict[str, Box] = {}
    box_of: dict[str, str] = {}
    for i, n in enumerate(report.nodes):
        if n.op == "get_attr" or (n.name in constants and n.name not in first_user):
            continue  # a weight, or a constant nothing uses
        if n.op in ("placeholder", "output"):
            key = f"<{n.op}:{n.name}>"
            found[key] = end_box(report, n, key, i)
        elif n.name in constants:
            continue  # placed with its user below
        else:
            key = _folded_onto(folds, n, by_name)
            box = found.get(key)
            if box is None:
                box = found[key] = Box(key, key, "op", n.label, repeats=0, order=i)
            box.repeats += 1
            box.nodes.append(n)
        box_of[n.name] = key
    for name, user in first_user.items():
        box = found[box_of[user]]
        box.nodes.append(by_name[name])
        box.constants.append(by_name[name].label)
        box_of[name] = box.key
    for box in found.values():
        if box.kind == "op":
            box.nodes.sort(key=lambda n: order[n.name])
    return found, box_of, constants


def constant_nodes(report: ReportRecord) -> set[str]:
    """Op nodes whose arguments are only weights (``get_attr``) and other such nodes:
    they compute nothing from the model's inputs."""
    kinds = {n.name: n.op for n in report.nodes}
    found: set[str] = set()
    for n in report.nodes:  # (graph order: a node's arguments come before it)
        if n.is_op and all(kinds.get(a) == "get_attr" or a in found for a in n.args):
            found.add(n.name)
    return found


def _first_users(report: ReportRecord, constants: set[str], by_name: dict[str, NodeRecord]) -> dict[str, str]:
    """Each constant node used by some other node: the first non-constant op using it
    (through other constants)."""
    users: dict[str, str] = {}
    for n in report.nodes:
        if not n.is_op or n.name in constants:
            continue
        pending = [a for a in n.args if a in constants]
        while pending:
            a = pending.pop()
            if a not in users:
                users[a] = n.name
                pending += [b for b in by_name[a].args if b in constants]
    return users


def _folded_onto(folds: Folds, n: NodeRecord, by_name: dict[str, NodeRecord]) -> str:
    """The name of the node whose box ``n`` joins: the node at the same place in the first
    member of every folded run it lies in (``n`` itself when it is in none, or when that
    node is another op)."""
    name = n.name
    while name in folds.position:
        there = _in_first_member(folds, name)
        if there is None or there == name:
            break
        if by_name[there].label != n.label:
            return n.name  # the members do not line up here: drawn on its own
        name = there
    return name


def _in_first_member(folds: Folds, name: str) -> str | None:
    """The node at ``name``'s place in the first member of the outermost folded run it
    lies in and is not in the first member of, or ``None``."""
    i = folds.position[name]
    glued = folds.glue.get(name)
    if glued is not None and glued[1] > 0:  # the ops between two members: those after the first
        run, k = glued
        start, first_start = folds.span[run[k]][1] + 1, folds.span[run[0]][1] + 1
        j = first_start + (i - start)
        return folds.names[j] if folds.glue.get(folds.names[j], (None, -1))[1] == 0 else None
    for run, k in folds.members(folds.owner[i]):
        if k > 0 and run[0] in folds.span and run[k] in folds.span:
            j = folds.span[run[0]][0] + (i - folds.span[run[k]][0])
            return folds.names[j] if j <= folds.span[run[0]][1] else None
    return name
