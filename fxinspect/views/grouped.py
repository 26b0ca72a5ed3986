"""A box of a module's own ops split into the groups of its ops that feed one another.

A stretch of a module's own ops between its children's boxes can hold ops of different
purposes that run side by side (GPT-2's embedding sum and its causal mask); each group
joined by dataflow becomes a box of its own. :mod:`.boxgraph` calls it on its boxes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..records import NodeRecord, ReportRecord

__all__ = ["split_unrelated", "unrelated_groups"]


def split_unrelated(report: ReportRecord, found: dict[str, Any], box_of: dict[str, str]) -> dict[str, Any]:
    """Each box of a module's own ops split into the groups of its ops that are joined by
    dataflow inside it (a box drawn once per repeat of a fold stays whole). A stretch is
    contiguous in the graph's order, so its parts cannot make a cycle."""
    position = {n.name: i for i, n in enumerate(report.nodes)}
    read_by: dict[str, set[str]] = {}
    for n in report.nodes:
        for arg in n.args:
            read_by.setdefault(arg, set()).add(n.name)
    out: dict[str, Any] = {}  # (boxgraph's Box records: a dataclass, replaced by field)
    for key, box in found.items():
        parts = None if box.title or box.repeats > 1 else unrelated_groups(box.nodes, read_by, position)
        if parts is None:
            out[key] = box
            continue
        for i, nodes in enumerate(parts, 1):
            part = f"{key}.{i}"
            out[part] = dataclasses.replace(box, key=part, nodes=nodes, order=position[nodes[0].name])
            for n in nodes:
                box_of[n.name] = part
    return out


def unrelated_groups(
    nodes: list[NodeRecord], read_by: dict[str, set[str]], position: dict[str, int]
) -> list[list[NodeRecord]] | None:
    """``nodes`` (a stretch of one module's own ops) in the groups joined by dataflow
    among them, each in graph order, or ``None`` when they make one group. ``read_by``:
    each node's readers; ``position``: each node's place in the graph's order."""
    if len(nodes) < 2:
        return None
    parts = _joined(nodes)
    # a group whose results nothing outside it reads (a constant made and not used)
    # is no box of its own: it stays with the first group that is
    used = [p for p in parts if any(read_by.get(n.name, set()) - {m.name for m in p} for n in p)]
    if len(used) < 2:
        return None
    for dead in (p for p in parts if p not in used):
        used[0].extend(dead)
    return [sorted(p, key=lambda n: position[n.name]) for p in used]


def _joined(nodes: list[NodeRecord]) -> list[list[NodeRecord]]:
    """``nodes`` grouped by dataflow among them (union-find), in order of first node."""
    leader = {n.name: n.name for n in nodes}

    def root(name: str) -> str:
        while leader[name] != name:
            leader[name] = name = leader[leader[name]]
        return name

    for n in nodes:
        for arg in n.args:
            if arg in leader:
                leader[root(arg)] = root(n.name)
    groups: dict[str, list[NodeRecord]] = {}
    for n in nodes:
        groups.setdefault(root(n.name), []).append(n)
    return list(groups.values())
