"""What the explorer page needs of a report, as plain JSON-ready data.

The page lays out only the part of the graph that is open, so it gets the op nodes (with
their module, the nodes they read and their figures, already formatted as the table
formats them), the module tree with each module's children grouped into folded runs as
``report.plot`` folds them, and the figures it can colour by. Everything is listed in
the report's order, so the same report gives the same data, byte for byte.

Example
-------
>>> import torch, fxinspect
>>> blocks = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh()) for _ in range(3)])
>>> data = payload(fxinspect.analyze(blocks, torch.randn(2, 4), timing=False))
>>> data["modules"][""]["children"]        # the three blocks: one run
[['0', '1', '2']]
>>> [n["name"] for n in data["nodes"]][:3], data["nodes"][1]["module"]
(['input_1', '_0_0', '_0_1'], '0.0')
"""

from __future__ import annotations

from typing import Any

from ... import formatting as fmt
from ... import paths
from ...records import ReportRecord
from ...records.fields import REGISTERED, SUMMED, Field, Unit
from ..colouring import colour_figures, node_figure
from ..columns import unit_text
from ..edge_labels import output_dtype, output_shape
from ..folding import Folds
from .boxes import mark_boxes

__all__ = ["payload"]


def payload(report: ReportRecord) -> dict[str, Any]:
    """The page's data: ``nodes``, ``modules``, folded ``runs`` (by their first member:
    the members and the path the page shows, ``h.0–11``), the ``memory`` timeline and
    what ``colour_by`` can show."""
    folds = Folds(report)
    known = colour_figures()
    declared = [*SUMMED, *(f for f in REGISTERED.values() if f.sums)]  # a module's figures, as declared
    # those the report measured (no backward rows on a forward-only report)
    listed = [f for f in declared if any(getattr(m, f.name) is not None for m in report.modules.values())]
    nodes = []
    for n in report.nodes:
        if n.op in ("get_attr", "output"):
            continue
        entry: dict[str, Any] = {
            "name": n.name,
            "label": n.label,
            "kind": "input" if n.op == "placeholder" else "op",
            "module": paths.nearest(n.module_path, report.modules) if n.is_op else "",
            "args": list(n.args),
            "call": list(n.call),  # which call of each module on its path ran it
            "shape": output_shape(n),  # (joined as an edge's label is: see ..edge_labels)
            "dtype": output_dtype(n),
            "values": {name: _number(node_figure(n, figure)) for name, figure in known.items()} if n.is_op else {},
        }
        nodes.append(entry)
    mark_boxes(nodes, report, folds)
    output = next(n for n in report.nodes if n.op == "output")
    modules = {}
    for path, m in report.modules.items():
        modules[path] = {
            "type": m.type,
            "calls": m.calls,
            "params": m.params,
            "children": [list(run) for run in folds.runs(folds.children.get(path, []))],
            "figures": {f.name: _text(getattr(m, f.name), f) for f in listed},
            "raw": {f.name: _number(getattr(m, f.name)) for f in listed},
        }
    runs = {
        run[0]: {"members": list(run), "label": _joined(paths.parent(run[0]), folds.label(run[0]))}
        for m in modules.values()
        for run in m["children"]
        if len(run) > 1
    }
    available = [name for name in known if any(n["values"].get(name) is not None for n in nodes if n["kind"] == "op")]
    return {
        "nodes": nodes,
        "output": {"args": list(output.args), "shape": fmt.shapes(tuple(t.shape for t in report.outputs))},
        "modules": modules,
        "runs": runs,
        "memory": _memory(report),
        "labels": {f.name: f.label or f.header for f in listed},  # (what the figures are called on the page)
        "colour_by": {name: known[name].title for name in available},
        "units": {name: _unit(known[name]) for name in available},
    }


_POINTS = 2000  # the most timeline points the page draws


def _memory(report: ReportRecord) -> dict[str, Any] | None:
    """The memory timeline, for a chart: at most ``_POINTS`` points (each the highest of
    the events it stands for, so the peak is kept), where each node began, and the
    peak's figures."""
    m = report.memory
    if m is None or len(m.timeline) < 2:
        return None
    timeline = list(m.timeline)
    if len(timeline) > _POINTS:
        size = -(-len(timeline) // _POINTS)
        timeline = [max(timeline[i : i + size], key=lambda e: e[1]) for i in range(0, len(timeline), size)]
    return {
        "timeline": [list(e) for e in timeline],
        "starts": [list(e) for e in m.node_starts],
        "backward_start": m.backward_start,
        "resident": m.resident,
        "peak": m.peak,
        "peak_node": m.peak_node,
        "peak_phase": str(m.peak_phase),
    }


def _joined(parent: str, name: str) -> str:
    return f"{parent}.{name}" if parent else name


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _text(value: Any, figure: Field) -> str:
    if value is None:
        return "—"
    return unit_text(figure.unit)(value, False)


def _unit(figure: Field) -> str:
    """How the page writes a value of ``figure``: ``count``, ``bytes``, ``seconds``, or
    ``si:J`` (SI prefixes on the unit's symbol)."""
    if figure.unit in (Unit.FLOP, Unit.MAC, Unit.COUNT):
        return "count"
    return {Unit.BYTE: "bytes", Unit.SECOND: "seconds"}.get(figure.unit, f"si:{figure.unit.symbol}")
